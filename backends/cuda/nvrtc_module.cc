// NVRTC compile + driver-API module load/launch via runtime-provided driver entry points.
#include "backends/cuda/nvrtc_module.h"

#include <cuda.h>
#include <nvrtc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>

#include "base/file.h"
#include "base/hash.h"

namespace htam::cuda {
namespace {

std::mutex g_cache_mu;
std::string g_cache_dir;  // SetNvrtcCacheDir; "" = none

struct DriverApi {
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**) = nullptr;
  bool ok = false;
};

template <typename F>
bool Entry(const char* name, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    return false;
  }
  *fn = reinterpret_cast<F>(p);
  return true;
}

const DriverApi& Driver() {
  static const DriverApi api = [] {
    DriverApi a;
    a.ok = Entry("cuModuleLoadData", &a.module_load_data) &&
           Entry("cuModuleUnload", &a.module_unload) &&
           Entry("cuModuleGetFunction", &a.module_get_function) &&
           Entry("cuLaunchKernel", &a.launch_kernel);
    return a;
  }();
  return api;
}

std::string NvrtcText(nvrtcResult r) {
  return nvrtcGetErrorString(r);
}

}  // namespace

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

void SetNvrtcCacheDir(const std::string& dir) {
  std::lock_guard<std::mutex> l(g_cache_mu);
  g_cache_dir = dir;
  if (dir.empty()) return;
  if (!MakeDirs(dir + "/cuda", 0755).ok() || access((dir + "/cuda").c_str(), W_OK) != 0)
    g_cache_dir.clear();  // a cache this process may not write (a runner's) is not used
}

Result<NvrtcOutput> NvrtcCompile(std::string_view source, std::string_view name,
                                 std::string_view arch, const std::vector<std::string>& options) {
  std::string entry;  // the cached cubin, by everything the compile depends on
  {
    std::lock_guard<std::mutex> l(g_cache_mu);
    if (!g_cache_dir.empty()) {
      std::string key(source);
      key += '\0' + std::string(name) + '\0' + std::string(arch);
      for (const auto& o : options) key += '\0' + o;
      key += '\0' + NvrtcVersion() + "\0nvrtc-cubin-v1";
      entry = g_cache_dir + "/cuda/nvrtc-" + Sha256Hex(key) + ".cubin";
    }
  }
  if (!entry.empty()) {
    NvrtcOutput hit;
    // A cubin is an ELF image: anything else (a truncated or foreign file) is compiled again.
    if (ReadWholeFile(entry, &hit.cubin) && hit.cubin.size() > 4 &&
        hit.cubin.compare(0, 4,
                          "\x7f"
                          "ELF") == 0) {
      hit.ok = true;
      return hit;
    }
  }
  auto compiled = NvrtcCompileUncached(source, name, arch, options);
  if (!entry.empty() && compiled.ok() && compiled->ok) {
    (void)WriteFileAtomic(entry, compiled->cubin, 0600);  // a cache: a failed write costs a compile
  }
  return compiled;
}

Result<NvrtcOutput> NvrtcCompileUncached(std::string_view source, std::string_view name,
                                         std::string_view arch,
                                         const std::vector<std::string>& options) {
  auto t0 = std::chrono::steady_clock::now();
  NvrtcOutput out;
  nvrtcProgram prog = nullptr;
  std::string src(source), nm(name);
  nvrtcResult r = nvrtcCreateProgram(&prog, src.c_str(), nm.c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return Status::Internal("nvrtcCreateProgram: " + NvrtcText(r));
  std::vector<std::string> opts = {"--gpu-architecture=" + std::string(arch), "-std=c++17"};
  for (const auto& o : options) opts.push_back(o);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  r = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  if (log_size > 1) {
    out.log.resize(log_size);
    nvrtcGetProgramLog(prog, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (r == NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetCUBINSize(prog, &n);
    out.cubin.resize(n);
    nvrtcGetCUBIN(prog, out.cubin.data());
    out.ok = n > 0;
  } else if (r != NVRTC_ERROR_COMPILATION) {
    nvrtcDestroyProgram(&prog);
    return Status::Internal("nvrtcCompileProgram: " + NvrtcText(r) + "\n" + out.log);
  }
  nvrtcDestroyProgram(&prog);
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

NvrtcModule::~NvrtcModule() {
  if (module_ && Driver().ok) Driver().module_unload(static_cast<CUmodule>(module_));
}

Status NvrtcModule::Load(const std::string& cubin) {
  const DriverApi& d = Driver();
  if (!d.ok) return Status::Unavailable("driver API entry points not available");
  CUmodule m = nullptr;
  CUresult r = d.module_load_data(&m, cubin.data());
  if (r != CUDA_SUCCESS)
    return Status::Internal("cuModuleLoadData failed: CUresult " + std::to_string(r));
  module_ = m;
  return Status::OK();
}

Status NvrtcModule::Launch(const char* kernel, dim3 grid, dim3 block, void** args,
                           cudaStream_t stream) {
  const DriverApi& d = Driver();
  if (!module_) return Status::FailedPrecondition("module not loaded");
  CUfunction f = nullptr;
  CUresult r = d.module_get_function(&f, static_cast<CUmodule>(module_), kernel);
  if (r != CUDA_SUCCESS) return Status::NotFound(std::string("no kernel ") + kernel);
  r = d.launch_kernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, 0,
                      reinterpret_cast<CUstream>(stream), args, nullptr);
  if (r != CUDA_SUCCESS)
    return Status::Internal("cuLaunchKernel failed: CUresult " + std::to_string(r));
  return Status::OK();
}

}  // namespace htam::cuda
