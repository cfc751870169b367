// Small file helpers shared by the daemon, the backends and the tools.
// Thread-safety: pure functions, safe for concurrent use.
#pragma once

#include <string>

namespace htam {

// The whole file, bytes as they are; false when it cannot be opened.
bool ReadWholeFile(const std::string& path, std::string* out);

// The whole file, or "" when it cannot be opened (for callers where a missing file reads as
// empty: benchmarks, logs shown on failure).
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace htam
