// htam: the command-line tool (docs/cli.md). Everything is in RunCli (tools/cli/cli.cc); main runs
// it in a child process, so that a store damaged badly enough to make LMDB fault (a wild page
// pointer) gives one clear line and a non-zero exit, never a core dump.
#include <cstring>
#include <iostream>

#include "base/process.h"
#include "tools/cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::cout.flush();
  auto run = htam::RunForked([&](std::string*) {
    int rc = htam::cli::RunCli(args, std::cout, std::cerr);
    std::cout.flush();
    std::cerr.flush();
    return rc;
  });
  if (!run.ok()) {  // no isolation available: run here
    int rc = htam::cli::RunCli(args, std::cout, std::cerr);
    std::cout.flush();
    return rc;
  }
  if (!run->signaled) return run->exit_code;
  std::string cmd = htam::cli::CommandName(args);
  std::cerr
      << "htam" << (cmd.empty() ? "" : " " + cmd) << ": crashed (" << strsignal(run->signal)
      << ") reading the store: it is probably damaged; run 'htam check' and restore a backup\n";
  return htam::cli::kExitFail;
}
