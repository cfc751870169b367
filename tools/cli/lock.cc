// The data-directory lock shared with htamd (daemon/server/run.cc takes the same flock).
#include "tools/cli/lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace htam::cli {
namespace {
std::string ReadPid(int fd) {
  char b[32] = {};
  ssize_t n = ::pread(fd, b, sizeof b - 1, 0);
  std::string s = n > 0 ? std::string(b, static_cast<size_t>(n)) : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}
}  // namespace

bool DaemonRunning(const std::string& data_dir, std::string* pid) {
  std::string path = data_dir + "/" + kLockFile;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  if (!held) ::flock(fd, LOCK_UN);
  if (held && pid) *pid = ReadPid(fd);
  ::close(fd);
  return held;
}

Result<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(const std::string& data_dir) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  std::string path = data_dir + "/" + kLockFile;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("cannot open lock file " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    std::string other = ReadPid(fd);
    ::close(fd);
    return Status::FailedPrecondition("htamd" +
                                      (other.empty() ? std::string() : " (pid " + other + ")") +
                                      " holds " + path + ": stop it first");
  }
  std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) < 0) {
    ::close(fd);
    return Status::IOError("cannot write lock file " + path);
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(fd, path));
}

DataDirLock::~DataDirLock() {
  ::unlink(path_.c_str());  // still holding it: nobody races in between (as htamd does)
  ::close(fd_);
}

}  // namespace htam::cli
