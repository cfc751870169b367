// The language a backend's candidates are written in, when a request or a worker does not say:
// the server, the scheduler and the remote worker agree on it through this one rule.
// Thread-safety: pure function, safe for concurrent use.
#pragma once

#include <string>

namespace htam {

// "cuda" and "hip" candidates are written in their backend's language; every other backend
// (cpu, ...) takes C++.
inline std::string LanguageOf(const std::string& backend) {
  return backend == "cuda" || backend == "hip" ? backend : "cpp";
}

}  // namespace htam
