// htam: the command-line tool (docs/cli.md). Everything is in RunCli (tools/cli/cli.cc); main runs
// it in a child process, so that a store damaged badly enough to make LMDB fault (a wild page
// pointer) gives one clear line and a non-zero exit, never a core dump.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "tools/cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::cout.flush();
  pid_t pid = ::fork();
  if (pid < 0) {  // no isolation available: run here
    int rc = htam::cli::RunCli(args, std::cout, std::cerr);
    std::cout.flush();
    return rc;
  }
  if (pid == 0) {
    int rc = htam::cli::RunCli(args, std::cout, std::cerr);
    std::cout.flush();
    std::cerr.flush();
    ::_exit(rc);
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  std::string cmd = htam::cli::CommandName(args);
  std::cerr
      << "htam" << (cmd.empty() ? "" : " " + cmd) << ": crashed (" << strsignal(WTERMSIG(st))
      << ") reading the store: it is probably damaged; run 'htam check' and restore a backup\n";
  return htam::cli::kExitFail;
}
