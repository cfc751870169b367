// Starts an htam-bench subcommand that is written in Python (see python_launch.h).
#include "tools/bench/python_launch.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

}  // namespace

int ExecPythonSubcommand(const std::string& subcommand, int argc, char** argv,
                         const std::vector<std::pair<std::string, std::string>>& build_paths) {
  // The source tree: from the build's definition (ccache may compile with relative paths, so
  // __FILE__ is not always absolute), else from this file's path. The build tree from the
  // running binary: <build>/tools/bench/htam-bench.
#ifdef HTAM_SOURCE_DIR
  const std::string source_root = HTAM_SOURCE_DIR;
#else
  const std::string source_root = Parent(__FILE__, 3);
#endif
  const std::string build_root = Parent(SelfExe(), 3);
  std::string pythonpath = build_root + "/python:" + source_root + "/sdk/python";
  if (const char* old = std::getenv("PYTHONPATH"); old && *old)
    pythonpath += std::string(":") + old;
  setenv("PYTHONPATH", pythonpath.c_str(), 1);
  if (!std::getenv("HTAM_BUILD_DIR")) setenv("HTAM_BUILD_DIR", build_root.c_str(), 1);
  for (const auto& [name, relative] : build_paths) {
    if (!std::getenv(name.c_str())) setenv(name.c_str(), (build_root + "/" + relative).c_str(), 1);
  }

  const char* python = "/usr/bin/python3";  // Debian's: it has python3-zmq and python3-flatbuffers
  std::vector<char*> args;
  args.push_back(const_cast<char*>(python));
  args.push_back(const_cast<char*>("-m"));
  args.push_back(const_cast<char*>("htam_agent"));
  args.push_back(const_cast<char*>(subcommand.c_str()));
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  std::fflush(nullptr);
  execv(python, args.data());
  std::fprintf(stderr, "htam-bench %s: cannot run %s: %s\n", subcommand.c_str(), python,
               std::strerror(errno));
  return 1;
}

}  // namespace htam::bench
