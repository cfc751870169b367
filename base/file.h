// Small file helpers shared by the daemon, the backends and the tools.
// Thread-safety: pure functions, safe for concurrent use.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"

namespace htam {

// The whole file, bytes as they are; false when it cannot be opened.
bool ReadWholeFile(const std::string& path, std::string* out);

// The whole file, or "" when it cannot be opened (for callers where a missing file reads as
// empty: benchmarks, logs shown on failure).
std::string ReadFileOrEmpty(const std::string& path);

// mkdir -p: creates `path` and its missing parents, each new one with `mode` (less the umask);
// directories that exist already are left as they are (their mode too). A relative path is
// taken from the working directory. IOError names the first directory that could not be made.
Status MakeDirs(const std::string& path, mode_t mode);

}  // namespace htam
