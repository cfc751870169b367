// A store damaged badly enough makes LMDB fault on a wild page: the CLI runs the steps that map
// such a store (the copy of `backup`) in a child process and reports a crash as Corruption.
// Thread-safety: a plain function; forks the calling process.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"

namespace htam::cli {

// Runs fn in a forked child and returns its Status; a child killed by a signal (LMDB faulting on a
// damaged file) becomes Corruption. fn must only touch the file system (its memory is lost).
Status RunIsolated(const std::function<Status()>& fn, const std::string& what);

}  // namespace htam::cli
