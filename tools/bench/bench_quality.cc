// htam-bench quality: the memory-quality benchmark. It is written in Python over the SDK (it drives
// real htamd processes and replays task lineages), so this subcommand only runs
// `/usr/bin/python3 -m htam_agent quality ...` with the build's and the source tree's Python
// packages on PYTHONPATH. See sdk/python/htam_agent/quality.py and docs/benchmarks.md.
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

int RunQualityBench(int argc, char** argv) {
  // The source tree from this file's path (CMake compiles with absolute paths); the build tree
  // from the running binary: <build>/tools/bench/htam-bench.
  const std::string source_root = Parent(__FILE__, 3);
  const std::string build_root = Parent(htam::bench::SelfExe(), 3);
  std::string pythonpath = build_root + "/python:" + source_root + "/sdk/python";
  if (const char* old = std::getenv("PYTHONPATH"); old && *old)
    pythonpath += std::string(":") + old;
  setenv("PYTHONPATH", pythonpath.c_str(), 1);
  if (!std::getenv("HTAM_BUILD_DIR")) setenv("HTAM_BUILD_DIR", build_root.c_str(), 1);

  const char* python = "/usr/bin/python3";  // Debian's: it has python3-zmq and python3-flatbuffers
  std::vector<char*> args;
  args.push_back(const_cast<char*>(python));
  args.push_back(const_cast<char*>("-m"));
  args.push_back(const_cast<char*>("htam_agent"));
  args.push_back(const_cast<char*>("quality"));
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  std::fflush(nullptr);
  execv(python, args.data());
  std::fprintf(stderr, "htam-bench quality: cannot run %s: %s\n", python, std::strerror(errno));
  return 1;
}
