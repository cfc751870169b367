// Plugin loading and version negotiation; see plugin_host.h.
#include "backends/common/plugin_host.h"

#include <dlfcn.h>

#include "base/log.h"

namespace htam {

Status ConsumeError(htam_backend_error* e, const char* what, int32_t* code) {
  if (code) *code = 0;
  if (!e) return Status::OK();
  std::string msg = std::string(what) + ": " + (e->message ? e->message : "(no message)");
  int32_t c = e->code;
  htam_backend_error_free(e);
  if (code) *code = c;
  switch (c) {
    case HTAM_ERR_INVALID_ARGUMENT: return Status::InvalidArgument(msg);
    case HTAM_ERR_VERSION: return Status::FailedPrecondition(msg);
    case HTAM_ERR_UNAVAILABLE: return Status::Unavailable(msg);
    case HTAM_ERR_OUT_OF_MEMORY: return Status::ResourceExhausted(msg);
    case HTAM_ERR_TIMEOUT: return Status::Timeout(msg);
    default: return Status::Internal(msg);
  }
}

Result<PluginApi> ResolvePlugin(const SymbolLookup& lookup, const std::string& label,
                                uint32_t host_major, uint32_t host_minor) {
  PluginApi api;
  struct Slot {
    const char* name;
    void** ptr;
    bool required;
  };
  const Slot slots[] = {
      {"htam_backend_api_version", reinterpret_cast<void**>(&api.api_version), true},
      {"htam_backend_initialize", reinterpret_cast<void**>(&api.initialize), true},
      {"htam_backend_finalize", reinterpret_cast<void**>(&api.finalize), true},
      {"htam_backend_describe", reinterpret_cast<void**>(&api.describe), true},
      {"htam_backend_compile", reinterpret_cast<void**>(&api.compile), true},
      {"htam_backend_artifact_info", reinterpret_cast<void**>(&api.artifact_info), true},
      {"htam_backend_artifact_release", reinterpret_cast<void**>(&api.artifact_release), true},
      {"htam_backend_device_open", reinterpret_cast<void**>(&api.device_open), true},
      {"htam_backend_device_close", reinterpret_cast<void**>(&api.device_close), true},
      {"htam_backend_device_stream", reinterpret_cast<void**>(&api.device_stream), true},
      {"htam_backend_load", reinterpret_cast<void**>(&api.load), true},
      {"htam_backend_module_release", reinterpret_cast<void**>(&api.module_release), true},
      {"htam_backend_buffer_alloc", reinterpret_cast<void**>(&api.buffer_alloc), true},
      {"htam_backend_buffer_free", reinterpret_cast<void**>(&api.buffer_free), true},
      {"htam_backend_buffer_address", reinterpret_cast<void**>(&api.buffer_address), true},
      {"htam_backend_copy_to_device", reinterpret_cast<void**>(&api.copy_to_device), true},
      {"htam_backend_copy_to_host", reinterpret_cast<void**>(&api.copy_to_host), true},
      {"htam_backend_memset", reinterpret_cast<void**>(&api.memset), true},
      {"htam_backend_run", reinterpret_cast<void**>(&api.run), true},
      {"htam_backend_time", reinterpret_cast<void**>(&api.time), true},
      {"htam_backend_profile", reinterpret_cast<void**>(&api.profile), false},
      {"htam_backend_buffer_export", reinterpret_cast<void**>(&api.buffer_export), false},
      {"htam_backend_buffer_import", reinterpret_cast<void**>(&api.buffer_import), false},
      {"htam_backend_device_roofline", reinterpret_cast<void**>(&api.device_roofline), false},
      {"htam_backend_buffer_fill", reinterpret_cast<void**>(&api.buffer_fill), false},
      {"htam_backend_buffer_compare", reinterpret_cast<void**>(&api.buffer_compare), false},
      {"htam_backend_buffer_copy", reinterpret_cast<void**>(&api.buffer_copy), false},
      {"htam_backend_profile_command", reinterpret_cast<void**>(&api.profile_command), false},
      {"htam_backend_device_memory_used", reinterpret_cast<void**>(&api.device_memory_used),
       false},
      {"htam_backend_profile_parse", reinterpret_cast<void**>(&api.profile_parse), false},
  };
  // Version first: a plugin of another major may not even have the same symbol set.
  void* version_sym = lookup("htam_backend_api_version");
  if (!version_sym)
    return Status::FailedPrecondition(label + ": missing required symbol htam_backend_api_version");
  reinterpret_cast<htam_backend_api_version_fn>(version_sym)(&api.major, &api.minor);
  if (api.major != host_major)
    return Status::FailedPrecondition(
        label + ": backend API major version " + std::to_string(api.major) + "." +
        std::to_string(api.minor) + " is incompatible with the host's " +
        std::to_string(host_major) + "." + std::to_string(host_minor) + " (major must match)");
  if (api.minor > host_minor)
    return Status::FailedPrecondition(
        label + ": backend API minor version " + std::to_string(api.major) + "." +
        std::to_string(api.minor) + " is newer than the host's " + std::to_string(host_major) +
        "." + std::to_string(host_minor) + " (host older minor; rebuild the host)");
  for (const Slot& s : slots) {
    *s.ptr = lookup(s.name);
    if (!*s.ptr && s.required)
      return Status::FailedPrecondition(label + ": missing required symbol " + s.name);
    if (!*s.ptr) {
      HTAM_LOG(kDebug, "plugin") << label << ": optional entry point " << s.name
                                 << " absent; skipped";
    }
  }
  // Pairs: one without the other is no use to the host (backend.h says both or neither).
  if (!api.profile_command || !api.profile_parse) {
    api.profile_command = nullptr;
    api.profile_parse = nullptr;
  }
  return api;
}

Result<std::unique_ptr<PluginLibrary>> PluginLibrary::Open(const std::string& path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    std::string msg = e ? e : "unknown dlopen error";  // copied at once
    return Status::FailedPrecondition("loading plugin " + path + ": " + msg);
  }
  std::unique_ptr<PluginLibrary> lib(new PluginLibrary);
  lib->handle_ = h;
  lib->path_ = path;
  auto api = ResolvePlugin([h](const char* name) { return dlsym(h, name); }, path);
  if (!api.ok()) return api.status();
  lib->api_ = *api;
  return lib;
}

PluginLibrary::~PluginLibrary() {
  if (handle_) dlclose(handle_);
}

namespace {
void HostLog(void* ctx, int32_t level, const char* message) {
  (void)ctx;
  LogLevel l = level >= HTAM_LOG_ERROR  ? LogLevel::kError
               : level == HTAM_LOG_WARN ? LogLevel::kWarn
               : level == HTAM_LOG_INFO ? LogLevel::kInfo
                                        : LogLevel::kDebug;
  LogLine(l, "backend", message ? message : "");
}
}  // namespace

Result<std::unique_ptr<BackendInstance>> BackendInstance::Create(const PluginApi& api,
                                                                 const HostOptions& host) {
  std::unique_ptr<BackendInstance> b(new BackendInstance);
  b->api_ = api;
  b->host_ = host;
  for (const auto& o : b->host_.options) b->option_ptrs_.push_back(o.c_str());
  b->option_ptrs_.push_back(nullptr);
  htam_backend_host h{};
  h.struct_size = sizeof(h);
  h.api_major = HTAM_BACKEND_API_VERSION_MAJOR;
  h.api_minor = HTAM_BACKEND_API_VERSION_MINOR;
  h.log = &HostLog;
  h.log_ctx = nullptr;
  h.sdk_include_dir = b->host_.sdk_include_dir.c_str();
  h.cache_dir = b->host_.cache_dir.empty() ? nullptr : b->host_.cache_dir.c_str();
  h.work_dir = b->host_.work_dir.c_str();
  h.options = b->option_ptrs_.data();
  HTAM_RETURN_IF_ERROR(ConsumeError(api.initialize(&h, &b->backend_), "initializing backend"));
  b->desc_.struct_size = sizeof(b->desc_);
  Status st = ConsumeError(api.describe(b->backend_, &b->desc_), "describing backend");
  if (!st.ok()) return st;
  return b;
}

BackendInstance::~BackendInstance() {
  if (backend_) api_.finalize(backend_);
}

}  // namespace htam
