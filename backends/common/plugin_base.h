// The part of a backend plugin that is the same in every plugin (the role of Triton's
// backend_common): the plugin's instance derives from htam::plugin::Backend, and one macro,
// HTAM_BACKEND_PLUGIN(htam_backend, "name", capabilities...), emits every C entry point of
// backend.h; the per-call ones call members of the plugin's objects (plugin_entries.h). Here:
//   htam_backend_api_version   this header's version;
//   htam_backend_initialize    null and version checks (HTAM_ERR_VERSION naming both versions),
//                              the host's directories, log sink and "key=value" options parsed
//                              into HostSettings, then the plugin's constructor and Init();
//   htam_backend_finalize      deletes the instance;
//   htam_backend_describe      the plugin's Description, written up to the host's struct_size.
// A Status from Init() becomes an htam_backend_error of the matching class (ToError); an
// exception never crosses the C boundary (HTAM_ERR_INTERNAL). The plugin writes the rest: its
// constructor (options, probing), and the device logic behind the per-call entry points.
//
//   struct htam_backend : htam::plugin::Backend {
//     explicit htam_backend(const htam::plugin::HostSettings& h) : Backend("cpu", h) { ... }
//   };
//   HTAM_BACKEND_PLUGIN(htam_backend, "cpu")
//
// Header-only: a plugin links no host code. Thread-safety: as the ABI (one thread at a time per
// instance); Backend::Log is as thread-safe as the host's sink.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/common/plugin_entries.h"
#include "backends/common/plugin_error.h"
#include "base/status.h"
#include "htam/backend.h"

namespace htam::plugin {

// What the host handed to initialize, copied (the host's strings are borrowed for that call).
struct HostSettings {
  uint32_t api_major = 0, api_minor = 0;
  std::string sdk_include_dir;                 // "" when the host gave none
  std::string cache_dir;                       // "" = no compile cache
  std::string work_dir;                        // "." when the host gave none
  std::map<std::string, std::string> options;  // "key=value" (the last one of a key wins)
  void (*log)(void*, int32_t, const char*) = nullptr;
  void* log_ctx = nullptr;

  // The value of `key`, or `def` when it is absent.
  std::string Option(const std::string& key, const std::string& def) const {
    auto it = options.find(key);
    return it == options.end() ? def : it->second;
  }
  bool Has(const std::string& key) const { return options.count(key) != 0; }
};

// What describe reports. Filled by the plugin (constructor or Init); strings and devices must
// stay unchanged until finalize (the host keeps the pointers).
struct Description {
  std::string language, source_suffix, version, notes;
  std::vector<htam_device_info> devices;
  bool can_run = false;
};

// A Status as an error of the plugin ABI (the class follows the Status code; the message is the
// Status's text).
inline htam_backend_error* ToError(const Status& s) {
  if (s.ok()) return nullptr;
  using C = Status::Code;
  htam_backend_error_code code = HTAM_ERR_INTERNAL;
  switch (s.code()) {
    case C::kInvalidArgument: code = HTAM_ERR_INVALID_ARGUMENT; break;
    case C::kUnavailable: code = HTAM_ERR_UNAVAILABLE; break;
    case C::kResourceExhausted: code = HTAM_ERR_OUT_OF_MEMORY; break;
    case C::kTimeout: code = HTAM_ERR_TIMEOUT; break;
    default: break;
  }
  return MakeError(code, s.message());
}

// A Status as an error of the class `code`, whatever the Status's class (e.g. a device that
// cannot be opened is HTAM_ERR_UNAVAILABLE).
inline htam_backend_error* ToError(const Status& s, htam_backend_error_code code) {
  return s.ok() ? nullptr : MakeError(code, s.message());
}

// A device's fault ({code, message}, such as the CUDA and AMD devices' Fault) as an error.
template <typename F>
requires requires(const F& f) {
  htam_backend_error_code(f.code);
  std::string_view(f.message);
}
htam_backend_error* ToError(const F& f) {
  return MakeError(f.code, f.message);
}

class Backend {
 public:
  Backend(std::string name, const HostSettings& host) : name_(std::move(name)), host_(host) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // Work after construction that may fail (the error is initialize's); default none.
  virtual Status Init() { return Status::OK(); }

  const std::string& name() const { return name_; }
  const HostSettings& host() const { return host_; }
  const Description& description() const { return description_; }
  void Log(int32_t level, const std::string& message) const {
    if (host_.log) host_.log(host_.log_ctx, level, message.c_str());
  }

 protected:
  Description description_;

 private:
  std::string name_;
  HostSettings host_;
};

// ---- the entry points HTAM_BACKEND_PLUGIN emits (templates over the plugin's htam_backend) ----

inline void ApiVersion(uint32_t* major, uint32_t* minor) {
  if (major) *major = HTAM_BACKEND_API_VERSION_MAJOR;
  if (minor) *minor = HTAM_BACKEND_API_VERSION_MINOR;
}

// The host's version against the one this plugin was built for: the same major, a minor at least
// as new (the plugin may rely on what that minor added).
inline htam_backend_error* CheckHostVersion(const char* name, uint32_t major, uint32_t minor) {
  const uint32_t built_minor = HTAM_BACKEND_API_VERSION_MINOR;
  if (major == HTAM_BACKEND_API_VERSION_MAJOR && minor + 1 >= built_minor + 1) return nullptr;
  return MakeError(HTAM_ERR_VERSION, std::string(name) + " backend built for API " +
                                         std::to_string(HTAM_BACKEND_API_VERSION_MAJOR) + "." +
                                         std::to_string(HTAM_BACKEND_API_VERSION_MINOR) +
                                         ", host offers " + std::to_string(major) + "." +
                                         std::to_string(minor));
}

inline HostSettings ReadHost(const htam_backend_host* host) {
  HostSettings h;
  h.api_major = host->api_major;
  h.api_minor = host->api_minor;
  // Fields past the host's struct_size were not sent (an older host).
  auto has = [&](size_t offset, size_t size) { return host->struct_size >= offset + size; };
  if (has(offsetof(htam_backend_host, log_ctx), sizeof(void*))) {
    h.log = host->log;
    h.log_ctx = host->log_ctx;
  }
  if (has(offsetof(htam_backend_host, sdk_include_dir), sizeof(char*)) && host->sdk_include_dir)
    h.sdk_include_dir = host->sdk_include_dir;
  if (has(offsetof(htam_backend_host, cache_dir), sizeof(char*)) && host->cache_dir)
    h.cache_dir = host->cache_dir;
  h.work_dir = has(offsetof(htam_backend_host, work_dir), sizeof(char*)) && host->work_dir
                   ? host->work_dir
                   : ".";
  if (has(offsetof(htam_backend_host, options), sizeof(void*)))
    for (const char* const* o = host->options; o && *o; ++o) {
      std::string kv(*o);
      size_t eq = kv.find('=');
      if (eq != std::string::npos) h.options[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  return h;
}

// B is the plugin's `struct htam_backend` (derived from Backend, constructible from HostSettings).
template <typename B>
htam_backend_error* Initialize(const char* name, const htam_backend_host* host,
                               htam_backend** out) {
  if (!host || !out) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "null host or out");
  if (htam_backend_error* e = CheckHostVersion(name, host->api_major, host->api_minor)) return e;
  try {
    auto b = std::make_unique<B>(ReadHost(host));
    if (htam_backend_error* e = ToError(b->Init())) return e;
    *out = b.release();
    return nullptr;
  } catch (const std::exception& e) {
    return MakeError(HTAM_ERR_INTERNAL, std::string(name) + " backend: " + e.what());
  } catch (...) {
    return MakeError(HTAM_ERR_INTERNAL, std::string(name) + " backend: unknown exception");
  }
}

inline htam_backend_error* Describe(const Backend* b, htam_backend_description* out) {
  if (!b || !out || out->struct_size < sizeof(uint32_t))
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "bad describe arguments");
  const Description& d = b->description();
  htam_backend_description c{};
  c.struct_size = out->struct_size;
  c.name = b->name().c_str();
  c.language = d.language.c_str();
  c.source_suffix = d.source_suffix.c_str();
  c.version = d.version.c_str();
  c.notes = d.notes.c_str();
  c.num_devices = static_cast<int32_t>(d.devices.size());
  c.devices = d.devices.empty() ? nullptr : d.devices.data();
  c.can_run = d.can_run ? 1 : 0;
  std::memcpy(out, &c, std::min<size_t>(out->struct_size, sizeof c));
  return nullptr;
}

}  // namespace htam::plugin

// Emits every C entry point of backend.h for the plugin's instance type, its `struct htam_backend`
// (derived from htam::plugin::Backend, constructible from HostSettings): api_version, initialize,
// finalize and describe (here), the per-call entry points over the plugin's objects
// (plugin_entries.h says which members they call), and those of each optional capability named
// after `name` (ROOFLINE, MEMORY_USED, SHARING, DEVICE_DATA, PROFILE, PROFILER). `name` is the
// backend's name in the version error. Use once, at namespace scope, in the plugin's one .cc file,
// after its objects are defined:
//   HTAM_BACKEND_PLUGIN(htam_backend, "cpu", SHARING, DEVICE_DATA)
#define HTAM_BACKEND_PLUGIN(BackendType, name, ...)                                              \
  extern "C" {                                                                                   \
  HTAM_BACKEND_EXPORT void htam_backend_api_version(uint32_t* major, uint32_t* minor) {          \
    htam::plugin::ApiVersion(major, minor);                                                      \
  }                                                                                              \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_initialize(const htam_backend_host* host, \
                                                                  htam_backend** out) {          \
    return htam::plugin::Initialize<BackendType>(name, host, out);                               \
  }                                                                                              \
  HTAM_BACKEND_EXPORT void htam_backend_finalize(htam_backend* backend) {                        \
    delete static_cast<BackendType*>(backend);                                                   \
  }                                                                                              \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_describe(htam_backend* backend,           \
                                                                htam_backend_description* out) { \
    return htam::plugin::Describe(static_cast<BackendType*>(backend), out);                      \
  }                                                                                              \
  HTAM_PLUGIN_ENTRIES_REQUIRED_                                                                  \
  HTAM_PLUGIN_CAPS_(__VA_ARGS__)                                                                 \
  } /* extern "C" */
