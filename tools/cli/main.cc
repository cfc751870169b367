// htam: the command-line tool (docs/cli.md). Everything is in RunCli (tools/cli/cli.cc).
#include <iostream>

#include "tools/cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  int rc = htam::cli::RunCli(args, std::cout, std::cerr);
  std::cout.flush();
  return rc;
}
