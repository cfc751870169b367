// Runs a tool (nvcc, ncu, hipcc, the offload bundler) as a child process with a wall-clock limit,
// capturing its output. The child gets its own process group so that a timeout kills the whole
// tool chain (nvcc spawns cicc, ptxas, gcc; hipcc spawns clang, lld, the bundler).
// Thread-safety: RunProcess is safe to call from several threads at once.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace htam {

struct ProcessResult {
  int exit_code = -1;      // valid when !signaled && !timed_out
  bool signaled = false;   // killed by a signal it did not ask for
  bool timed_out = false;  // killed by us after timeout_s
  std::string output;      // stdout and stderr interleaved, at most max_output bytes kept
  double wall_ms = 0;
};

// Runs argv[0] (searched in PATH when it has no slash) in `cwd` with stdout+stderr captured
// through a temporary file in `cwd`. timeout_s <= 0 means no limit. IOError when it cannot start.
// `extra_env` ("NAME=value") is added to (and overrides) the parent's environment; nvcc gets
// TMPDIR=<its compile dir> so that it never needs a writable /tmp (sandboxed workers).
// `cwd` must be a writable folder (the output file is made there).
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, const std::string& cwd,
                                 double timeout_s, size_t max_output = 1 << 20,
                                 const std::vector<std::string>& extra_env = {});

}  // namespace htam
