// Install-relative lookup of shipped files (see paths.h): /proc/self/exe, then share/htam or
// lib/htam one to three folders up.
#include "base/paths.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace htam {
namespace {

namespace fs = std::filesystem;

const std::string& ExeDirOnce() {
  static const std::string dir = [] {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return std::string();
    return exe.parent_path().string();
  }();
  return dir;
}

std::string FindUnder(const std::string& tree, const std::string& relative) {
  const std::string exe = ExeDirOnce();
  if (exe.empty()) return "";
  fs::path up = exe;
  for (int level = 0; level < 3; ++level) {
    up = up.parent_path();
    fs::path candidate = up / tree / relative;
    std::error_code ec;
    if (fs::exists(candidate, ec)) {
      fs::path canon = fs::canonical(candidate, ec);
      return ec ? candidate.string() : canon.string();
    }
    if (up == up.root_path()) break;
  }
  return "";
}

}  // namespace

std::string ExecutableDir() {
  return ExeDirOnce();
}

std::string FindSharedFile(const std::string& relative) {
  return FindUnder("share/htam", relative);
}

std::string FindLibFile(const std::string& relative) {
  return FindUnder("lib/htam", relative);
}

std::string FindConfigFile(const std::string& name) {
  const std::string exe = ExeDirOnce();
  if (exe.empty()) return "";
  const fs::path prefix = fs::path(exe).parent_path();
  const fs::path file = prefix == "/usr" ? fs::path("/etc/htam") / name : prefix / "etc/htam" / name;
  std::error_code ec;
  return fs::is_regular_file(file, ec) ? file.string() : "";
}

std::string ShippedPath(const std::string& configured, const std::string& shipped) {
  if (!configured.empty()) return configured;
  std::string found = FindSharedFile(shipped);
  if (!found.empty()) return found;
  const std::string exe = ExeDirOnce();
  return (fs::path(exe.empty() ? "." : exe).parent_path() / "share/htam" / shipped).string();
}

}  // namespace htam
