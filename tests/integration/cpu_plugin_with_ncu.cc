// A test fixture, never installed: libhtam_backend_cpu.so WITH a profiler. The CPU plugin
// (backends/cpu/cpu_backend.cc, compiled into this module) plus the profile entry points of the
// plugin ABI (API 1.3) as the CUDA plugin implements them (Nsight Compute: backends/cuda/
// ncu_profile.h). The real CPU plugin offers no profiler; with this one the daemon's whole profile
// path (the worker asks its plugin for the command, runs its one-call mode under a stand-in ncu
// that prints ncu's CSV, has the plugin parse it) is tested on a machine without a GPU. Tests
// point eval.plugin_dir at its directory (tests/integration/CMakeLists.txt).
#include "backends/cuda/ncu_profile.h"
#include "htam/backend.h"

namespace {
// One backend instance per process here (a worker loads one); the strings live until the next
// call, as the ABI asks.
htam::cuda::NcuEntryState g_ncu;
}  // namespace

extern "C" {

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile_command(
    htam_backend*, const htam_profile_command_request* request, htam_profile_command* out) {
  return htam::cuda::NcuProfileCommandEntry(request, &g_ncu, out);
}

HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile_parse(
    htam_backend*, const htam_profile_output* output, htam_profile_summary* out) {
  return htam::cuda::NcuProfileParseEntry(output, &g_ncu, out);
}

}  // extern "C"
