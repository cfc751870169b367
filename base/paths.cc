// Install-relative lookup of shipped files (see paths.h): /proc/self/exe, then share/htam, lib/htam
// or bin in the executable's folder or one to three folders up.
#include "base/paths.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <vector>

namespace htam {
namespace {

namespace fs = std::filesystem;

const std::string& ExePathOnce() {
  static const std::string path = [] {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : exe.string();
  }();
  return path;
}

const std::string& ExeDirOnce() {
  static const std::string dir = fs::path(ExePathOnce()).parent_path().string();
  return dir;
}

// The executable's folder and up to three of its ancestors, nearest first.
std::vector<fs::path> Ancestors() {
  std::vector<fs::path> out;
  const std::string exe = ExeDirOnce();
  if (exe.empty()) return out;
  fs::path up = exe;
  for (int level = 0; level < 4; ++level) {
    out.push_back(up);
    if (up == up.root_path()) break;
    up = up.parent_path();
  }
  return out;
}

std::string Canonical(const fs::path& p) {
  std::error_code ec;
  fs::path canon = fs::canonical(p, ec);
  return ec ? p.string() : canon.string();
}

bool Exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

std::string FindUnder(const std::string& tree, const std::string& relative) {
  for (const fs::path& a : Ancestors()) {
    fs::path candidate = a / tree / relative;
    if (Exists(candidate)) return Canonical(candidate);
  }
  return "";
}

bool IsRegularFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

std::string ExecutableDir() {
  return ExeDirOnce();
}

std::string ExecutablePath() {
  return ExePathOnce();
}

std::string FindSharedFile(const std::string& relative) {
  return FindUnder("share/htam", relative);
}

std::string FindLibFile(const std::string& relative) {
  return FindUnder("lib/htam", relative);
}

std::string FindExecutable(const std::string& name) {
  const std::string exe = ExeDirOnce();
  if (!exe.empty() && IsRegularFile(fs::path(exe) / name)) return Canonical(fs::path(exe) / name);
  for (const char* tree : {"bin", "lib/htam"})
    for (const fs::path& a : Ancestors())
      if (IsRegularFile(a / tree / name)) return Canonical(a / tree / name);
  return "";
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

std::string PluginBackendName(const std::string& path) {
  const std::string n = fs::path(path).filename().string();
  const std::string pre = "libhtam_backend_", suf = ".so";
  if (n.rfind(pre, 0) != 0 || n.size() <= pre.size() + suf.size() ||
      n.compare(n.size() - suf.size(), suf.size(), suf) != 0)
    return "";
  return n.substr(pre.size(), n.size() - pre.size() - suf.size());
}

std::map<std::string, std::string> FindPlugins(const std::string& configured_dir) {
  std::vector<fs::path> dirs;
  if (!configured_dir.empty()) {
    dirs.push_back(configured_dir);
  } else {
    const std::string exe = ExeDirOnce();
    if (!exe.empty()) dirs = {fs::path(exe), fs::path(exe) / "plugins"};
    const std::string lib = FindLibFile("backends");
    if (!lib.empty()) dirs.push_back(lib);
  }
  std::map<std::string, std::string> found;
  for (const fs::path& d : dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = PluginBackendName(it->path().string());
      if (name.empty() || found.count(name)) continue;
      found[name] = fs::absolute(it->path(), ec).string();
    }
  }
  return found;
}

}  // namespace htam
