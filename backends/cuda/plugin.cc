// libhtam_backend_cuda.so: the CUDA backend behind the C plugin ABI
// (backends/include/htam/backend.h). C++ inside (Status, Fault), converted to htam_backend_error
// only at this boundary.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/common/plugin_base.h"
#include "backends/common/plugin_error.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_errors.h"
#include "backends/cuda/data_ops.h"
#include "backends/cuda/ncu_profile.h"
#include "backends/cuda/nvcc_compiler.h"
#include "backends/cuda/nvrtc_module.h"
#include "htam/backend.h"

using htam::plugin::MakeError;
using namespace htam::cuda;

namespace {

// A bare "nvcc" is looked up on PATH, then where toolkits live ($CUDA_HOME, /usr/local/cuda):
// a sandboxed worker's PATH is /usr/local/bin:/usr/bin:/bin, which rarely holds nvcc.
std::string FindNvcc(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::vector<std::string> dirs;
  if (const char* path = getenv("PATH")) {
    std::string p(path);
    for (size_t at = 0; at <= p.size();) {
      size_t end = p.find(':', at);
      if (end == std::string::npos) end = p.size();
      if (end > at) dirs.push_back(p.substr(at, end - at));
      at = end + 1;
    }
  }
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = getenv(env); v && *v) dirs.push_back(std::string(v) + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  for (const auto& d : dirs)
    if (access((d + "/" + name).c_str(), X_OK) == 0) return d + "/" + name;
  return name;
}

// Writes `value` into out->field only when the host's struct is large enough to hold it.
#define HTAM_SET_FIELD(out, field, value)                                             \
  do {                                                                                \
    if ((out)->struct_size >=                                                         \
        offsetof(std::remove_pointer_t<decltype(out)>, field) + sizeof((out)->field)) \
      (out)->field = (value);                                                         \
  } while (0)

htam_backend_error* ToError(const htam::Status& s, htam_backend_error_code code) {
  return MakeError(code, s.ToString());
}
htam_backend_error* ToError(const Fault& f) {
  return MakeError(f.code, f.message);
}

double ToDouble(const std::string& s, double def) {
  try {
    return s.empty() ? def : std::stod(s);
  } catch (...) {
    return def;
  }
}

}  // namespace

// The plugin's instance: the helper base (backends/common/plugin_base.h) holds the host's settings
// and the description; the constructor finds the compiler and probes the devices.
struct htam_backend : htam::plugin::Backend {
  explicit htam_backend(const htam::plugin::HostSettings& host);

  std::optional<NvccCompiler> compiler;
  std::string compiler_error;
  std::vector<DeviceProps> props;
  std::string default_arch;
  int open_devices = 0;
  htam::cuda::NcuEntryState ncu;  // the strings of the last profile_command / profile_parse

  // An option as "cuda_<key>" (the daemon's table names them so) or "<key>".
  std::string Opt(const std::string& key, const std::string& def) const {
    for (const std::string& k : {"cuda_" + key, key})
      if (host().Has(k)) return host().Option(k, def);
    return def;
  }
  bool can_run() const { return description().can_run; }
  const std::string& notes() const { return description().notes; }
};

struct htam_artifact {
  CompileOutput out;
};

struct htam_device {
  htam_backend* backend = nullptr;
  std::unique_ptr<CudaDevice> dev;
  std::unique_ptr<htam::cuda::DataOps> data;  // after dev: released before the context goes
  double call_timeout_ms = 0;
  int live_objects = 0;
};

struct htam_module {
  htam_device* device = nullptr;
  void* handle = nullptr;
  htam_kernel_fn fn = nullptr;
  std::vector<KernelResources> kernels;
  int max_registers = -1, max_shared = -1, spills = -1;
};

struct htam_buffer {
  htam_device* device = nullptr;
  void* ptr = nullptr;
  uint64_t bytes = 0;
  bool imported = false;  // opened from another process's IPC handle: closed, not freed
};

namespace {
htam_backend_error* Select(htam_device* d) {
  if (d->dev->poisoned())
    return MakeError(HTAM_ERR_DEVICE_FAULT, "device unusable after an earlier fault");
  cudaError_t e = cudaSetDevice(d->dev->props().index);
  if (e != cudaSuccess) return ToError(d->dev->FromCuda(e, "cudaSetDevice"));
  return nullptr;
}
}  // namespace

htam_backend::htam_backend(const htam::plugin::HostSettings& host) : Backend("cuda", host) {
  htam::plugin::Description& d = description_;
  d.language = "cuda";
  d.source_suffix = ".cu";
  CompilerOptions co;
  co.nvcc = FindNvcc(Opt("nvcc", "nvcc"));
  co.flags = Opt("nvcc_flags", "-O3");
  co.sdk_include_dir = host.sdk_include_dir.empty() ? "sdk/include" : host.sdk_include_dir;
  co.cache_dir = host.cache_dir;
  // The backend's own kernels (probes, test data), compiled once per cache; never in a runner's
  // (option nvrtc_cache=false): what it holds is read by every later evaluation.
  htam::cuda::SetNvrtcCacheDir(Opt("nvrtc_cache", "true") != "false" ? co.cache_dir : "");
  co.work_dir = host.work_dir == "." ? "/tmp" : host.work_dir;  // "." = the host gave none
  co.timeout_s = ToDouble(Opt("compile_timeout_s", ""), 120);
  co.max_diagnostic_bytes = static_cast<size_t>(ToDouble(Opt("max_diagnostic_bytes", ""), 16384));
  auto made = NvccCompiler::Create(co);
  std::string nvcc_version = "nvcc unavailable";
  if (made.ok()) {
    compiler.emplace(std::move(made).value());
    const std::string& v = compiler->version();
    size_t p = v.rfind("release ");
    nvcc_version =
        "nvcc " + (p == std::string::npos ? v : v.substr(p + 8, v.find('\n', p) - p - 8));
  } else {
    compiler_error = made.status().ToString();
    d.notes += "compile unavailable: " + compiler_error + "; ";
  }
  int driver = 0;
  cudaDriverGetVersion(&driver);
  d.version = nvcc_version + ", NVRTC " + NvrtcVersion() + ", driver CUDA " +
              std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10);
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    d.notes += "runtime path cannot run here: " + CudaErrorText(e);
    n = 0;
  }
  for (int i = 0; i < n; ++i) {
    auto p = CudaDevice::Probe(i);
    if (p.ok()) props.push_back(*p);
  }
  default_arch = Opt("arch", "");
  if (default_arch.empty() || default_arch == "auto")
    default_arch = props.empty() ? "sm_90a" : props[0].arch;
  for (const auto& p : props) {  // props is final: the infos point into its strings
    htam_device_info info{};
    info.index = p.index;
    info.name = p.name.c_str();
    info.arch = p.arch.c_str();
    info.memory_bytes = p.memory_bytes;
    NvmlClocks clocks(p.pci_bus_id, p.peak_sm_khz, p.peak_mem_khz);
    ClockReading c = clocks.Read();
    info.sm_clock_mhz = c.sm_mhz;
    info.mem_clock_mhz = c.mem_mhz;
    info.cache_bytes = p.l2_bytes;
    d.devices.push_back(info);
  }
  d.can_run = !props.empty();
  Log(HTAM_LOG_INFO, "cuda backend: " + d.version + ", " + std::to_string(props.size()) +
                         " device(s), default arch " + default_arch);
}

HTAM_BACKEND_PLUGIN(htam_backend, "cuda")

extern "C" {

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_compile(htam_backend* b,
                                                             const htam_compile_request* req,
                                                             htam_artifact** out) {
  if (!b || !req || !out || (!req->source && req->source_len)) {
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "compile: null argument");
  }
  if (req->language && *req->language && std::strcmp(req->language, "cuda") != 0) {
    return MakeError(
        HTAM_ERR_INVALID_ARGUMENT,
        std::string("cuda backend compiles language 'cuda', not '") + req->language + "'");
  }
  if (!b->compiler) return MakeError(HTAM_ERR_UNAVAILABLE, b->compiler_error);
  std::string arch = req->arch && *req->arch ? req->arch : b->default_arch;
  std::string_view source(req->source ? req->source : "", req->source_len);
  auto r = b->compiler->Compile(source, arch, req->options ? req->options : "",
                                req->name ? req->name : "candidate", req->timeout_s);
  if (!r.ok()) {
    const htam::Status& s = r.status();
    htam_backend_error_code code =
        s.code() == htam::Status::Code::kTimeout           ? HTAM_ERR_TIMEOUT
        : s.code() == htam::Status::Code::kInvalidArgument ? HTAM_ERR_INVALID_ARGUMENT
        : s.code() == htam::Status::Code::kUnavailable     ? HTAM_ERR_UNAVAILABLE
                                                           : HTAM_ERR_INTERNAL;
    return ToError(s, code);
  }
  if (!r->ok) return MakeError(HTAM_ERR_COMPILE, r->diagnostics);
  auto a = std::make_unique<htam_artifact>();
  a->out = std::move(r).value();
  *out = a.release();
  return nullptr;
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_artifact_info(const htam_artifact* a,
                                                                   htam_artifact_info* out) {
  if (!a || !out) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "artifact_info: null argument");
  HTAM_SET_FIELD(out, path, a->out.so_path.c_str());
  HTAM_SET_FIELD(out, content_hash, a->out.hash.c_str());
  HTAM_SET_FIELD(out, diagnostics, a->out.diagnostics.c_str());
  HTAM_SET_FIELD(out, from_cache, a->out.from_cache ? 1 : 0);
  HTAM_SET_FIELD(out, compile_ms, a->out.from_cache ? 0.0 : a->out.compile_ms);
  return nullptr;
}

HTAM_BACKEND_EXPORT void htam_backend_artifact_release(htam_artifact* a) {
  delete a;
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_open(htam_backend* b, int32_t index,
                                                                 htam_device** out) {
  if (!b || !out) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "device_open: null argument");
  if (!b->can_run()) return MakeError(HTAM_ERR_UNAVAILABLE, "no CUDA device: " + b->notes());
  if (index < 0 || index >= static_cast<int32_t>(b->props.size())) {
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "no CUDA device " + std::to_string(index));
  }
  DeviceOptions o;
  o.measure_roofline = b->Opt("roofline", "true") != "false";
  o.flush_bytes = static_cast<uint64_t>(ToDouble(b->Opt("flush_mb", "0"), 0) * (1 << 20));
  o.lag_slack_us = ToDouble(b->Opt("lag_slack_us", ""), 4.0);
  o.hold_us = ToDouble(b->Opt("hold_us", ""), 20.0);
  std::string mode = b->Opt("timing_mode", "cupti");
  if (mode != "cupti" && mode != "sync" && mode != "hold") {
    return MakeError(HTAM_ERR_INVALID_ARGUMENT,
                     "cuda_timing_mode must be cupti, sync or hold, not '" + mode + "'");
  }
  o.sync_window = mode == "sync";
  o.cupti = mode == "cupti";
  o.cupti_batch = b->Opt("cupti_batch", "true") != "false";
  auto d = CudaDevice::Open(index, o);
  if (!d.ok()) return ToError(d.status(), HTAM_ERR_UNAVAILABLE);
  auto h = std::make_unique<htam_device>();
  h->backend = b;
  h->dev = std::move(d).value();
  h->call_timeout_ms = ToDouble(b->Opt("call_timeout_ms", ""), 10000);
  const Roofline& r = h->dev->roofline();
  b->Log(HTAM_LOG_INFO,
         "cuda device " + std::to_string(index) + " (" + h->dev->props().name + "): copy " +
             std::to_string(r.copy_bytes_per_s / 1e9) + " GB/s, fp32 " +
             std::to_string(r.fp32_flops / 1e12) + " TFLOP/s, bf16 mma " +
             std::to_string(r.tensor16_flops / 1e12) + " TFLOP/s (" + r.note + "); timing mode " +
             h->dev->timing_mode() +
             (h->dev->timing_note().empty() ? "" : " (" + h->dev->timing_note() + ")"));
  ++b->open_devices;
  *out = h.release();
  return nullptr;
}

HTAM_BACKEND_EXPORT void htam_backend_device_close(htam_device* d) {
  if (!d) return;
  --d->backend->open_devices;
  delete d;
}

HTAM_BACKEND_EXPORT htam_stream htam_backend_device_stream(htam_device* d) {
  return d ? static_cast<htam_stream>(d->dev->stream()) : nullptr;
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_roofline(htam_device* d,
                                                                     htam_roofline_report* out) {
  if (!d || !out) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "device_roofline: null argument");
  const Roofline& r = d->dev->roofline();
  ClockReading c = d->dev->ReadClocks();
  HTAM_SET_FIELD(out, copy_bytes_per_s, r.copy_bytes_per_s);
  HTAM_SET_FIELD(out, fp32_flops, r.fp32_flops);
  HTAM_SET_FIELD(out, tensor16_flops, r.tensor16_flops);
  HTAM_SET_FIELD(out, sm_clock_mhz, c.sm_mhz);
  HTAM_SET_FIELD(out, mem_clock_mhz, c.mem_mhz);
  return nullptr;
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_load(htam_device* d, const htam_artifact* a,
                                                          htam_module** out) {
  if (!d || !a || !out) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "load: null argument");
  if (htam_backend_error* e = Select(d)) return e;
  dlerror();
  void* h = dlopen(a->out.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    return MakeError(HTAM_ERR_LOAD, std::string("cannot load candidate: ") + (why ? why : "?"));
  }
  void* sym = dlsym(h, "htam_kernel");
  if (!sym) {
    dlclose(h);
    return MakeError(HTAM_ERR_LOAD,
                     "candidate does not export htam_kernel (declare it with HTAM_KERNEL_ENTRY)");
  }
  cudaError_t e = cudaGetLastError();  // static initializers of the candidate may have failed
  if (e != cudaSuccess && ClassifyCudaError(e) == CudaFault::kDeviceFault) {
    return ToError(d->dev->FromCuda(e, "loading candidate"));
  }
  auto m = std::make_unique<htam_module>();
  m->device = d;
  m->handle = h;
  m->fn = reinterpret_cast<htam_kernel_fn>(sym);
  m->kernels = a->out.kernels;
  m->max_registers = a->out.MaxRegisters();
  m->max_shared = a->out.MaxSharedBytes();
  m->spills = a->out.TotalSpillBytes();
  ++d->live_objects;
  *out = m.release();
  return nullptr;
}

HTAM_BACKEND_EXPORT void htam_backend_module_release(htam_module* m) {
  if (!m) return;
  // After a device fault the candidate's destructors would touch a dead context: keep it mapped.
  if (m->handle && !m->device->dev->poisoned()) dlclose(m->handle);
  --m->device->live_objects;
  delete m;
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_alloc(htam_device* d, uint64_t bytes,
                                                                  htam_buffer** out) {
  if (!d || !out) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_alloc: null argument");
  if (htam_backend_error* e = Select(d)) return e;
  auto b = std::make_unique<htam_buffer>();
  b->device = d;
  b->bytes = bytes;
  if (bytes > 0) {
    cudaError_t e = cudaMalloc(&b->ptr, bytes);
    if (e != cudaSuccess) {
      Fault f = d->dev->FromCuda(e, "cudaMalloc(" + std::to_string(bytes) + ")");
      cudaGetLastError();
      return ToError(f);
    }
  }
  ++d->live_objects;
  *out = b.release();
  return nullptr;
}

HTAM_BACKEND_EXPORT void htam_backend_buffer_free(htam_buffer* b) {
  if (!b) return;
  if (b->ptr && !b->device->dev->poisoned()) {
    cudaSetDevice(b->device->dev->props().index);
    if (b->imported)
      cudaIpcCloseMemHandle(b->ptr);
    else
      cudaFree(b->ptr);
    cudaGetLastError();
  }
  --b->device->live_objects;
  delete b;
}

HTAM_BACKEND_EXPORT void* htam_backend_buffer_address(htam_buffer* b) {
  return b ? b->ptr : nullptr;
}

// Sharing with the runner process: CUDA IPC memory handles (the runner opens the verifier's
// allocation; both processes see the same device memory).
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_export(htam_buffer* b,
                                                                   htam_buffer_handle* out) {
  if (!b || !out) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_export: null argument");
  out->bytes = b->bytes;
  out->fd = -1;
  out->data_len = 0;
  if (!b->ptr) return nullptr;  // an empty buffer: nothing to share
  if (htam_backend_error* e = Select(b->device)) return e;
  cudaIpcMemHandle_t h;
  static_assert(sizeof(h) <= sizeof(out->data), "IPC handle larger than the ABI's handle");
  cudaError_t e = cudaIpcGetMemHandle(&h, b->ptr);
  if (e != cudaSuccess) {
    Fault f = b->device->dev->FromCuda(e, "cudaIpcGetMemHandle");
    cudaGetLastError();
    return ToError(f);
  }
  std::memcpy(out->data, &h, sizeof(h));
  out->data_len = sizeof(h);
  return nullptr;
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_import(htam_device* d,
                                                                   const htam_buffer_handle* h,
                                                                   htam_buffer** out) {
  if (h && h->fd >= 0) close(h->fd);
  if (!d || !h || !out) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_import: null argument");
  if (htam_backend_error* e = Select(d)) return e;
  auto b = std::make_unique<htam_buffer>();
  b->device = d;
  b->bytes = h->bytes;
  b->imported = true;
  if (h->data_len) {
    cudaIpcMemHandle_t ih;
    if (h->data_len != sizeof(ih))
      return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_import: not a CUDA IPC handle");
    std::memcpy(&ih, h->data, sizeof(ih));
    cudaError_t e = cudaIpcOpenMemHandle(&b->ptr, ih, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      Fault f = d->dev->FromCuda(e, "cudaIpcOpenMemHandle");
      cudaGetLastError();
      return ToError(f);
    }
  }
  ++d->live_objects;
  *out = b.release();
  return nullptr;
}

namespace {
htam_backend_error* CheckRange(htam_buffer* b, uint64_t offset, uint64_t bytes) {
  if (!b) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "null buffer");
  if (offset > b->bytes || bytes > b->bytes - offset) {
    return MakeError(HTAM_ERR_INVALID_ARGUMENT,
                     "range [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                         ") outside a buffer of " + std::to_string(b->bytes) + " bytes");
  }
  return Select(b->device);
}
htam_backend_error* Sync(htam_buffer* b, cudaError_t e, const char* what) {
  if (e == cudaSuccess) e = cudaStreamSynchronize(b->device->dev->stream());
  if (e != cudaSuccess) return ToError(b->device->dev->FromCuda(e, what));
  return nullptr;
}
}  // namespace

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_copy_to_device(htam_buffer* dst,
                                                                    uint64_t offset,
                                                                    const void* src,
                                                                    uint64_t bytes) {
  if (htam_backend_error* e = CheckRange(dst, offset, bytes)) return e;
  if (bytes == 0) return nullptr;
  if (!src) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "copy_to_device: null source");
  cudaStream_t s = dst->device->dev->stream();
  return Sync(
      dst,
      cudaMemcpyAsync(static_cast<char*>(dst->ptr) + offset, src, bytes, cudaMemcpyHostToDevice, s),
      "copy to device");
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_copy_to_host(void* dst, htam_buffer* src,
                                                                  uint64_t offset, uint64_t bytes) {
  if (htam_backend_error* e = CheckRange(src, offset, bytes)) return e;
  if (bytes == 0) return nullptr;
  if (!dst) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "copy_to_host: null destination");
  // The whole device first: a candidate's side-stream work must not race with the read-back.
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) {
    e = cudaMemcpyAsync(dst, static_cast<char*>(src->ptr) + offset, bytes, cudaMemcpyDeviceToHost,
                        src->device->dev->stream());
  }
  return Sync(src, e, "copy to host");
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_memset(htam_buffer* dst, uint64_t offset,
                                                            uint8_t value, uint64_t bytes) {
  if (htam_backend_error* e = CheckRange(dst, offset, bytes)) return e;
  if (bytes == 0) return nullptr;
  return Sync(dst,
              cudaMemsetAsync(static_cast<char*>(dst->ptr) + offset, value, bytes,
                              dst->device->dev->stream()),
              "memset");
}

namespace {
htam::cuda::DataOps* Data(htam_device* d) {
  if (!d->data) d->data = std::make_unique<htam::cuda::DataOps>(d->dev->props().arch);
  return d->data.get();
}
htam_backend_error* DataError(const htam::Status& s) {
  return MakeError(s.code() == htam::Status::Code::kUnavailable ? HTAM_ERR_UNSUPPORTED
                                                                : HTAM_ERR_INTERNAL,
                   s.message());
}
}  // namespace

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_fill(htam_buffer* b, uint64_t offset,
                                                                 const htam_fill_request* req) {
  if (!b || !req || req->struct_size < sizeof(htam_fill_request) || req->dtype < 0 ||
      req->dtype > HTAM_BOOL)
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_fill: bad request");
  const uint64_t size = uint64_t(htam_dtype_size(htam_dtype(req->dtype)));
  if (req->count > (UINT64_MAX / 8)) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_fill: count");
  if (htam_backend_error* e = CheckRange(b, offset, req->count * size)) return e;
  htam::Status s = Data(b->device)->Fill(static_cast<char*>(b->ptr) + offset, *req,
                                         b->device->dev->stream());
  return s.ok() ? nullptr : DataError(s);
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_copy(htam_buffer* dst, uint64_t dst_off,
                                                                 htam_buffer* src, uint64_t src_off,
                                                                 uint64_t bytes) {
  if (htam_backend_error* e = CheckRange(dst, dst_off, bytes)) return e;
  if (htam_backend_error* e = CheckRange(src, src_off, bytes)) return e;
  if (dst->device != src->device)
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_copy: buffers of two devices");
  if (bytes == 0) return nullptr;
  return Sync(dst,
              cudaMemcpyAsync(static_cast<char*>(dst->ptr) + dst_off,
                              static_cast<const char*>(src->ptr) + src_off, bytes,
                              cudaMemcpyDeviceToDevice, dst->device->dev->stream()),
              "copy");
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_memory_used(htam_device* d,
                                                                        uint64_t* used_bytes) {
  if (!d || !used_bytes) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "device_memory_used: null");
  if (htam_backend_error* e = Select(d)) return e;
  size_t free_b = 0, total_b = 0;
  cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
  if (e != cudaSuccess) return ToError(d->dev->FromCuda(e, "cudaMemGetInfo"));
  *used_bytes = uint64_t(total_b - free_b);
  return nullptr;
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_compare(
    htam_device* d, const htam_compare_request* req, htam_compare_result* out) {
  if (!d || !req || !out || req->struct_size < sizeof(htam_compare_request) || req->dtype < 0 ||
      req->dtype > HTAM_BOOL || !req->a || !req->b || req->a->device != d || req->b->device != d ||
      req->mode < 0 || req->mode > 2)
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_compare: bad request");
  const uint64_t size = uint64_t(htam_dtype_size(htam_dtype(req->dtype)));
  if (req->count > (UINT64_MAX / 8)) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_compare: count");
  if (htam_backend_error* e = CheckRange(req->a, req->a_offset, req->count * size)) return e;
  if (htam_backend_error* e = CheckRange(req->b, req->b_offset, req->count * size)) return e;
  htam_compare_result r{};
  htam::Status s = Data(d)->Compare(static_cast<const char*>(req->a->ptr) + req->a_offset,
                                    static_cast<const char*>(req->b->ptr) + req->b_offset, *req,
                                    d->dev->stream(), &r);
  if (!s.ok()) return DataError(s);
  HTAM_SET_FIELD(out, mismatches, r.mismatches);
  HTAM_SET_FIELD(out, first_mismatch, r.first_mismatch);
  HTAM_SET_FIELD(out, first_nonfinite, r.first_nonfinite);
  HTAM_SET_FIELD(out, a_all_zero, r.a_all_zero);
  HTAM_SET_FIELD(out, b_any_nonzero, r.b_any_nonzero);
  return nullptr;
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_run(htam_module* m, const htam_tensor* inputs,
                                                         int32_t num_inputs, htam_tensor* outputs,
                                                         int32_t num_outputs, int32_t* kernel_rc) {
  if (!m || num_inputs < 0 || num_outputs < 0 || (num_inputs && !inputs) ||
      (num_outputs && !outputs)) {
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "run: bad arguments");
  }
  if (htam_backend_error* e = Select(m->device)) return e;
  if (kernel_rc) *kernel_rc = 0;
  MaybeFault f = m->device->dev->Call(m->fn, inputs, num_inputs, outputs, num_outputs,
                                      m->device->call_timeout_ms);
  if (f) {
    if (kernel_rc) *kernel_rc = f->kernel_rc;
    return ToError(*f);
  }
  return nullptr;
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_time(htam_module* m,
                                                          const htam_timing_request* req,
                                                          htam_timing_result* res) {
  if (!m || !req || !res) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "time: null argument");
  if (htam_backend_error* e = Select(m->device)) return e;
  htam_timing_request r{};
  std::memcpy(&r, req, std::min<size_t>(req->struct_size, sizeof r));
  r.struct_size = sizeof r;
  if (req->struct_size < sizeof r) r.call_timeout_ms = 0;  // fields the host did not send
  if (r.call_timeout_ms <= 0) r.call_timeout_ms = m->device->call_timeout_ms;
  double* rep_us = res->struct_size >= offsetof(htam_timing_result, rep_us) + sizeof(double*)
                       ? res->rep_us
                       : nullptr;
  TimeStats stats;
  MaybeFault f = m->device->dev->Time(m->fn, r, rep_us, &stats);
  if (f) return ToError(*f);
  HTAM_SET_FIELD(res, warmup_done, stats.warmup_done);
  HTAM_SET_FIELD(res, all_streams, m->device->dev->all_streams() ? 1 : 0);
  HTAM_SET_FIELD(res, sm_clock_mhz, stats.clocks.sm_mhz);
  HTAM_SET_FIELD(res, mem_clock_mhz, stats.clocks.mem_mhz);
  if (stats.off_stream_reps > 0) {
    m->device->backend->Log(
        HTAM_LOG_WARN, std::to_string(stats.off_stream_reps) + " of " +
                           std::to_string(r.repetitions) +
                           " repetitions had work outliving the candidate's stream (a side stream "
                           "it did not join); charged up to device idle");
  }
  if (stats.empty_reps > 0) {
    m->device->backend->Log(
        HTAM_LOG_WARN, std::to_string(stats.empty_reps) + " of " + std::to_string(r.repetitions) +
                           " repetitions issued no device work CUPTI could see; their event "
                           "window was used");
  }
  return nullptr;
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile(
    htam_module* m, const htam_tensor* inputs, int32_t num_inputs, htam_tensor* outputs,
    int32_t num_outputs, htam_profile_report* out) {
  if (!m || !out) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "profile: null argument");
  HTAM_SET_FIELD(out, registers, m->max_registers);
  HTAM_SET_FIELD(out, shared_bytes, m->max_shared);
  HTAM_SET_FIELD(out, spill_bytes, m->spills);
  ClockReading c = m->device->dev->ReadClocks();
  HTAM_SET_FIELD(out, sm_clock_mhz, c.sm_mhz);
  HTAM_SET_FIELD(out, mem_clock_mhz, c.mem_mhz);
  return nullptr;
}

// The profiler around a one-call process (API 1.3): Nsight Compute (ncu_profile.h).
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile_command(
    htam_backend* b, const htam_profile_command_request* request, htam_profile_command* out) {
  if (!b) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "profile_command: null backend");
  return NcuProfileCommandEntry(request, &b->ncu, out);
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile_parse(
    htam_backend* b, const htam_profile_output* output, htam_profile_summary* out) {
  if (!b) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "profile_parse: null backend");
  return NcuProfileParseEntry(output, &b->ncu, out);
}

}  // extern "C"
