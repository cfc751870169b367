// htam-bench world: the measured optimization world (build, check, bench). Written in Python over
// the SDK like `quality` (bench drives real htamd processes), so this subcommand only runs
// `/usr/bin/python3 -m htam_agent world ...` with the build's and the source tree's Python packages
// on PYTHONPATH, and HTAM_WORLD_BIN set to the build's CUDA binaries. See
// sdk/python/htam_agent/world_build.py, world_bench.py and docs/benchmarks.md ("world").
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/bench/bench.h"

namespace {

std::string Parent(const std::string& path, int levels) {
  std::string p = path;
  for (int i = 0; i < levels; ++i) {
    size_t slash = p.find_last_of('/');
    p = slash == std::string::npos || slash == 0 ? std::string("/") : p.substr(0, slash);
  }
  return p;
}

}  // namespace

int RunWorldBench(int argc, char** argv) {
  // The source tree from this file's path (CMake compiles with absolute paths); the build tree
  // from the running binary: <build>/tools/bench/htam-bench.
  // The source tree: from the build's definition (ccache may compile with relative paths, so
  // __FILE__ is not always absolute), else from this file's path.
#ifdef HTAM_SOURCE_DIR
  const std::string source_root = HTAM_SOURCE_DIR;
#else
  const std::string source_root = Parent(__FILE__, 3);
#endif
  const std::string build_root = Parent(htam::bench::SelfExe(), 3);
  std::string pythonpath = build_root + "/python:" + source_root + "/sdk/python";
  if (const char* old = std::getenv("PYTHONPATH"); old && *old)
    pythonpath += std::string(":") + old;
  setenv("PYTHONPATH", pythonpath.c_str(), 1);
  if (!std::getenv("HTAM_BUILD_DIR")) setenv("HTAM_BUILD_DIR", build_root.c_str(), 1);
  if (!std::getenv("HTAM_WORLD_BIN"))
    setenv("HTAM_WORLD_BIN", (build_root + "/backends/cuda").c_str(), 1);

  const char* python = "/usr/bin/python3";  // Debian's: it has python3-zmq and python3-flatbuffers
  std::vector<char*> args;
  args.push_back(const_cast<char*>(python));
  args.push_back(const_cast<char*>("-m"));
  args.push_back(const_cast<char*>("htam_agent"));
  args.push_back(const_cast<char*>("world"));
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  std::fflush(nullptr);
  execv(python, args.data());
  std::fprintf(stderr, "htam-bench world: cannot run %s: %s\n", python, std::strerror(errno));
  return 1;
}
