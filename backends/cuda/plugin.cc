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

using htam::plugin::Error;
using htam::plugin::MakeError;
using htam::plugin::ToError;
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

  Error Compile(const htam_compile_request& req, std::string_view source, htam_artifact** out);
  Error OpenDevice(int32_t index, htam_device** out);
  Error ProfileCommand(const htam_profile_command_request* r, htam_profile_command* out) {
    return NcuProfileCommandEntry(r, &ncu, out);
  }
  Error ProfileParse(const htam_profile_output* o, htam_profile_summary* out) {
    return NcuProfileParseEntry(o, &ncu, out);
  }
};

struct htam_artifact {
  CompileOutput out;

  Error Info(htam_artifact_info* i) const;
};

struct htam_device {
  htam_backend* backend = nullptr;
  std::unique_ptr<CudaDevice> dev;
  std::unique_ptr<htam::cuda::DataOps> data;  // after dev: released before the context goes
  double call_timeout_ms = 0;
  int live_objects = 0;

  ~htam_device() {
    if (backend) --backend->open_devices;
  }
  htam_stream Stream() { return static_cast<htam_stream>(dev->stream()); }
  Error Roofline(htam_roofline_report* out);
  Error Load(const htam_artifact& a, htam_module** out);
  Error Alloc(uint64_t bytes, htam_buffer** out);
  Error MemoryUsed(uint64_t* used_bytes);
  Error Import(const htam_buffer_handle& h, htam_buffer** out);
  Error Compare(const htam_compare_request& req, htam_compare_result* out);
  htam::cuda::DataOps* Data();
};

struct htam_module {
  htam_device* device = nullptr;
  void* handle = nullptr;
  htam_kernel_fn fn = nullptr;
  std::vector<KernelResources> kernels;
  int max_registers = -1, max_shared = -1, spills = -1;

  ~htam_module();
  Error Run(const htam_tensor* in, int32_t n_in, htam_tensor* out, int32_t n_out,
            int32_t* kernel_rc);
  Error Time(const htam_timing_request& req, htam_timing_result* res);
  Error Profile(const htam_tensor*, int32_t, htam_tensor*, int32_t, htam_profile_report* out);
};

struct htam_buffer {
  htam_device* device = nullptr;
  void* ptr = nullptr;
  uint64_t bytes = 0;
  bool imported = false;  // opened from another process's IPC handle: closed, not freed

  ~htam_buffer();
  void* Address() { return ptr; }
  char* At(uint64_t offset) { return static_cast<char*>(ptr) + offset; }
  Error CopyToDevice(uint64_t offset, const void* src, uint64_t n);
  Error CopyToHost(void* dst, uint64_t offset, uint64_t n);
  Error Memset(uint64_t offset, uint8_t value, uint64_t n);
  Error Export(htam_buffer_handle* out);
  Error Fill(uint64_t offset, const htam_fill_request& req);
  Error CopyFrom(uint64_t offset, htam_buffer& src, uint64_t src_offset, uint64_t n);
  // Waits for the stream after an operation issued on it (e), or reports e.
  Error Sync(cudaError_t e, const char* what);
};

namespace {
Error Select(htam_device* d) {
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

Error htam_backend::Compile(const htam_compile_request& req, std::string_view source,
                            htam_artifact** out) {
  if (!compiler) return MakeError(HTAM_ERR_UNAVAILABLE, compiler_error);
  std::string arch = req.arch && *req.arch ? req.arch : default_arch;
  auto r = compiler->Compile(source, arch, req.options ? req.options : "",
                             req.name ? req.name : "candidate", req.timeout_s);
  if (!r.ok()) return ToError(r.status());
  if (!r->ok) return MakeError(HTAM_ERR_COMPILE, r->diagnostics);
  auto a = std::make_unique<htam_artifact>();
  a->out = std::move(r).value();
  *out = a.release();
  return nullptr;
}

Error htam_artifact::Info(htam_artifact_info* i) const {
  i->path = out.so_path.c_str();
  i->content_hash = out.hash.c_str();
  i->diagnostics = out.diagnostics.c_str();
  i->from_cache = out.from_cache ? 1 : 0;
  i->compile_ms = out.from_cache ? 0.0 : out.compile_ms;
  return nullptr;
}

Error htam_backend::OpenDevice(int32_t index, htam_device** out) {
  if (!can_run()) return MakeError(HTAM_ERR_UNAVAILABLE, "no CUDA device: " + notes());
  if (index < 0 || index >= static_cast<int32_t>(props.size())) {
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "no CUDA device " + std::to_string(index));
  }
  DeviceOptions o;
  o.measure_roofline = Opt("roofline", "true") != "false";
  o.flush_bytes = static_cast<uint64_t>(ToDouble(Opt("flush_mb", "0"), 0) * (1 << 20));
  o.lag_slack_us = ToDouble(Opt("lag_slack_us", ""), 4.0);
  o.hold_us = ToDouble(Opt("hold_us", ""), 20.0);
  std::string mode = Opt("timing_mode", "cupti");
  if (mode != "cupti" && mode != "sync" && mode != "hold") {
    return MakeError(HTAM_ERR_INVALID_ARGUMENT,
                     "cuda_timing_mode must be cupti, sync or hold, not '" + mode + "'");
  }
  o.sync_window = mode == "sync";
  o.cupti = mode == "cupti";
  o.cupti_batch = Opt("cupti_batch", "true") != "false";
  auto d = CudaDevice::Open(index, o);
  if (!d.ok()) return ToError(d.status(), HTAM_ERR_UNAVAILABLE);
  auto h = std::make_unique<htam_device>();
  h->backend = this;
  ++open_devices;
  h->dev = std::move(d).value();
  h->call_timeout_ms = ToDouble(Opt("call_timeout_ms", ""), 10000);
  const Roofline& r = h->dev->roofline();
  Log(HTAM_LOG_INFO, "cuda device " + std::to_string(index) + " (" + h->dev->props().name +
                         "): copy " + std::to_string(r.copy_bytes_per_s / 1e9) + " GB/s, fp32 " +
                         std::to_string(r.fp32_flops / 1e12) + " TFLOP/s, bf16 mma " +
                         std::to_string(r.tensor16_flops / 1e12) + " TFLOP/s (" + r.note +
                         "); timing mode " + h->dev->timing_mode() +
                         (h->dev->timing_note().empty() ? "" : " (" + h->dev->timing_note() + ")"));
  *out = h.release();
  return nullptr;
}

Error htam_device::Roofline(htam_roofline_report* out) {
  const htam::cuda::Roofline& r = dev->roofline();
  ClockReading c = dev->ReadClocks();
  out->copy_bytes_per_s = r.copy_bytes_per_s;
  out->fp32_flops = r.fp32_flops;
  out->tensor16_flops = r.tensor16_flops;
  out->sm_clock_mhz = c.sm_mhz;
  out->mem_clock_mhz = c.mem_mhz;
  return nullptr;
}

Error htam_device::Load(const htam_artifact& a, htam_module** out) {
  if (Error e = Select(this)) return e;
  dlerror();
  void* h = dlopen(a.out.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
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
    return ToError(dev->FromCuda(e, "loading candidate"));
  }
  auto m = std::make_unique<htam_module>();
  m->device = this;
  m->handle = h;
  m->fn = reinterpret_cast<htam_kernel_fn>(sym);
  m->kernels = a.out.kernels;
  m->max_registers = a.out.MaxRegisters();
  m->max_shared = a.out.MaxSharedBytes();
  m->spills = a.out.TotalSpillBytes();
  ++live_objects;
  *out = m.release();
  return nullptr;
}

htam_module::~htam_module() {
  // After a device fault the candidate's destructors would touch a dead context: keep it mapped.
  if (handle && !device->dev->poisoned()) dlclose(handle);
  --device->live_objects;
}

Error htam_device::Alloc(uint64_t bytes, htam_buffer** out) {
  if (Error e = Select(this)) return e;
  auto b = std::make_unique<htam_buffer>();
  b->bytes = bytes;
  if (bytes > 0) {
    cudaError_t e = cudaMalloc(&b->ptr, bytes);
    if (e != cudaSuccess) {
      Fault f = dev->FromCuda(e, "cudaMalloc(" + std::to_string(bytes) + ")");
      cudaGetLastError();
      return ToError(f);
    }
  }
  b->device = this;
  ++live_objects;
  *out = b.release();
  return nullptr;
}

htam_buffer::~htam_buffer() {
  if (!device) return;  // never handed out
  if (ptr && !device->dev->poisoned()) {
    cudaSetDevice(device->dev->props().index);
    if (imported)
      cudaIpcCloseMemHandle(ptr);
    else
      cudaFree(ptr);
    cudaGetLastError();
  }
  --device->live_objects;
}

// Sharing with the runner process: CUDA IPC memory handles (the runner opens the verifier's
// allocation; both processes see the same device memory).
Error htam_buffer::Export(htam_buffer_handle* out) {
  out->bytes = bytes;
  out->fd = -1;
  out->data_len = 0;
  if (!ptr) return nullptr;  // an empty buffer: nothing to share
  if (Error e = Select(device)) return e;
  cudaIpcMemHandle_t h;
  static_assert(sizeof(h) <= sizeof(out->data), "IPC handle larger than the ABI's handle");
  cudaError_t e = cudaIpcGetMemHandle(&h, ptr);
  if (e != cudaSuccess) {
    Fault f = device->dev->FromCuda(e, "cudaIpcGetMemHandle");
    cudaGetLastError();
    return ToError(f);
  }
  std::memcpy(out->data, &h, sizeof(h));
  out->data_len = sizeof(h);
  return nullptr;
}

Error htam_device::Import(const htam_buffer_handle& h, htam_buffer** out) {
  if (Error e = Select(this)) return e;
  auto b = std::make_unique<htam_buffer>();
  b->bytes = h.bytes;
  b->imported = true;
  if (h.data_len) {
    cudaIpcMemHandle_t ih;
    if (h.data_len != sizeof(ih))
      return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_import: not a CUDA IPC handle");
    std::memcpy(&ih, h.data, sizeof(ih));
    cudaError_t e = cudaIpcOpenMemHandle(&b->ptr, ih, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      Fault f = dev->FromCuda(e, "cudaIpcOpenMemHandle");
      cudaGetLastError();
      return ToError(f);
    }
  }
  b->device = this;
  ++live_objects;
  *out = b.release();
  return nullptr;
}

Error htam_buffer::Sync(cudaError_t e, const char* what) {
  if (e == cudaSuccess) e = cudaStreamSynchronize(device->dev->stream());
  if (e != cudaSuccess) return ToError(device->dev->FromCuda(e, what));
  return nullptr;
}

Error htam_buffer::CopyToDevice(uint64_t offset, const void* src, uint64_t n) {
  if (Error e = Select(device)) return e;
  return Sync(cudaMemcpyAsync(At(offset), src, n, cudaMemcpyHostToDevice, device->dev->stream()),
              "copy to device");
}

Error htam_buffer::CopyToHost(void* dst, uint64_t offset, uint64_t n) {
  if (Error e = Select(device)) return e;
  // The whole device first: a candidate's side-stream work must not race with the read-back.
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(dst, At(offset), n, cudaMemcpyDeviceToHost, device->dev->stream());
  return Sync(e, "copy to host");
}

Error htam_buffer::Memset(uint64_t offset, uint8_t value, uint64_t n) {
  if (Error e = Select(device)) return e;
  return Sync(cudaMemsetAsync(At(offset), value, n, device->dev->stream()), "memset");
}

namespace {
Error DataError(const htam::Status& s) {
  return MakeError(
      s.code() == htam::Status::Code::kUnavailable ? HTAM_ERR_UNSUPPORTED : HTAM_ERR_INTERNAL,
      s.message());
}
}  // namespace

htam::cuda::DataOps* htam_device::Data() {
  if (!data) data = std::make_unique<htam::cuda::DataOps>(dev->props().arch);
  return data.get();
}

Error htam_buffer::Fill(uint64_t offset, const htam_fill_request& req) {
  if (Error e = Select(device)) return e;
  htam::Status s = device->Data()->Fill(At(offset), req, device->dev->stream());
  return s.ok() ? nullptr : DataError(s);
}

Error htam_buffer::CopyFrom(uint64_t offset, htam_buffer& src, uint64_t src_offset, uint64_t n) {
  if (device != src.device)
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_copy: buffers of two devices");
  if (Error e = Select(device)) return e;
  return Sync(cudaMemcpyAsync(At(offset), src.At(src_offset), n, cudaMemcpyDeviceToDevice,
                              device->dev->stream()),
              "copy");
}

Error htam_device::MemoryUsed(uint64_t* used_bytes) {
  if (Error e = Select(this)) return e;
  size_t free_b = 0, total_b = 0;
  cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
  if (e != cudaSuccess) return ToError(dev->FromCuda(e, "cudaMemGetInfo"));
  *used_bytes = uint64_t(total_b - free_b);
  return nullptr;
}

Error htam_device::Compare(const htam_compare_request& req, htam_compare_result* out) {
  if (req.a->device != this || req.b->device != this)
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "buffer_compare: buffers of another device");
  if (Error e = Select(this)) return e;
  htam::Status s =
      Data()->Compare(req.a->At(req.a_offset), req.b->At(req.b_offset), req, dev->stream(), out);
  return s.ok() ? nullptr : DataError(s);
}

Error htam_module::Run(const htam_tensor* in, int32_t n_in, htam_tensor* out, int32_t n_out,
                       int32_t* kernel_rc) {
  if (Error e = Select(device)) return e;
  MaybeFault f = device->dev->Call(fn, in, n_in, out, n_out, device->call_timeout_ms);
  if (f) {
    if (kernel_rc) *kernel_rc = f->kernel_rc;
    return ToError(*f);
  }
  return nullptr;
}

Error htam_module::Time(const htam_timing_request& req, htam_timing_result* res) {
  if (Error e = Select(device)) return e;
  htam_timing_request r = req;
  if (r.call_timeout_ms <= 0) r.call_timeout_ms = device->call_timeout_ms;
  TimeStats stats;
  MaybeFault f = device->dev->Time(fn, r, res->rep_us, &stats);
  if (f) return ToError(*f);
  res->warmup_done = stats.warmup_done;
  res->all_streams = device->dev->all_streams() ? 1 : 0;
  res->sm_clock_mhz = stats.clocks.sm_mhz;
  res->mem_clock_mhz = stats.clocks.mem_mhz;
  if (stats.off_stream_reps > 0) {
    device->backend->Log(HTAM_LOG_WARN,
                         std::to_string(stats.off_stream_reps) + " of " +
                             std::to_string(r.repetitions) +
                             " repetitions had work outliving the candidate's stream (a side "
                             "stream it did not join); charged up to device idle");
  }
  if (stats.empty_reps > 0) {
    device->backend->Log(HTAM_LOG_WARN, std::to_string(stats.empty_reps) + " of " +
                                            std::to_string(r.repetitions) +
                                            " repetitions issued no device work CUPTI could "
                                            "see; their event window was used");
  }
  return nullptr;
}

Error htam_module::Profile(const htam_tensor*, int32_t, htam_tensor*, int32_t,
                           htam_profile_report* out) {
  out->registers = max_registers;
  out->shared_bytes = max_shared;
  out->spill_bytes = spills;
  ClockReading c = device->dev->ReadClocks();
  out->sm_clock_mhz = c.sm_mhz;
  out->mem_clock_mhz = c.mem_mhz;
  return nullptr;
}

// Everything of backend.h: roofline, device memory in use, CUDA IPC sharing, test data on the
// device, the static profile, and the profiler around a one-call process (Nsight Compute,
// ncu_profile.h).
HTAM_BACKEND_PLUGIN(htam_backend, "cuda", ROOFLINE, MEMORY_USED, SHARING, DEVICE_DATA, PROFILE,
                    PROFILER)
