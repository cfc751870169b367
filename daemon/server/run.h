// htamd's life cycle: lock the data directory, open the memory, start the evaluator, serve
// until SIGTERM/SIGINT, then shut down cleanly. Called by daemon/main.cc.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "daemon/config/config.h"

namespace htam {

// Runs the daemon; returns the process exit code (0 after a clean shutdown).
int RunDaemon(const Config& config);

namespace server {

// An exclusive flock on a PID file: two daemons never open the same store. Released (and the
// file removed) on destruction. Thread-safety: not shared between threads.
class PidLock {
 public:
  static Result<std::unique_ptr<PidLock>> Acquire(const std::string& path);
  ~PidLock();
  PidLock(const PidLock&) = delete;
  PidLock& operator=(const PidLock&) = delete;

 private:
  PidLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace server
}  // namespace htam
