// The htam-bench subcommands written in Python over the SDK (quality, world) start the same way:
// `/usr/bin/python3 -m htam_bench <subcommand> ...` with htam's Python packages (found above the
// binary: a build tree's python/, or lib/python3/dist-packages) on PYTHONPATH and HTAM_BUILD_DIR
// set. Thread-safety: replaces the process (execv).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace htam::bench {

// Sets PYTHONPATH (the packages' folder, then the caller's), HTAM_BUILD_DIR and,
// for each (NAME, relative) of `build_paths`, NAME=<build>/<relative> unless NAME is already set;
// then execs Debian's python3 on `htam_bench <subcommand> argv...`. Returns 1 with a message only
// if python3 cannot be started.
int ExecPythonSubcommand(const std::string& subcommand, int argc, char** argv,
                         const std::vector<std::pair<std::string, std::string>>& build_paths = {});

}  // namespace htam::bench
