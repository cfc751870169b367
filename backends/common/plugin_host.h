// The host side of the backend plugin ABI (backends/include/htam/backend.h): loads a plugin with
// dlopen(RTLD_NOW | RTLD_LOCAL), resolves its entry points by name (a missing required one fails
// the load naming it; a missing optional one is skipped), negotiates the API version, and wraps
// the C handles in RAII objects that convert htam_backend_error* into Status.
// A loader can be fed in-memory fakes through a symbol-lookup function (tests).
// Thread-safety: a Plugin / BackendInstance needs external synchronization (the ABI forbids
// concurrent calls on one instance).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "htam/backend.h"

namespace htam {

// The resolved entry points. Optional ones may be null.
struct PluginApi {
  htam_backend_api_version_fn api_version = nullptr;
  htam_backend_initialize_fn initialize = nullptr;
  htam_backend_finalize_fn finalize = nullptr;
  htam_backend_describe_fn describe = nullptr;
  htam_backend_compile_fn compile = nullptr;
  htam_backend_artifact_info_fn artifact_info = nullptr;
  htam_backend_artifact_release_fn artifact_release = nullptr;
  htam_backend_device_open_fn device_open = nullptr;
  htam_backend_device_close_fn device_close = nullptr;
  htam_backend_device_stream_fn device_stream = nullptr;
  htam_backend_load_fn load = nullptr;
  htam_backend_module_release_fn module_release = nullptr;
  htam_backend_buffer_alloc_fn buffer_alloc = nullptr;
  htam_backend_buffer_free_fn buffer_free = nullptr;
  htam_backend_buffer_address_fn buffer_address = nullptr;
  htam_backend_copy_to_device_fn copy_to_device = nullptr;
  htam_backend_copy_to_host_fn copy_to_host = nullptr;
  htam_backend_memset_fn memset = nullptr;
  htam_backend_run_fn run = nullptr;
  htam_backend_time_fn time = nullptr;
  htam_backend_profile_fn profile = nullptr;  // optional
  htam_backend_buffer_export_fn buffer_export = nullptr;  // optional (1.1), with buffer_import
  htam_backend_buffer_import_fn buffer_import = nullptr;
  htam_backend_device_roofline_fn device_roofline = nullptr;  // optional (1.1)
  htam_backend_buffer_fill_fn buffer_fill = nullptr;          // optional (1.2), with compare
  htam_backend_buffer_compare_fn buffer_compare = nullptr;    // optional (1.2)
  htam_backend_buffer_copy_fn buffer_copy = nullptr;          // optional (1.2)
  htam_backend_profile_command_fn profile_command = nullptr;  // optional (1.3), with parse
  htam_backend_profile_parse_fn profile_parse = nullptr;      // optional (1.3)
  htam_backend_device_memory_used_fn device_memory_used = nullptr;  // optional (1.4)
  uint32_t major = 0, minor = 0;              // the plugin's API version
};

// Converts a plugin error into a Status (and frees it). Null -> OK. The code of the error is kept
// in *code when non-null.
Status ConsumeError(htam_backend_error* e, const char* what, int32_t* code = nullptr);

using SymbolLookup = std::function<void*(const char* name)>;

// Resolves and checks (required symbols, version) through `lookup`. `label` names the plugin in
// messages (its path). Host version defaults to this header's.
Result<PluginApi> ResolvePlugin(const SymbolLookup& lookup, const std::string& label,
                                uint32_t host_major = HTAM_BACKEND_API_VERSION_MAJOR,
                                uint32_t host_minor = HTAM_BACKEND_API_VERSION_MINOR);

// A dlopen'ed plugin library; dlclose on destruction.
class PluginLibrary {
 public:
  static Result<std::unique_ptr<PluginLibrary>> Open(const std::string& path);
  ~PluginLibrary();
  const PluginApi& api() const { return api_; }
  const std::string& path() const { return path_; }

 private:
  PluginLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
  PluginApi api_;
};

struct HostOptions {
  std::string sdk_include_dir;
  std::string cache_dir;
  std::string work_dir;
  std::vector<std::string> options;  // "key=value"
};

// An initialized plugin instance; finalizes on destruction.
class BackendInstance {
 public:
  static Result<std::unique_ptr<BackendInstance>> Create(const PluginApi& api,
                                                         const HostOptions& host);
  ~BackendInstance();
  const PluginApi& api() const { return api_; }
  htam_backend* handle() const { return backend_; }
  const htam_backend_description& description() const { return desc_; }
  const HostOptions& host() const { return host_; }

 private:
  BackendInstance() = default;
  PluginApi api_;
  HostOptions host_;
  std::vector<const char*> option_ptrs_;
  htam_backend* backend_ = nullptr;
  htam_backend_description desc_{};
};

}  // namespace htam
