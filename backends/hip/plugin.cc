// libhtam_backend_hip.so: the HIP backend behind the C plugin ABI
// (backends/include/htam/backend.h). Two platforms, chosen at initialize (option platform = auto |
// amd | nvidia):
//   amd    — hipcc compiles for the configured AMDGPU targets (any machine); the AMD runtime path
//            (amd_runtime.h) loads, runs and times candidates where libamdhip64 sees a GPU.
//   nvidia — HIP candidates compile with nvcc through the compatibility layer
//            sdk/include/htam/hip_on_cuda.h and run on the CUDA backend's runtime path: this plugin
//            loads libhtam_backend_cuda.so and forwards device, memory, run and time calls to it.
// C++ inside (Status, faults), converted to htam_backend_error only at this boundary.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backends/common/plugin_base.h"
#include "backends/common/plugin_error.h"
#include "backends/common/plugin_host.h"
#include "backends/hip/amd_runtime.h"
#include "backends/hip/hipcc_compiler.h"
#include "base/file.h"
#include "base/hash.h"
#include "htam/backend.h"

using htam::plugin::Error;
using htam::plugin::MakeError;
using htam::plugin::ToError;
namespace fs = std::filesystem;
namespace hh = htam::hip;

namespace {

enum class Platform { kAmd, kNvidia };

// The HIP headers a candidate may include; on NVIDIA each one is a shim to hip_on_cuda.h.
const char* const kShimHeaders[] = {"hip_runtime.h",  "hip_runtime_api.h", "hip_fp16.h",
                                    "hip_bfloat16.h", "hip_bf16.h",        "hip_vector_types.h",
                                    "hip_common.h"};

const char* kNotRunNote =
    "The AMD runtime path (libamdhip64 via dlopen, hipEvent timing with cache flush, the gate of "
    "backends/common) is compiled in CI but has never run on an AMD GPU: none was reachable when "
    "it "
    "was written.";

double ToDouble(const std::string& s, double def) {
  try {
    return s.empty() ? def : std::stod(s);
  } catch (...) {
    return def;
  }
}

// Directory of this plugin (to find libhtam_backend_cuda.so beside it or in the build tree).
std::string SelfDir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&SelfDir), &info) && info.dli_fname) {
    return fs::path(info.dli_fname).parent_path().string();
  }
  return ".";
}

}  // namespace

// The plugin's instance: the helper base (backends/common/plugin_base.h) holds the host's settings
// and the description; Init() chooses the platform and fills the description from the members
// below.
struct htam_backend : htam::plugin::Backend {
  explicit htam_backend(const htam::plugin::HostSettings& host);
  ~htam_backend() override {
    cuda.reset();  // finalizes the CUDA plugin before its library is closed
    cuda_lib.reset();
  }
  htam::Status Init() override;

  std::string sdk_include_dir, cache_dir, work_dir;
  Platform platform = Platform::kAmd;
  bool can_run = false;
  std::string version, notes;

  // amd
  std::optional<hh::HipccCompiler> hipcc;
  std::string hipcc_error;
  std::vector<std::string> targets;  // default compile targets (configured)
  std::shared_ptr<hh::AmdRuntime> runtime;
  std::vector<hh::AmdDeviceProps> amd_props;
  std::vector<htam_device_info> infos;

  // nvidia (delegation to the CUDA plugin)
  std::unique_ptr<htam::PluginLibrary> cuda_lib;
  std::unique_ptr<htam::BackendInstance> cuda;
  htam_backend_device_roofline_fn cuda_roofline = nullptr;
  std::string shim_dir, compat_flags;

  // An option as "hip_<key>" (the daemon's table names them so) or "<key>"; empty = absent.
  std::string Opt(const std::string& key, const std::string& def) const {
    for (const std::string& k : {"hip_" + key, key}) {
      std::string v = host().Option(k, "");
      if (!v.empty()) return v;
    }
    return def;
  }
  void Log(int32_t level, const std::string& msg) const { Backend::Log(level, "hip: " + msg); }
  const htam::PluginApi& capi() const { return cuda->api(); }

  Error Compile(const htam_compile_request& req, std::string_view source, htam_artifact** out);
  Error OpenDevice(int32_t index, htam_device** out);
  Error ProfileCommand(const htam_profile_command_request* r, htam_profile_command* out);
  Error ProfileParse(const htam_profile_output* o, htam_profile_summary* out);
};

// Each object wraps either the AMD path's own or the CUDA plugin's (`inner`, platform nvidia), to
// which its calls are forwarded.
struct htam_artifact {
  Platform platform = Platform::kAmd;
  hh::HipCompileOutput amd;
  htam_backend* backend = nullptr;
  htam_artifact* inner = nullptr;  // the CUDA plugin's artifact

  ~htam_artifact() {
    if (inner) backend->capi().artifact_release(inner);
  }
  Error Info(htam_artifact_info* i) const;
};

struct htam_device {
  htam_backend* backend = nullptr;
  std::unique_ptr<hh::AmdDevice> amd;
  htam_device* inner = nullptr;
  double call_timeout_ms = 10000;

  ~htam_device() {
    if (inner) backend->capi().device_close(inner);
  }
  htam_stream Stream() {
    if (inner) return backend->capi().device_stream(inner);
    return amd ? amd->stream() : nullptr;
  }
  Error Roofline(htam_roofline_report* out);
  Error MemoryUsed(uint64_t* used_bytes);
  Error Load(const htam_artifact& a, htam_module** out);
  Error Alloc(uint64_t bytes, htam_buffer** out);
};

struct htam_module {
  htam_device* device = nullptr;
  void* handle = nullptr;
  htam_kernel_fn fn = nullptr;
  htam_module* inner = nullptr;

  ~htam_module();
  Error Run(const htam_tensor* in, int32_t n_in, htam_tensor* out, int32_t n_out,
            int32_t* kernel_rc);
  Error Time(const htam_timing_request& req, htam_timing_result* res);
  Error Profile(const htam_tensor* in, int32_t n_in, htam_tensor* out, int32_t n_out,
                htam_profile_report* report);
};

struct htam_buffer {
  htam_device* device = nullptr;
  void* ptr = nullptr;
  uint64_t bytes = 0;
  htam_buffer* inner = nullptr;

  ~htam_buffer();
  void* Address() { return inner ? device->backend->capi().buffer_address(inner) : ptr; }
  char* At(uint64_t offset) { return static_cast<char*>(ptr) + offset; }
  Error CopyToDevice(uint64_t offset, const void* src, uint64_t n);
  Error CopyToHost(void* dst, uint64_t offset, uint64_t n);
  Error Memset(uint64_t offset, uint8_t value, uint64_t n);
};

namespace {

// ---- platform set-up ---------------------------------------------------------------------------

std::string ListText(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// AMD: the compiler (always) and the runtime (where it loads). Returns the runtime's reason for
// not running in *why.
void SetUpAmd(htam_backend* b, std::string* why) {
  auto targets = hh::ParseTargets(b->Opt("offload_archs", "gfx90a gfx942"));
  if (!targets.ok() || targets->empty()) {
    b->hipcc_error = targets.ok() ? "no offload_archs configured" : targets.status().ToString();
  } else {
    b->targets = *targets;
    hh::HipccOptions o;
    o.hipcc = b->Opt("hipcc", "hipcc");
    o.sdk_include_dir = b->sdk_include_dir;
    o.cache_dir = b->cache_dir;
    o.work_dir = b->work_dir;
    o.flags = b->Opt("flags", "-O3");
    o.targets = b->targets;
    o.max_diagnostic_bytes = size_t(ToDouble(b->Opt("max_diagnostic_bytes", ""), 16384));
    auto c = hh::HipccCompiler::Create(o);
    if (c.ok())
      b->hipcc.emplace(std::move(c).value());
    else
      b->hipcc_error = c.status().ToString();
  }
  auto rt = hh::AmdRuntime::Load(b->Opt("runtime_library", "libamdhip64.so.5"));
  if (!rt.ok()) {
    *why = rt.status().message();
    return;
  }
  b->runtime = *rt;
  b->amd_props = b->runtime->Probe(why);
}

void DescribeAmd(htam_backend* b, const std::string& why) {
  b->platform = Platform::kAmd;
  b->can_run = !b->amd_props.empty() && b->hipcc.has_value();
  for (const auto& p : b->amd_props) {
    htam_device_info info{};
    info.index = p.index;
    info.name = p.name.c_str();
    info.arch = p.arch.c_str();
    info.memory_bytes = p.memory_bytes;
    info.sm_clock_mhz = p.max_sm_mhz;
    info.mem_clock_mhz = p.max_mem_mhz;
    info.cache_bytes = p.l2_bytes;
    b->infos.push_back(info);
  }
  std::string tool = !b->hipcc            ? "hipcc unavailable: " + b->hipcc_error
                     : b->hipcc->probed() ? b->hipcc->version()
                                          : "hipcc (version read at the first compile)";
  std::replace(tool.begin(), tool.end(), '\n', ';');
  b->version = "htam hip backend (platform amd); " + tool;
  std::ostringstream n;
  n << "platform amd. ";
  if (!b->hipcc) {
    n << "Cannot compile: " << b->hipcc_error << ".";
  } else if (!b->hipcc->probed()) {
    n << "Compiles for " << ListText(b->targets)
      << " with hipcc (targets this toolchain cannot build are found at the first compile).";
  } else {
    n << "Compiles for " << ListText(b->hipcc->supported_targets()) << " with hipcc.";
    if (!b->hipcc->unsupported_targets().empty())
      n << " Not built: " << ListText(b->hipcc->unsupported_targets())
        << " (this HIP toolchain cannot target it; HIP >= 5.7 / LLVM >= 17 can).";
  }
  if (b->can_run)
    n << " " << b->amd_props.size() << " AMD GPU(s). ";
  else
    n << " Runtime path cannot run here (compile only): " << why << ". ";
  n << kNotRunNote;
  b->notes = n.str();
}

// Writes hip/<header> shims that include the compatibility layer, once per layer version.
htam::Status WriteShims(htam_backend* b) {
  std::string layer;
  std::string header = b->sdk_include_dir + "/htam/hip_on_cuda.h";
  if (!htam::ReadWholeFile(header, &layer)) {
    return htam::Status::FailedPrecondition("no htam/hip_on_cuda.h under " + b->sdk_include_dir);
  }
  std::string hash = htam::Sha256Hex(layer).substr(0, 16);
  std::string base = (b->cache_dir.empty() ? b->work_dir : b->cache_dir) + "/hip";
  b->shim_dir = base + "/nvidia-shim-" + hash;
  // The layer's hash is part of the flags, hence of the CUDA compile cache key.
  b->compat_flags =
      "-I" + b->shim_dir + " -include " + header + " -DHTAM_HIP_ON_CUDA_LAYER=0x" + hash;
  std::error_code ec;
  if (fs::exists(b->shim_dir + "/hip/hip_runtime.h", ec)) return htam::Status::OK();
  // Published whole (base/file.h): workers in PID namespaces of their own share a cache and pids,
  // and one that wrote the same shim first leaves its (equal) folder in place.
  fs::create_directories(base, ec);
  const htam::Status published = htam::PublishDir(b->shim_dir, [](const std::string& tmp) {
    std::error_code made;
    fs::create_directories(tmp + "/hip", made);
    if (made) return htam::Status::IOError("cannot create " + tmp + ": " + made.message());
    for (const char* h : kShimHeaders) {
      std::ofstream f(tmp + "/hip/" + h);
      f << "// Written by the htam HIP backend: HIP on NVIDIA through htam/hip_on_cuda.h.\n"
           "#include <htam/hip_on_cuda.h>\n";
      if (!f) return htam::Status::IOError("cannot write shim " + std::string(h));
    }
    return htam::Status::OK();
  });
  if (!published.ok()) return published;
  return fs::exists(b->shim_dir + "/hip/hip_runtime.h", ec)
             ? htam::Status::OK()
             : htam::Status::IOError("cannot publish " + b->shim_dir);
}

// NVIDIA: loads and initializes the CUDA plugin. Returns false (reason in *why) when it cannot.
bool SetUpNvidia(htam_backend* b, std::string* why) {
  std::string path = b->Opt("cuda_plugin", "");
  if (path.empty()) {
    std::string self = SelfDir();
    for (const std::string& c :
         {self + "/libhtam_backend_cuda.so", self + "/../cuda/libhtam_backend_cuda.so"}) {
      if (access(c.c_str(), R_OK) == 0) {
        path = c;
        break;
      }
    }
  }
  if (path.empty()) {
    *why = "libhtam_backend_cuda.so not found beside " + SelfDir() + " (set eval.hip_cuda_plugin)";
    return false;
  }
  auto lib = htam::PluginLibrary::Open(path);
  if (!lib.ok()) {
    *why = lib.status().ToString();
    return false;
  }
  if (htam::Status st = WriteShims(b); !st.ok()) {
    *why = st.ToString();
    return false;
  }
  htam::HostOptions h;
  h.sdk_include_dir = b->sdk_include_dir;
  h.cache_dir = b->cache_dir;
  h.work_dir = b->work_dir;
  h.options = {"nvcc=" + b->Opt("nvcc", "nvcc"), "nvcc_flags=" + b->Opt("nvcc_flags", "-O3"),
               "call_timeout_ms=" + b->Opt("call_timeout_ms", "10000")};
  auto inst = htam::BackendInstance::Create((*lib)->api(), h);
  if (!inst.ok()) {
    *why = inst.status().ToString();
    return false;
  }
  b->cuda_lib = std::move(lib).value();
  b->cuda = std::move(inst).value();
  if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
    b->cuda_roofline = reinterpret_cast<htam_backend_device_roofline_fn>(
        dlsym(handle, "htam_backend_device_roofline"));
    dlclose(handle);  // the PluginLibrary keeps its own reference
  }
  const htam_backend_description& d = b->cuda->description();
  b->platform = Platform::kNvidia;
  b->can_run = d.can_run != 0;
  for (int i = 0; i < d.num_devices; ++i) b->infos.push_back(d.devices[i]);
  b->version = std::string("htam hip backend (platform nvidia, HIP through htam/hip_on_cuda.h); ") +
               (d.version ? d.version : "");
  b->notes =
      "platform nvidia: HIP candidates compile with nvcc through htam/hip_on_cuda.h (the "
      "supported subset is in docs/backends-hip.md; warpSize is 32 here) and run, are timed "
      "and verified on the CUDA backend's runtime path (" +
      path + "). " +
      (b->can_run ? std::string("")
                  : "No CUDA device: " + std::string(d.notes ? d.notes : "") + ". ") +
      kNotRunNote;
  return true;
}

}  // namespace

htam_backend::htam_backend(const htam::plugin::HostSettings& host) : Backend("hip", host) {
  std::error_code ec;
  sdk_include_dir =
      fs::absolute(host.sdk_include_dir.empty() ? "sdk/include" : host.sdk_include_dir, ec)
          .string();
  cache_dir = host.cache_dir.empty() ? "" : fs::absolute(host.cache_dir, ec).string();
  // "." = the host gave none
  work_dir = host.work_dir == "." ? "/tmp" : fs::absolute(host.work_dir, ec).string();
}

htam::Status htam_backend::Init() {
  std::string choice = Opt("platform", "auto");
  if (choice != "auto" && choice != "amd" && choice != "nvidia")
    return htam::Status::InvalidArgument("hip platform must be auto, amd or nvidia, not '" +
                                         choice + "'");
  std::string amd_why, nv_why;
  if (choice == "nvidia") {
    if (!SetUpNvidia(this, &nv_why))
      return htam::Status::Unavailable("hip platform nvidia: " + nv_why);
  } else {
    SetUpAmd(this, &amd_why);
    // auto: an AMD GPU wins; else an NVIDIA GPU through the CUDA backend; else AMD compile-only.
    // (An NVIDIA driver is looked for first, so that a machine without one pays nothing.)
    if (choice == "auto" && amd_props.empty() &&
        (access("/proc/driver/nvidia/version", R_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0) &&
        SetUpNvidia(this, &nv_why) && !can_run) {
      cuda.reset();
      cuda_lib.reset();
      infos.clear();
      cuda_roofline = nullptr;
    }
    if (!cuda) DescribeAmd(this, amd_why + (nv_why.empty() ? "" : "; NVIDIA: " + nv_why));
  }
  if (!cuda) platform = Platform::kAmd;
  htam::plugin::Description& d = description_;
  d.language = "hip";
  d.source_suffix = ".hip";
  d.version = version;
  d.notes = notes;
  d.devices = infos;  // the names point into amd_props or the CUDA plugin's description
  d.can_run = can_run;
  Log(HTAM_LOG_INFO, version + " — " + notes);
  return htam::Status::OK();
}

Error htam_backend::Compile(const htam_compile_request& req, std::string_view source,
                            htam_artifact** out) {
  std::string arch = req.arch ? req.arch : "";
  std::string options = req.options ? req.options : "";
  auto a = std::make_unique<htam_artifact>();
  a->backend = this;
  if (platform == Platform::kNvidia) {
    if (arch.rfind("gfx", 0) == 0) {
      return MakeError(HTAM_ERR_INVALID_ARGUMENT,
                       "hip platform nvidia builds for NVIDIA GPUs (sm_NN), not " + arch);
    }
    htam_compile_request r{};
    r.struct_size = sizeof r;
    r.source = source.data();
    r.source_len = source.size();
    r.language = "cuda";
    r.arch = arch.empty() ? nullptr : req.arch;
    std::string flags = compat_flags + " " + options;
    r.options = flags.c_str();
    r.name = req.name;
    r.timeout_s = req.timeout_s;
    if (Error e = capi().compile(cuda->handle(), &r, &a->inner)) return e;
    a->platform = Platform::kNvidia;
    *out = a.release();
    return nullptr;
  }
  if (!hipcc) return MakeError(HTAM_ERR_UNAVAILABLE, "hipcc unavailable: " + hipcc_error);
  std::vector<std::string> targets;
  if (!arch.empty()) {
    auto t = hh::ParseTargets(arch);
    if (!t.ok()) return MakeError(HTAM_ERR_INVALID_ARGUMENT, t.status().message());
    targets = *t;
  }
  auto r =
      hipcc->Compile(source, targets, options, req.name ? req.name : "candidate", req.timeout_s);
  if (!r.ok()) return ToError(r.status());
  if (!r->ok) return MakeError(HTAM_ERR_COMPILE, r->diagnostics);
  a->amd = std::move(r).value();
  *out = a.release();
  return nullptr;
}

Error htam_artifact::Info(htam_artifact_info* i) const {
  if (platform == Platform::kNvidia) return backend->capi().artifact_info(inner, i);
  i->path = amd.so_path.c_str();
  i->content_hash = amd.hash.c_str();
  i->diagnostics = amd.diagnostics.c_str();
  i->from_cache = amd.from_cache ? 1 : 0;
  i->compile_ms = amd.from_cache ? 0.0 : amd.compile_ms;
  return nullptr;
}

Error htam_backend::OpenDevice(int32_t index, htam_device** out) {
  if (!can_run) return MakeError(HTAM_ERR_UNAVAILABLE, "hip backend cannot run here: " + notes);
  auto d = std::make_unique<htam_device>();
  d->backend = this;
  d->call_timeout_ms = ToDouble(Opt("call_timeout_ms", ""), 10000);
  if (platform == Platform::kNvidia) {
    if (Error e = capi().device_open(cuda->handle(), index, &d->inner)) return e;
    *out = d.release();
    return nullptr;
  }
  if (index < 0 || index >= static_cast<int32_t>(amd_props.size())) {
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "no AMD GPU " + std::to_string(index));
  }
  hh::AmdDeviceOptions o;
  o.flush_min_bytes = uint64_t(ToDouble(Opt("flush_min_mb", ""), 512)) << 20;
  auto dev = hh::AmdDevice::Open(runtime, amd_props[size_t(index)], o);
  if (!dev.ok()) return ToError(dev.status(), HTAM_ERR_UNAVAILABLE);
  d->amd = std::move(dev).value();
  *out = d.release();
  return nullptr;
}

// The CUDA backend's ceilings, forwarded on NVIDIA.
Error htam_device::Roofline(htam_roofline_report* out) {
  if (inner && backend->cuda_roofline) return backend->cuda_roofline(inner, out);
  return MakeError(HTAM_ERR_UNSUPPORTED, "roofline probes are not implemented on the AMD path");
}

// Device memory in use: on NVIDIA the CUDA plugin's; not offered on AMD GPUs yet (the runner is
// then not replaced for memory a candidate left allocated).
Error htam_device::MemoryUsed(uint64_t* used_bytes) {
  if (!inner || !backend->capi().device_memory_used)
    return MakeError(HTAM_ERR_UNSUPPORTED, "the hip backend reads device memory only on NVIDIA");
  return backend->capi().device_memory_used(inner, used_bytes);
}

Error htam_device::Load(const htam_artifact& a, htam_module** out) {
  auto m = std::make_unique<htam_module>();
  m->device = this;
  if (inner) {
    if (a.platform != Platform::kNvidia)
      return MakeError(HTAM_ERR_LOAD, "artifact was built for AMD GPUs");
    if (Error e = backend->capi().load(inner, a.inner, &m->inner)) return e;
    *out = m.release();
    return nullptr;
  }
  if (a.platform != Platform::kAmd)
    return MakeError(HTAM_ERR_LOAD, "artifact was built for NVIDIA GPUs");
  const std::string& arch = amd->props().arch;
  if (std::find(a.amd.targets.begin(), a.amd.targets.end(), arch) == a.amd.targets.end()) {
    return MakeError(HTAM_ERR_LOAD, "candidate holds no code object for " + arch + " (built for " +
                                        ListText(a.amd.targets) +
                                        "); add it to eval.hip_offload_archs");
  }
  dlerror();
  void* h = dlopen(a.amd.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
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
  if (auto f = amd->CheckPending("loading candidate")) return ToError(*f);
  m->handle = h;
  m->fn = reinterpret_cast<htam_kernel_fn>(sym);
  *out = m.release();
  return nullptr;
}

htam_module::~htam_module() {
  if (inner) device->backend->capi().module_release(inner);
  // After a device fault the candidate's destructors would touch a dead runtime: keep it mapped.
  if (handle && device->amd && !device->amd->poisoned()) dlclose(handle);
}

Error htam_device::Alloc(uint64_t bytes, htam_buffer** out) {
  auto b = std::make_unique<htam_buffer>();
  b->bytes = bytes;
  if (inner) {
    if (Error e = backend->capi().buffer_alloc(inner, bytes, &b->inner)) return e;
  } else if (auto f = amd->Alloc(bytes, &b->ptr)) {
    return ToError(*f);
  }
  b->device = this;
  *out = b.release();
  return nullptr;
}

htam_buffer::~htam_buffer() {
  if (!device) return;  // never handed out
  if (inner)
    device->backend->capi().buffer_free(inner);
  else
    device->amd->Free(ptr);
}

Error htam_buffer::CopyToDevice(uint64_t offset, const void* src, uint64_t n) {
  if (inner) return device->backend->capi().copy_to_device(inner, offset, src, n);
  if (auto f = device->amd->CopyToDevice(At(offset), src, n)) return ToError(*f);
  return nullptr;
}

Error htam_buffer::CopyToHost(void* dst, uint64_t offset, uint64_t n) {
  if (inner) return device->backend->capi().copy_to_host(dst, inner, offset, n);
  if (auto f = device->amd->CopyToHost(dst, At(offset), n)) return ToError(*f);
  return nullptr;
}

Error htam_buffer::Memset(uint64_t offset, uint8_t value, uint64_t n) {
  if (inner) return device->backend->capi().memset(inner, offset, value, n);
  if (auto f = device->amd->Memset(At(offset), value, n)) return ToError(*f);
  return nullptr;
}

Error htam_module::Run(const htam_tensor* in, int32_t n_in, htam_tensor* out, int32_t n_out,
                       int32_t* kernel_rc) {
  if (inner) return device->backend->capi().run(inner, in, n_in, out, n_out, kernel_rc);
  auto f = device->amd->Call(fn, in, n_in, out, n_out, device->call_timeout_ms);
  if (f) {
    if (kernel_rc) *kernel_rc = f->kernel_rc;
    return ToError(*f);
  }
  return nullptr;
}

Error htam_module::Time(const htam_timing_request& req, htam_timing_result* res) {
  if (inner) return device->backend->capi().time(inner, &req, res);
  htam_timing_request r = req;
  if (r.call_timeout_ms <= 0) r.call_timeout_ms = device->call_timeout_ms;
  hh::AmdTimeStats stats;
  if (auto f = device->amd->Time(fn, r, res->rep_us, &stats)) return ToError(*f);
  res->warmup_done = stats.warmup_done;
  res->all_streams = 1;
  res->sm_clock_mhz = stats.clocks.sm_mhz;
  res->mem_clock_mhz = stats.clocks.mem_mhz;
  if (stats.off_stream_reps > 0) {
    device->backend->Log(HTAM_LOG_WARN, std::to_string(stats.off_stream_reps) +
                                            " repetitions had work outliving the candidate's "
                                            "stream; charged up to device idle");
  }
  return nullptr;
}

Error htam_module::Profile(const htam_tensor* in, int32_t n_in, htam_tensor* out, int32_t n_out,
                           htam_profile_report* report) {
  if (inner) {
    const htam::PluginApi& api = device->backend->capi();
    if (!api.profile)
      return MakeError(HTAM_ERR_UNSUPPORTED, "the CUDA plugin has no profile stage");
    return api.profile(inner, in, n_in, out, n_out, report);
  }
  hh::AmdClocks c = device->amd->ReadClocks();
  report->sm_clock_mhz = c.sm_mhz;
  report->mem_clock_mhz = c.mem_mhz;
  return nullptr;
}

// The profiler around a one-call process: on NVIDIA the CUDA plugin's (Nsight Compute); none on
// AMD GPUs.
Error htam_backend::ProfileCommand(const htam_profile_command_request* r,
                                   htam_profile_command* out) {
  if (platform != Platform::kNvidia || !cuda || !capi().profile_command)
    return MakeError(HTAM_ERR_UNAVAILABLE, "the hip backend offers no profiler on AMD GPUs");
  return capi().profile_command(cuda->handle(), r, out);
}

Error htam_backend::ProfileParse(const htam_profile_output* o, htam_profile_summary* out) {
  if (platform != Platform::kNvidia || !cuda || !capi().profile_parse)
    return MakeError(HTAM_ERR_UNAVAILABLE, "the hip backend offers no profiler on AMD GPUs");
  return capi().profile_parse(cuda->handle(), o, out);
}

// No buffer sharing and no device-side test data: the gate evaluates HIP candidates in the
// verifier's process and makes its test data on the host.
HTAM_BACKEND_PLUGIN(htam_backend, "hip", ROOFLINE, MEMORY_USED, PROFILE, PROFILER)
