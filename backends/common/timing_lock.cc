// The verifier's side of the host-wide timing lock (timing_lock.h): a shared flock with a bounded
// wait, polled because flock(2) itself has no timeout.
#include "backends/common/timing_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "backends/common/tensor_data.h"

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
  for (;;) {
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
      fd_ = fd;
      return;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) break;  // a file system without flock: no lock
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
