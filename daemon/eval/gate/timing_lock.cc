// The verifier's side of the host-wide timing lock (timing_lock.h): a shared flock with a bounded
// wait, polled because flock(2) itself has no timeout.
#include "daemon/eval/gate/timing_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "base/file.h"
#include "base/wait_report.h"
#include "daemon/eval/gate/tensor_data.h"

namespace htam {

std::string TimingLockPath(const std::string& golden_cache_dir) {
  return golden_cache_dir.empty() ? std::string() : golden_cache_dir + "/timing.lock";
}

SharedTimingLock::SharedTimingLock(const std::string& path, double wait_s)
    : wait_s_(std::max(0.0, wait_s)) {
  if (path.empty()) return;
  // flock needs no write access: a file another user created still locks when opened read-only.
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait_s_);
  auto pause = std::chrono::milliseconds(1);
  std::optional<ScopedWait> waiting;  // reported once the first attempt found the lock taken
  for (;;) {
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
      fd_ = fd;
      return;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) break;  // a file system without flock: no lock
    if (!waiting) waiting.emplace();
    const auto now = Clock::now();
    if (now >= deadline) {
      waited_out_ = true;
      break;
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(pause, std::chrono::ceil<Clock::duration>(deadline - now)));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  close(fd);
}

std::string DeviceLockPath(const std::string& golden_cache_dir, const std::string& backend,
                           int device_index) {
  if (golden_cache_dir.empty() || backend.empty() || device_index < 0) return std::string();
  return golden_cache_dir + "/device-" + backend + "-" + std::to_string(device_index) + ".lock";
}

namespace {
int OpenLockFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  return fd;
}
}  // namespace

DeviceLock::DeviceLock(const std::string& path, double wait_s) : wait_s_(std::max(0.0, wait_s)) {
  if (path.empty()) return;
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) (void)MakeDirs(path.substr(0, slash), 0755);
  fd_ = OpenLockFile(path);
  turn_ = fd_ < 0 ? -1 : OpenLockFile(path + ".turn");
  if (turn_ < 0 && fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
}

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) close(fd_);
  if (turn_ >= 0) close(turn_);
}

bool DeviceLock::Take(int fd, int op) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait_s_);
  auto pause = std::chrono::microseconds(100);
  std::optional<ScopedWait> waiting;  // another evaluation has the device: not this job's time
  for (;;) {
    if (flock(fd, op | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) return false;  // no flock here: no lock
    if (!waiting) waiting.emplace();
    const auto now = Clock::now();
    if (now >= deadline) {
      waited_out_ = true;
      return false;
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(pause, std::chrono::ceil<Clock::duration>(deadline - now)));
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

void DeviceLock::Shared() {
  Turn(LOCK_SH);
}

void DeviceLock::Exclusive() {
  Turn(LOCK_EX);
}

void DeviceLock::Turn(int op) {
  if (fd_ < 0 || held_ == op) return;
  Release();
  // Through the turn file: a shared taker waits behind an exclusive one already waiting there
  // (which holds it exclusive until it has the device).
  if (Take(turn_, op)) {
    if (Take(fd_, op)) held_ = op;
    flock(turn_, LOCK_UN);
  }
}

void DeviceLock::Release() {
  if (held_) flock(fd_, LOCK_UN);
  held_ = 0;
}

std::string DeviceLock::Note() const {
  if (!waited_out_) return std::string();
  return "another evaluation kept the device longer than " + FormatNumber(wait_s_) +
         " s (eval.timing_lock_wait_s); a phase went on without its turn and may have overlapped "
         "it";
}

SharedTimingLock::~SharedTimingLock() {
  if (fd_ >= 0) close(fd_);  // closing the last descriptor releases the flock
}

std::string SharedTimingLock::Note() const {
  if (!waited_out_) return std::string();
  return "the timing may have overlapped the background torch.compile measurement (timing.lock "
         "still held after " +
         FormatNumber(wait_s_) + " s, eval.timing_lock_wait_s)";
}

}  // namespace htam
