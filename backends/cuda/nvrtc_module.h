// The backend's own device kernels (roofline probes), compiled at run time with NVRTC for the exact
// device architecture and loaded through the driver API (entry points obtained from the runtime
// with cudaGetDriverEntryPointByVersion, so the plugin does not link libcuda and still loads on a
// machine without a driver). NVRTC fits here because these kernels are device code only and are
// launched by the backend itself; candidates need nvcc (their htam_kernel is host code).
// Thread-safety: NvrtcCompile is stateless; an NvrtcModule is used from one thread at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace htam::cuda {

struct NvrtcOutput {
  bool ok = false;
  std::string cubin;  // the device image
  std::string log;    // NVRTC's program log
  double compile_ms = 0;
};

// Compiles device-only CUDA C++ to a cubin for `arch` ("sm_90a"). A compile error is ok() with
// output.ok == false. With a cache directory (SetNvrtcCacheDir) a cubin compiled before from the
// same source, name, arch, options and NVRTC version is read from it instead (compile_ms 0): each
// evaluation worker opens its device afresh, and compiling the backend's own kernels (probes, test
// data) took about 0.2 s of every start.
Result<NvrtcOutput> NvrtcCompile(std::string_view source, std::string_view name,
                                 std::string_view arch, const std::vector<std::string>& options);
// The same, never cached.
Result<NvrtcOutput> NvrtcCompileUncached(std::string_view source, std::string_view name,
                                         std::string_view arch,
                                         const std::vector<std::string>& options);
// Where NvrtcCompile keeps cubins: <dir>/cuda/nvrtc-<key>.cubin, published by rename. "" = none;
// a directory this process cannot write (a runner's read-only cache) is not used at all, so a
// cubin is only ever read from where this process's own kind wrote it. Set once, at plugin
// initialization (the plugin's cache directory).
void SetNvrtcCacheDir(const std::string& dir);
// NVRTC's version "13.0".
std::string NvrtcVersion();

class NvrtcModule {
 public:
  NvrtcModule() = default;
  ~NvrtcModule();
  NvrtcModule(const NvrtcModule&) = delete;
  NvrtcModule& operator=(const NvrtcModule&) = delete;

  // Loads a cubin into the current context.
  Status Load(const std::string& cubin);
  // Forgets the module without unloading it (after a fault or a timeout: cuModuleUnload would
  // wait for a kernel that may never end).
  void Leak() { module_ = nullptr; }
  // Launches an extern "C" kernel by name; args as for cuLaunchKernel.
  Status Launch(const char* kernel, dim3 grid, dim3 block, void** args, cudaStream_t stream);

 private:
  void* module_ = nullptr;  // CUmodule
};

}  // namespace htam::cuda
