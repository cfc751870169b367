// The verifier's side of the host-wide timing lock (timing_lock.h): a shared flock with a bounded
// wait, polled because flock(2) itself has no timeout.
#include "daemon/eval/gate/timing_lock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "base/file.h"
#include "base/wait_report.h"
#include "daemon/eval/gate/tensor_data.h"

namespace htam {

namespace {
enum class Try { kDone, kAgain, kNever };

// Calls `attempt` until it is done (true) or will never be (false), backing off from `pause` to
// `max_pause` between calls, for at most `wait_s`; past that *waited_out is set and it returns
// false. The wait is declared (ScopedWait) from the first call that must be repeated: it is not the
// job's own time.
template <typename Attempt>
bool TryUntil(double wait_s, std::chrono::microseconds pause, std::chrono::microseconds max_pause,
              bool* waited_out, Attempt attempt) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait_s);
  std::optional<ScopedWait> waiting;
  for (;;) {
    const Try t = attempt();
    if (t != Try::kAgain) return t == Try::kDone;
    if (!waiting) waiting.emplace();
    const auto now = Clock::now();
    if (now >= deadline) {
      *waited_out = true;
      return false;
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(pause, std::chrono::ceil<Clock::duration>(deadline - now)));
    pause = std::min(pause * 2, max_pause);
  }
}

// flock(fd, op) without blocking: done, again (taken), never (no flock on this file system).
Try TryFlock(int fd, int op) {
  if (flock(fd, op | LOCK_NB) == 0) return Try::kDone;
  return errno == EWOULDBLOCK || errno == EINTR ? Try::kAgain : Try::kNever;
}
}  // namespace

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
  // A file system without flock: no lock.
  if (TryUntil(wait_s_, std::chrono::milliseconds(1), std::chrono::milliseconds(20), &waited_out_,
               [&] { return TryFlock(fd, LOCK_SH); }))
    fd_ = fd;
  else
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

bool DeviceLock::Take(int fd, int op, double wait_s) {
  // Another evaluation has the device: not this job's time. No flock here: no lock.
  bool out = false;
  const bool took =
      TryUntil(wait_s, std::chrono::microseconds(100), std::chrono::microseconds(2000), &out,
               [&] { return TryFlock(fd, op); });
  if (out) {
    waited_out_ = true;
    waited_out_s_ = wait_s;
  }
  return took;
}

void DeviceLock::Shared() {
  Turn(LOCK_SH, wait_s_);
}

void DeviceLock::Exclusive(double wait_s) {
  Turn(LOCK_EX, wait_s >= 0 ? wait_s : wait_s_);
}

void DeviceLock::Turn(int op, double wait_s) {
  if (fd_ < 0 || held_ == op) return;
  Release();
  // Through the turn file: a shared taker waits behind an exclusive one already waiting there
  // (which holds it exclusive until it has the device).
  if (Take(turn_, op, wait_s)) {
    if (Take(fd_, op, wait_s)) held_ = op;
    flock(turn_, LOCK_UN);
  }
}

void DeviceLock::Release() {
  if (held_) flock(fd_, LOCK_UN);
  held_ = 0;
}

std::string DeviceLock::Note() const {
  if (!waited_out_) return std::string();
  return "another evaluation kept the device longer than " + FormatNumber(waited_out_s_) + " s" +
         (waited_out_s_ == wait_s_ ? " (eval.timing_lock_wait_s)" : "") +
         "; a phase went on without its turn and may have overlapped it";
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

std::string DeviceMemoryPath(const std::string& golden_cache_dir, const std::string& backend,
                             int device_index) {
  const std::string lock = DeviceLockPath(golden_cache_dir, backend, device_index);
  return lock.empty() ? lock : lock.substr(0, lock.size() - 5) + ".memory";
}

namespace {
// The ledger's own lock, held while the reservations are read and one is taken.
struct LedgerLock {
  explicit LedgerLock(const std::string& path) : fd(OpenLockFile(path)) {
    if (fd >= 0)
      while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~LedgerLock() {
    if (fd >= 0) close(fd);
  }
  int fd;
};
std::atomic<uint64_t> g_reservations{0};
}  // namespace

uint64_t MemoryReservation::LiveBytes() const {
  uint64_t sum = 0;
  DIR* d = opendir(dir_.c_str());
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string f = dir_ + "/" + e->d_name;
    int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {  // nobody holds it: its job ended or died
      unlink(f.c_str());
    } else {
      char buf[32] = {};
      ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
      if (n > 0) sum += std::strtoull(buf, nullptr, 10);
    }
    close(fd);
  }
  closedir(d);
  return sum;
}

MemoryReservation::MemoryReservation(const std::string& path, uint64_t bytes, uint64_t limit,
                                     double wait_s)
    : wait_s_(std::max(0.0, wait_s)), bytes_(bytes), limit_(limit) {
  if (path.empty() || bytes == 0) return;
  dir_ = path + ".d";
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) (void)MakeDirs(path.substr(0, slash), 0755);
  if (mkdir(dir_.c_str(), 0777) == 0) {
    chmod(dir_.c_str(), 01777);  // jobs of other users (sandbox users) add their files too
  } else if (errno != EEXIST) {
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  // Another evaluation holds the memory: not this job's time.
  TryUntil(wait_s_, std::chrono::milliseconds(50), std::chrono::milliseconds(500), &waited_out_,
           [&] {
             LedgerLock ledger(path);
             if (ledger.fd < 0) return Try::kNever;  // no lock here: no reservation
             const uint64_t others = LiveBytes();
             others_ = std::max(others_, others);  // the most the others held at a look
             if (others != 0 && others + bytes > limit) return Try::kAgain;
             fd_ = Claim();
             return fd_ >= 0 ? Try::kDone : Try::kNever;
           });
  waited_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int MemoryReservation::Claim() {
  // A name of its own: pids repeat across the sandboxes' pid namespaces, so the name also carries
  // the clock and a counter, and O_EXCL refuses one that is taken.
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 16; ++attempt) {
    file_ = dir_ + "/" + std::to_string(getpid()) + "-" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "-" +
            std::to_string(++g_reservations);
    fd = open(file_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return -1;
  }
  if (fd < 0) return -1;
  const std::string text = std::to_string(bytes_) + "\n";
  if (flock(fd, LOCK_EX | LOCK_NB) != 0 ||
      write(fd, text.data(), text.size()) != ssize_t(text.size())) {
    close(fd);
    unlink(file_.c_str());
    return -1;
  }
  return fd;
}

MemoryReservation::~MemoryReservation() {
  if (fd_ < 0) return;
  if (!handed_over_) unlink(file_.c_str());
  close(fd_);
}

std::string MemoryReservation::Note() const {
  if (waited_out_)
    return "other evaluations kept " + FormatGiB(double(others_)) +
           " GiB of the device's memory reserved for " + "longer than " + FormatNumber(wait_s_) +
           " s (eval.device_memory_wait_s)";
  if (waited_s_ < 0.5) return std::string();
  return "waited " + FormatNumber(std::round(waited_s_ * 10) / 10) +
         " s for device memory other evaluations had reserved (" + FormatGiB(double(others_)) +
         " GiB; this job " + FormatGiB(double(bytes_)) + " GiB, together at most " +
         FormatGiB(double(limit_)) + " GiB)";
}

}  // namespace htam
