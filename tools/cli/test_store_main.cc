// htam-test-store: writes the CLI tests' deterministic store, or keeps appending sessions to it
// (a write storm for the backup test). Test tool, not installed.
//   htam-test-store build DATA_DIR [sessions] [steps] [salt]
//   htam-test-store storm DATA_DIR SECONDS
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "base/log.h"
#include "tools/cli/test_store.h"

int main(int argc, char** argv) {
  htam::SetLogLevel(htam::LogLevel::kError);
  std::string mode = argc > 1 ? argv[1] : "";
  if (argc < 3 || (mode != "build" && mode != "storm")) {
    std::cerr << "usage: htam-test-store build DATA_DIR [sessions] [steps] [salt] | storm DATA_DIR "
                 "SECONDS\n";
    return 2;
  }
  std::string dir = argv[2];
  if (mode == "build") {
    htam::cli::testing::TestStoreOptions o;
    if (argc > 3) o.sessions = std::atoi(argv[3]);
    if (argc > 4) o.steps = std::atoi(argv[4]);
    if (argc > 5) o.salt = std::atoi(argv[5]);
    auto s = htam::cli::testing::BuildTestStore(dir, o);
    if (!s.ok()) std::cerr << s.ToString() << "\n";
    return s.ok() ? 0 : 1;
  }
  double seconds = argc > 3 ? std::atof(argv[3]) : 5;
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int n = 0;
  std::cout << "storming" << std::endl;  // the parent waits for this line
  while (std::chrono::steady_clock::now() < end) {
    auto s = htam::cli::testing::AppendSession(dir, 4, 100 + n++);
    if (!s.ok()) {
      std::cerr << s.ToString() << "\n";
      return 1;
    }
  }
  std::cout << "sessions " << n << std::endl;
  return 0;
}
