// The per-call C entry points of a backend plugin, emitted from the plugin's C++ objects (the rest
// of the role of Triton's backend_common, after plugin_base.h's lifecycle entry points). The
// emitted entry points hold everything of backend.h that is not device logic: null and argument
// checks, buffer range checks, reading a request the host sent at its struct_size (fields it did
// not send read as zero) and writing a result only up to the host's struct_size, and a guard so
// that no C++ exception crosses the C boundary (bad_alloc becomes HTAM_ERR_OUT_OF_MEMORY, any
// other HTAM_ERR_INTERNAL). The plugin writes only device logic, as members of its own objects:
//
//   struct htam_backend : htam::plugin::Backend          (plugin_base.h)
//     Error Compile(const htam_compile_request& r, std::string_view source, htam_artifact** out);
//         r.language is absent or the description's language (checked here)
//     Error OpenDevice(int32_t index, htam_device** out);
//   struct htam_artifact      Error Info(htam_artifact_info* info) const;   ~ = artifact_release
//   struct htam_device        htam_stream Stream();                        ~ = device_close
//     Error Load(const htam_artifact& a, htam_module** out);
//     Error Alloc(uint64_t bytes, htam_buffer** out);
//   struct htam_buffer        uint64_t bytes;  void* Address();            ~ = buffer_free
//     Error CopyToDevice(uint64_t offset, const void* src, uint64_t bytes);   (in range, bytes > 0,
//     Error CopyToHost(void* dst, uint64_t offset, uint64_t bytes);            src/dst not null)
//     Error Memset(uint64_t offset, uint8_t value, uint64_t bytes);
//   struct htam_module                                                     ~ = module_release
//     Error Run(const htam_tensor* in, int32_t n_in, htam_tensor* out, int32_t n_out,
//               int32_t* kernel_rc);                       (*kernel_rc preset to 0 when given)
//     Error Time(const htam_timing_request& r, htam_timing_result* res);
//         res->rep_us is the host's array (null when the host's struct has no such field)
//
// and, for each optional capability it names in HTAM_BACKEND_PLUGIN's list:
//   ROOFLINE     device:  Error Roofline(htam_roofline_report* out);
//   MEMORY_USED  device:  Error MemoryUsed(uint64_t* used_bytes);
//   SHARING      buffer:  Error Export(htam_buffer_handle* out);
//                device:  Error Import(const htam_buffer_handle& h, htam_buffer** out);
//                         (h.fd, when >= 0, is closed by the entry point after the call)
//   DEVICE_DATA  buffer:  Error Fill(uint64_t offset, const htam_fill_request& r);   (in range)
//                buffer:  Error CopyFrom(uint64_t offset, htam_buffer& src, uint64_t src_offset,
//                                        uint64_t bytes);                     (in range, > 0)
//                device:  Error Compare(const htam_compare_request& r, htam_compare_result* out);
//   PROFILE      module:  Error Profile(const htam_tensor* in, int32_t n_in, htam_tensor* out,
//                                       int32_t n_out, htam_profile_report* report);
//   PROFILER     backend: Error ProfileCommand(const htam_profile_command_request* r,
//                                              htam_profile_command* out);
//                         Error ProfileParse(const htam_profile_output* o,
//                                            htam_profile_summary* out);
//
// Error is htam_backend_error* (nullptr = success; MakeError or ToError make one). Every struct a
// member fills is this plugin's full struct, preset with what the host sent (the host's presets
// such as -1 survive); the entry point copies back what fits the host's struct_size. A missing
// member is a compile error in the plugin's one .cc file. Header-only.
// Thread-safety: as the ABI (one thread at a time per instance).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "backends/common/plugin_error.h"
#include "htam/backend.h"

namespace htam::plugin {

using Error = htam_backend_error*;

// Runs an entry point's body; an exception becomes an error of the entry point.
template <typename F>
Error Guard(const char* entry, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return MakeError(HTAM_ERR_OUT_OF_MEMORY, std::string(entry) + ": out of host memory");
  } catch (const std::exception& e) {
    return MakeError(HTAM_ERR_INTERNAL, std::string(entry) + ": " + e.what());
  } catch (...) {
    return MakeError(HTAM_ERR_INTERNAL, std::string(entry) + ": unknown exception");
  }
}

inline Error Invalid(const char* entry, std::string_view what) {
  return MakeError(HTAM_ERR_INVALID_ARGUMENT, std::string(entry) + ": " + std::string(what));
}

// [offset, offset + bytes) inside a buffer of `size` bytes.
inline Error CheckRange(const char* entry, uint64_t size, uint64_t offset, uint64_t bytes) {
  if (offset <= size && bytes <= size - offset) return nullptr;
  return Invalid(entry, "range [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                            ") outside a buffer of " + std::to_string(size) + " bytes");
}

// A struct the host sent or preset, as this plugin's full struct: the host's bytes (up to its
// struct_size), zero beyond, struct_size this plugin's.
template <typename T>
T Widen(const T* host) {
  T full{};
  std::memcpy(&full, host, std::min<size_t>(host->struct_size, sizeof full));
  full.struct_size = sizeof full;
  return full;
}

// Copies a full struct back into the host's, up to the host's struct_size (kept).
template <typename T>
void Narrow(const T& full, T* host) {
  const uint32_t size = host->struct_size;
  std::memcpy(host, &full, std::min<size_t>(size, sizeof full));
  host->struct_size = size;
}

// Elements of `count` values of `dtype`, in bytes; false when the request is not one the ABI
// allows.
inline bool DataBytes(int32_t dtype, uint64_t count, uint64_t* bytes) {
  if (dtype < 0 || dtype > HTAM_BOOL || count > UINT64_MAX / 8) return false;
  *bytes = count * uint64_t(htam_dtype_size(htam_dtype(dtype)));
  return true;
}

// Fills a host struct through its full form: fill(&full) on the widened copy, then narrowed back.
template <typename T, typename F>
Error FillOut(T* host, F&& fill) {
  T full = Widen(host);
  if (Error e = fill(&full)) return e;
  Narrow(full, host);
  return nullptr;
}

}  // namespace htam::plugin

// ---- the entry points (used by HTAM_BACKEND_PLUGIN; each at namespace scope, extern "C") -------

#define HTAM_PLUGIN_ENTRIES_REQUIRED_                                                              \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_compile(                                    \
      htam_backend* b, const htam_compile_request* req, htam_artifact** out) {                     \
    return htam::plugin::Guard("compile", [&]() -> htam::plugin::Error {                           \
      if (!b || !req || !out || (!req->source && req->source_len))                                 \
        return htam::plugin::Invalid("compile", "null argument");                                  \
      const htam_compile_request r = htam::plugin::Widen(req);                                     \
      const std::string& lang = b->description().language;                                         \
      if (r.language && *r.language && lang != r.language)                                         \
        return htam::plugin::Invalid("compile", b->name() + " backend compiles language '" +       \
                                                    lang + "', not '" + r.language + "'");         \
      return b->Compile(r, std::string_view(r.source ? r.source : "", r.source_len), out);         \
    });                                                                                            \
  }                                                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_artifact_info(const htam_artifact* a,       \
                                                                     htam_artifact_info* out) {    \
    return htam::plugin::Guard("artifact_info", [&]() -> htam::plugin::Error {                     \
      if (!a || !out) return htam::plugin::Invalid("artifact_info", "null argument");              \
      return htam::plugin::FillOut(out, [&](htam_artifact_info* i) { return a->Info(i); });        \
    });                                                                                            \
  }                                                                                                \
  HTAM_BACKEND_EXPORT void htam_backend_artifact_release(htam_artifact* a) {                       \
    delete a;                                                                                      \
  }                                                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_open(htam_backend* b, int32_t index, \
                                                                   htam_device** out) {            \
    return htam::plugin::Guard("device_open", [&]() -> htam::plugin::Error {                       \
      if (!b || !out) return htam::plugin::Invalid("device_open", "null argument");                \
      return b->OpenDevice(index, out);                                                            \
    });                                                                                            \
  }                                                                                                \
  HTAM_BACKEND_EXPORT void htam_backend_device_close(htam_device* d) {                             \
    delete d;                                                                                      \
  }                                                                                                \
  HTAM_BACKEND_EXPORT htam_stream htam_backend_device_stream(htam_device* d) {                     \
    return d ? d->Stream() : nullptr;                                                              \
  }                                                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_load(                                       \
      htam_device* d, const htam_artifact* a, htam_module** out) {                                 \
    return htam::plugin::Guard("load", [&]() -> htam::plugin::Error {                              \
      if (!d || !a || !out) return htam::plugin::Invalid("load", "null argument");                 \
      return d->Load(*a, out);                                                                     \
    });                                                                                            \
  }                                                                                                \
  HTAM_BACKEND_EXPORT void htam_backend_module_release(htam_module* m) {                           \
    delete m;                                                                                      \
  }                                                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_alloc(                               \
      htam_device* d, uint64_t bytes, htam_buffer** out) {                                         \
    return htam::plugin::Guard("buffer_alloc", [&]() -> htam::plugin::Error {                      \
      if (!d || !out) return htam::plugin::Invalid("buffer_alloc", "null argument");               \
      return d->Alloc(bytes, out);                                                                 \
    });                                                                                            \
  }                                                                                                \
  HTAM_BACKEND_EXPORT void htam_backend_buffer_free(htam_buffer* b) {                              \
    delete b;                                                                                      \
  }                                                                                                \
  HTAM_BACKEND_EXPORT void* htam_backend_buffer_address(htam_buffer* b) {                          \
    return b ? b->Address() : nullptr;                                                             \
  }                                                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_copy_to_device(                             \
      htam_buffer* dst, uint64_t offset, const void* src, uint64_t bytes) {                        \
    return htam::plugin::Guard("copy_to_device", [&]() -> htam::plugin::Error {                    \
      if (!dst) return htam::plugin::Invalid("copy_to_device", "null buffer");                     \
      if (auto e = htam::plugin::CheckRange("copy_to_device", dst->bytes, offset, bytes))          \
        return e;                                                                                  \
      if (bytes == 0) return nullptr;                                                              \
      if (!src) return htam::plugin::Invalid("copy_to_device", "null source");                     \
      return dst->CopyToDevice(offset, src, bytes);                                                \
    });                                                                                            \
  }                                                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_copy_to_host(                               \
      void* dst, htam_buffer* src, uint64_t offset, uint64_t bytes) {                              \
    return htam::plugin::Guard("copy_to_host", [&]() -> htam::plugin::Error {                      \
      if (!src) return htam::plugin::Invalid("copy_to_host", "null buffer");                       \
      if (auto e = htam::plugin::CheckRange("copy_to_host", src->bytes, offset, bytes)) return e;  \
      if (bytes == 0) return nullptr;                                                              \
      if (!dst) return htam::plugin::Invalid("copy_to_host", "null destination");                  \
      return src->CopyToHost(dst, offset, bytes);                                                  \
    });                                                                                            \
  }                                                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_memset(htam_buffer* dst, uint64_t offset,   \
                                                              uint8_t value, uint64_t bytes) {     \
    return htam::plugin::Guard("memset", [&]() -> htam::plugin::Error {                            \
      if (!dst) return htam::plugin::Invalid("memset", "null buffer");                             \
      if (auto e = htam::plugin::CheckRange("memset", dst->bytes, offset, bytes)) return e;        \
      if (bytes == 0) return nullptr;                                                              \
      return dst->Memset(offset, value, bytes);                                                    \
    });                                                                                            \
  }                                                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_run(htam_module* m, const htam_tensor* in,  \
                                                           int32_t n_in, htam_tensor* out,         \
                                                           int32_t n_out, int32_t* kernel_rc) {    \
    return htam::plugin::Guard("run", [&]() -> htam::plugin::Error {                               \
      if (!m || n_in < 0 || n_out < 0 || (n_in && !in) || (n_out && !out))                         \
        return htam::plugin::Invalid("run", "bad arguments");                                      \
      if (kernel_rc) *kernel_rc = 0;                                                               \
      return m->Run(in, n_in, out, n_out, kernel_rc);                                              \
    });                                                                                            \
  }                                                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_time(                                       \
      htam_module* m, const htam_timing_request* req, htam_timing_result* res) {                   \
    return htam::plugin::Guard("time", [&]() -> htam::plugin::Error {                              \
      if (!m || !req || !res) return htam::plugin::Invalid("time", "null argument");               \
      const htam_timing_request r = htam::plugin::Widen(req);                                      \
      return htam::plugin::FillOut(res,                                                            \
                                   [&](htam_timing_result* full) { return m->Time(r, full); });    \
    });                                                                                            \
  }

#define HTAM_PLUGIN_CAP_ROOFLINE_                                                                 \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_roofline(                           \
      htam_device* d, htam_roofline_report* out) {                                                \
    return htam::plugin::Guard("device_roofline", [&]() -> htam::plugin::Error {                  \
      if (!d || !out) return htam::plugin::Invalid("device_roofline", "null argument");           \
      return htam::plugin::FillOut(out, [&](htam_roofline_report* r) { return d->Roofline(r); }); \
    });                                                                                           \
  }

#define HTAM_PLUGIN_CAP_MEMORY_USED_                                                              \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_memory_used(htam_device* d,         \
                                                                          uint64_t* used_bytes) { \
    return htam::plugin::Guard("device_memory_used", [&]() -> htam::plugin::Error {               \
      if (!d || !used_bytes) return htam::plugin::Invalid("device_memory_used", "null argument"); \
      return d->MemoryUsed(used_bytes);                                                           \
    });                                                                                           \
  }

#define HTAM_PLUGIN_CAP_SHARING_                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_export(htam_buffer* b,            \
                                                                     htam_buffer_handle* out) { \
    return htam::plugin::Guard("buffer_export", [&]() -> htam::plugin::Error {                  \
      if (!b || !out) return htam::plugin::Invalid("buffer_export", "null argument");           \
      return b->Export(out);                                                                    \
    });                                                                                         \
  }                                                                                             \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_import(                           \
      htam_device* d, const htam_buffer_handle* h, htam_buffer** out) {                         \
    htam::plugin::Error e = htam::plugin::Guard("buffer_import", [&]() -> htam::plugin::Error { \
      if (!d || !h || !out) return htam::plugin::Invalid("buffer_import", "null argument");     \
      return d->Import(*h, out);                                                                \
    });                                                                                         \
    if (h && h->fd >= 0) close(h->fd); /* the import owns the descriptor, whatever happened */  \
    return e;                                                                                   \
  }

#define HTAM_PLUGIN_CAP_DEVICE_DATA_                                                              \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_fill(                               \
      htam_buffer* b, uint64_t offset, const htam_fill_request* req) {                            \
    return htam::plugin::Guard("buffer_fill", [&]() -> htam::plugin::Error {                      \
      uint64_t bytes = 0;                                                                         \
      if (!b || !req || req->struct_size < sizeof(htam_fill_request) ||                           \
          !htam::plugin::DataBytes(req->dtype, req->count, &bytes))                               \
        return htam::plugin::Invalid("buffer_fill", "bad request");                               \
      if (auto e = htam::plugin::CheckRange("buffer_fill", b->bytes, offset, bytes)) return e;    \
      return b->Fill(offset, *req);                                                               \
    });                                                                                           \
  }                                                                                               \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_copy(                               \
      htam_buffer* dst, uint64_t dst_off, htam_buffer* src, uint64_t src_off, uint64_t bytes) {   \
    return htam::plugin::Guard("buffer_copy", [&]() -> htam::plugin::Error {                      \
      if (!dst || !src) return htam::plugin::Invalid("buffer_copy", "null buffer");               \
      if (auto e = htam::plugin::CheckRange("buffer_copy", dst->bytes, dst_off, bytes)) return e; \
      if (auto e = htam::plugin::CheckRange("buffer_copy", src->bytes, src_off, bytes)) return e; \
      if (bytes == 0) return nullptr;                                                             \
      return dst->CopyFrom(dst_off, *src, src_off, bytes);                                        \
    });                                                                                           \
  }                                                                                               \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_compare(                            \
      htam_device* d, const htam_compare_request* req, htam_compare_result* out) {                \
    return htam::plugin::Guard("buffer_compare", [&]() -> htam::plugin::Error {                   \
      uint64_t bytes = 0;                                                                         \
      if (!d || !req || !out || req->struct_size < sizeof(htam_compare_request) || !req->a ||     \
          !req->b || req->mode < 0 || req->mode > 2 ||                                            \
          !htam::plugin::DataBytes(req->dtype, req->count, &bytes))                               \
        return htam::plugin::Invalid("buffer_compare", "bad request");                            \
      if (auto e =                                                                                \
              htam::plugin::CheckRange("buffer_compare", req->a->bytes, req->a_offset, bytes))    \
        return e;                                                                                 \
      if (auto e =                                                                                \
              htam::plugin::CheckRange("buffer_compare", req->b->bytes, req->b_offset, bytes))    \
        return e;                                                                                 \
      return htam::plugin::FillOut(out,                                                           \
                                   [&](htam_compare_result* r) { return d->Compare(*req, r); });  \
    });                                                                                           \
  }

#define HTAM_PLUGIN_CAP_PROFILE_                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile(                                 \
      htam_module* m, const htam_tensor* in, int32_t n_in, htam_tensor* out, int32_t n_out,     \
      htam_profile_report* report) {                                                            \
    return htam::plugin::Guard("profile", [&]() -> htam::plugin::Error {                        \
      if (!m || !report) return htam::plugin::Invalid("profile", "null argument");              \
      return htam::plugin::FillOut(                                                             \
          report, [&](htam_profile_report* r) { return m->Profile(in, n_in, out, n_out, r); }); \
    });                                                                                         \
  }

#define HTAM_PLUGIN_CAP_PROFILER_                                                                \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile_command(                          \
      htam_backend* b, const htam_profile_command_request* request, htam_profile_command* out) { \
    return htam::plugin::Guard("profile_command", [&]() -> htam::plugin::Error {                 \
      if (!b) return htam::plugin::Invalid("profile_command", "null backend");                   \
      return b->ProfileCommand(request, out);                                                    \
    });                                                                                          \
  }                                                                                              \
  HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile_parse(                            \
      htam_backend* b, const htam_profile_output* output, htam_profile_summary* out) {           \
    return htam::plugin::Guard("profile_parse", [&]() -> htam::plugin::Error {                   \
      if (!b) return htam::plugin::Invalid("profile_parse", "null backend");                     \
      return b->ProfileParse(output, out);                                                       \
    });                                                                                          \
  }

// HTAM_PLUGIN_CAPS_(A, B, ...) expands HTAM_PLUGIN_CAP_A_ HTAM_PLUGIN_CAP_B_ ... (up to six).
#define HTAM_PLUGIN_CAP_(c) HTAM_PLUGIN_CAP_##c##_
#define HTAM_PLUGIN_CAPS0_()
#define HTAM_PLUGIN_CAPS1_(a) HTAM_PLUGIN_CAP_(a)
#define HTAM_PLUGIN_CAPS2_(a, ...) HTAM_PLUGIN_CAP_(a) HTAM_PLUGIN_CAPS1_(__VA_ARGS__)
#define HTAM_PLUGIN_CAPS3_(a, ...) HTAM_PLUGIN_CAP_(a) HTAM_PLUGIN_CAPS2_(__VA_ARGS__)
#define HTAM_PLUGIN_CAPS4_(a, ...) HTAM_PLUGIN_CAP_(a) HTAM_PLUGIN_CAPS3_(__VA_ARGS__)
#define HTAM_PLUGIN_CAPS5_(a, ...) HTAM_PLUGIN_CAP_(a) HTAM_PLUGIN_CAPS4_(__VA_ARGS__)
#define HTAM_PLUGIN_CAPS6_(a, ...) HTAM_PLUGIN_CAP_(a) HTAM_PLUGIN_CAPS5_(__VA_ARGS__)
#define HTAM_PLUGIN_CAPS_PICK_(_1, _2, _3, _4, _5, _6, N, ...) N
#define HTAM_PLUGIN_CAPS_(...)                                                              \
  HTAM_PLUGIN_CAPS_PICK_(__VA_ARGS__ __VA_OPT__(, ) HTAM_PLUGIN_CAPS6_, HTAM_PLUGIN_CAPS5_, \
                         HTAM_PLUGIN_CAPS4_, HTAM_PLUGIN_CAPS3_, HTAM_PLUGIN_CAPS2_,        \
                         HTAM_PLUGIN_CAPS1_, HTAM_PLUGIN_CAPS0_)                            \
  (__VA_ARGS__)
