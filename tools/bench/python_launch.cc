// Starts an htam-bench subcommand that is written in Python (see python_launch.h).
#include "tools/bench/python_launch.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/paths.h"
#include "base/process.h"
#include "tools/bench/bench.h"

namespace htam::bench {
namespace {

std::string Parent(const std::string& path, int levels) {
  std::string p = path;
  for (int i = 0; i < levels; ++i) {
    size_t slash = p.find_last_of('/');
    p = slash == std::string::npos || slash == 0 ? std::string("/") : p.substr(0, slash);
  }
  return p;
}

// The folder of the Python packages htam ships (htam, htam_agent and this tool's htam_bench),
// found as paths.h finds shipped files: above the running binary, never in the source tree.
// Installed: <prefix>/lib/python3/dist-packages; a build tree: <build>/python (the SDK assembled
// there, the agent and the harness linked to their sources). "" when neither is found.
std::string PythonPackagesDir() {
  std::string dir = ExecutableDir();
  for (int up = 1; up <= 3 && !dir.empty() && dir != "/"; ++up) {
    dir = Parent(dir, 1);
    for (const char* rel : {"/python", "/lib/python3/dist-packages"}) {
      const std::string p = (dir == "/" ? "" : dir) + rel;
      if (access((p + "/htam_bench/__init__.py").c_str(), R_OK) == 0) return p;
    }
  }
  return "";
}

}  // namespace

int ExecPythonSubcommand(const std::string& subcommand, int argc, char** argv,
                         const std::vector<std::pair<std::string, std::string>>& build_paths) {
  // The build tree from the running binary: <build>/tools/bench/htam-bench.
  const std::string build_root = Parent(SelfExe(), 3);
  std::string pythonpath = PythonPackagesDir();
  if (pythonpath.empty()) {
    std::fprintf(stderr,
                 "htam-bench %s: the Python packages (htam_bench) are neither in a build tree's "
                 "python/ nor in lib/python3/dist-packages above %s\n",
                 subcommand.c_str(), ExecutableDir().c_str());
    return 1;
  }
  if (const char* old = std::getenv("PYTHONPATH"); old && *old)
    pythonpath += std::string(":") + old;
  setenv("PYTHONPATH", pythonpath.c_str(), 1);
  if (!std::getenv("HTAM_BUILD_DIR")) setenv("HTAM_BUILD_DIR", build_root.c_str(), 1);
  for (const auto& [name, relative] : build_paths) {
    if (!std::getenv(name.c_str())) setenv(name.c_str(), (build_root + "/" + relative).c_str(), 1);
  }

  const std::string python = "/usr/bin/python3";  // Debian's: python3-zmq, python3-flatbuffers
  std::vector<std::string> args = {python, "-m", "htam_bench", subcommand};
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  Status s = ReplaceProcess(args);
  std::fprintf(stderr, "htam-bench %s: %s\n", subcommand.c_str(), s.message().c_str());
  return 1;
}

}  // namespace htam::bench
