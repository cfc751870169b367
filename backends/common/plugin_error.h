// Helpers for plugin authors: build an htam_backend_error from C++ (allocates with new; the error's
// release function deletes it, so the host frees it correctly whatever its allocator).
// Header-only so that a plugin does not link host code. Thread-safety: stateless.
#pragma once

#include <cstring>
#include <string>
#include <string_view>

#include "htam/backend.h"

namespace htam::plugin {

struct OwnedError {
  htam_backend_error e;
  std::string text;
};

inline void ReleaseOwnedError(htam_backend_error* self) {
  delete reinterpret_cast<OwnedError*>(self);  // e is the first member
}

inline htam_backend_error* MakeError(htam_backend_error_code code, std::string_view message) {
  auto* o = new OwnedError;
  o->text.assign(message);
  o->e.code = code;
  o->e.message = o->text.c_str();
  o->e.release = &ReleaseOwnedError;
  return &o->e;
}

}  // namespace htam::plugin
