// Whole-file reads and mkdir -p (see file.h).
#include "base/file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace htam {

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::string text;
  return ReadWholeFile(path, &text) ? text : std::string();
}

Status MakeDirs(const std::string& path, mode_t mode) {
  std::string cur = !path.empty() && path[0] == '/' ? "/" : "";
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += (cur.empty() || cur.back() == '/' ? "" : "/") + part;
    if (mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
      return Status::IOError("cannot create " + cur + ": " + strerror(errno));
  }
  return Status::OK();
}

Result<std::string> CreateUniqueFile(const std::string& prefix) {
  std::string name = prefix + ".tmp.XXXXXX";
  const int fd = mkstemp(name.data());
  if (fd < 0) return Status::IOError("cannot create " + name + ": " + std::strerror(errno));
  close(fd);
  return name;
}

}  // namespace htam
