// Runs a toolchain program (hipcc, clang-offload-bundler) as a child process with a wall-clock
// limit, capturing stdout and stderr together. The child leads its own process group so that a
// timeout kills the whole tool chain (hipcc is a Perl script that spawns clang, lld, the offload
// bundler). Thread-safety: RunTool is safe to call from several threads at once.
#pragma once

#include <string>
#include <vector>

#include "daemon/util/status.h"

namespace htam::hip {

struct ToolResult {
  int exit_code = -1;      // valid when !signaled && !timed_out
  bool signaled = false;   // ended by a signal it did not get from us
  bool timed_out = false;  // killed by us after the limit
  std::string output;      // stdout and stderr interleaved, at most max_output bytes kept
  double wall_ms = 0;
};

// Runs argv (argv[0] searched in PATH when it has no slash) in `cwd`, with `env_extra` ("K=V")
// added to the environment. timeout_s <= 0 means no limit. IOError when it cannot be started.
Result<ToolResult> RunTool(const std::vector<std::string>& argv, const std::string& cwd,
                           double timeout_s, size_t max_output = 1 << 20,
                           const std::vector<std::string>& env_extra = {});

}  // namespace htam::hip
