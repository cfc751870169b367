// htamd's data-directory lock (server.lock_file, flock on DATA/htamd.pid): the CLI tells whether a
// daemon runs, and holds the lock itself while it writes a store, so no daemon starts meanwhile.
// Thread-safety: a DataDirLock is owned by one thread.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

namespace htam::cli {

inline constexpr const char* kLockFile = "htamd.pid";  // default of server.lock_file

// Whether a process holds the lock of data_dir; *pid = its pid when the file names one.
bool DaemonRunning(const std::string& data_dir, std::string* pid = nullptr);

class DataDirLock {
 public:
  // FailedPrecondition when htamd (or another writer) holds it.
  static Result<std::unique_ptr<DataDirLock>> Acquire(const std::string& data_dir);
  ~DataDirLock();

 private:
  DataDirLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace htam::cli
