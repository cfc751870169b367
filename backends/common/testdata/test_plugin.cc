// A minimal backend plugin for loader tests, built in four flavours (CMake defines one of
// TEST_PLUGIN_GOOD, _MISSING_SYMBOL, _WRONG_MAJOR, _NEWER_MINOR). It cannot compile anything.
#include <cstring>
#include <string>

#include "backends/common/plugin_error.h"
#include "htam/backend.h"

using htam::plugin::MakeError;

struct htam_backend {
  int dummy;
};

extern "C" {
HTAM_BACKEND_EXPORT void htam_backend_api_version(uint32_t* major, uint32_t* minor) {
#if defined(TEST_PLUGIN_WRONG_MAJOR)
  *major = HTAM_BACKEND_API_VERSION_MAJOR + 1;
  *minor = 0;
#elif defined(TEST_PLUGIN_NEWER_MINOR)
  *major = HTAM_BACKEND_API_VERSION_MAJOR;
  *minor = HTAM_BACKEND_API_VERSION_MINOR + 1;
#else
  *major = HTAM_BACKEND_API_VERSION_MAJOR;
  *minor = HTAM_BACKEND_API_VERSION_MINOR;
#endif
}
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_initialize(const htam_backend_host* host,
                                                                htam_backend** out) {
  if (host->api_major != HTAM_BACKEND_API_VERSION_MAJOR)
    return MakeError(HTAM_ERR_VERSION,
                     "test plugin: host major " + std::to_string(host->api_major));
  *out = new htam_backend{0};
  return nullptr;
}
HTAM_BACKEND_EXPORT void htam_backend_finalize(htam_backend* b) {
  delete b;
}
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_describe(htam_backend*,
                                                              htam_backend_description* out) {
  static htam_device_info dev{0, "test device", "test_arch", 1 << 20, -1, -1, 0};
  htam_backend_description d{};
  d.struct_size = out->struct_size;
  d.name = "test";
  d.language = "none";
  d.source_suffix = ".txt";
  d.version = "test plugin";
  d.notes = "runtime path cannot run here: test plugin";
  d.num_devices = 1;
  d.devices = &dev;
  d.can_run = 0;
  std::memcpy(out, &d, std::min<size_t>(out->struct_size, sizeof d));
  return nullptr;
}
#define UNSUPPORTED return MakeError(HTAM_ERR_UNSUPPORTED, "test plugin")
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_compile(htam_backend*,
                                                             const htam_compile_request*,
                                                             htam_artifact**) {
  UNSUPPORTED;
}
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_artifact_info(const htam_artifact*,
                                                                   htam_artifact_info*) {
  UNSUPPORTED;
}
HTAM_BACKEND_EXPORT void htam_backend_artifact_release(htam_artifact*) {}
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_open(htam_backend*, int32_t,
                                                                 htam_device**) {
  UNSUPPORTED;
}
HTAM_BACKEND_EXPORT void htam_backend_device_close(htam_device*) {}
HTAM_BACKEND_EXPORT htam_stream htam_backend_device_stream(htam_device*) {
  return nullptr;
}
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_load(htam_device*, const htam_artifact*,
                                                          htam_module**) {
  UNSUPPORTED;
}
HTAM_BACKEND_EXPORT void htam_backend_module_release(htam_module*) {}
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_alloc(htam_device*, uint64_t,
                                                                  htam_buffer**) {
  UNSUPPORTED;
}
HTAM_BACKEND_EXPORT void htam_backend_buffer_free(htam_buffer*) {}
HTAM_BACKEND_EXPORT void* htam_backend_buffer_address(htam_buffer*) {
  return nullptr;
}
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_copy_to_device(htam_buffer*, uint64_t,
                                                                    const void*, uint64_t) {
  UNSUPPORTED;
}
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_copy_to_host(void*, htam_buffer*, uint64_t,
                                                                  uint64_t) {
  UNSUPPORTED;
}
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_memset(htam_buffer*, uint64_t, uint8_t,
                                                            uint64_t) {
  UNSUPPORTED;
}
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_run(htam_module*, const htam_tensor*, int32_t,
                                                         htam_tensor*, int32_t, int32_t*) {
  UNSUPPORTED;
}
#if !defined(TEST_PLUGIN_MISSING_SYMBOL)
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_time(htam_module*, const htam_timing_request*,
                                                          htam_timing_result*) {
  UNSUPPORTED;
}
#endif
}
