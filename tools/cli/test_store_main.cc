// htam-test-store: writes the CLI tests' deterministic store, or keeps appending sessions to it
// (a write storm for the backup test). Test tool, not installed.
//   htam-test-store build DATA_DIR [sessions] [steps] [salt]
//   htam-test-store storm DATA_DIR SECONDS
#include <boost/program_options.hpp>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "base/args.h"
#include "base/log.h"
#include "tools/cli/test_store.h"

namespace {

const char kUsage[] =
    "usage: htam-test-store build DATA_DIR [sessions] [steps] [salt] | storm DATA_DIR SECONDS\n";

// Appends sessions to the store in `dir` for `seconds`.
int Storm(const std::string& dir, double seconds) {
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

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  htam::SetLogLevel(htam::LogLevel::kError);
  std::string mode, dir;
  std::vector<double> numbers;  // build: sessions, steps, salt; storm: seconds
  po::options_description none, words;
  words.add_options()("mode", po::value(&mode))("dir", po::value(&dir))(
      "number", po::value(&numbers)->composing());
  po::positional_options_description positional;
  positional.add("mode", 1).add("dir", 1).add("number", -1);
  po::variables_map vm;
  const int rc =
      htam::ParseArgs("htam-test-store", kUsage, std::vector<std::string>(argv + 1, argv + argc),
                      none, words, &vm, std::cout, std::cerr, &positional);
  if (rc >= 0) return rc;
  if (dir.empty() || (mode != "build" && mode != "storm")) {
    std::cerr << kUsage;
    return 2;
  }
  if (mode == "storm") return Storm(dir, numbers.empty() ? 5 : numbers[0]);
  htam::cli::testing::TestStoreOptions o;
  if (numbers.size() > 0) o.sessions = static_cast<int>(numbers[0]);
  if (numbers.size() > 1) o.steps = static_cast<int>(numbers[1]);
  if (numbers.size() > 2) o.salt = static_cast<int>(numbers[2]);
  auto s = htam::cli::testing::BuildTestStore(dir, o);
  if (!s.ok()) std::cerr << s.ToString() << "\n";
  return s.ok() ? 0 : 1;
}
