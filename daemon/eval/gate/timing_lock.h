// The host-wide timing lock: keeps the background torch.compile measurement of KernelBench tasks
// (kb_helper.py baseline --compile-only) from timing on a device while a candidate is timed there.
// The file is timing.lock in the root of the KernelBench golden cache; flock(2) on it. Verifiers
// take it shared around every timed phase (shared holders never wait for each other); the
// background measurement takes it exclusive around its own timing repetitions only.
// Thread-safety: a SharedTimingLock is used by one thread. Its descriptor is close-on-exec and
// lives only while held, so no runner or other child process ever holds the lock.
#pragma once

#include <cstdint>
#include <string>

namespace htam {

// <golden_cache_dir>/timing.lock; "" for an empty directory (no lock).
std::string TimingLockPath(const std::string& golden_cache_dir);

// One device's turns between the evaluations of a host (htamd's lanes, eval.device_workers, and
// any other process that shares its cache directory): work on the device that is not timed
// (verification, preparing inputs, golden data) holds it shared, so that evaluations overlap
// there; a timed phase holds it exclusive, so that nothing else runs on the device while a
// candidate or a baseline is timed. The file is <golden cache root>/device-<backend>-<index>.lock,
// with a ".turn" sibling that a waiting exclusive taker holds, so that shared takers arriving
// after it wait behind it (a stream of overlapping shared holders cannot starve the timing).
// Waits are bounded (`wait_s`); past the bound the caller goes on without the lock and Note()
// says so. Thread-safety: used by one thread; descriptors are close-on-exec (no runner holds it).
std::string DeviceLockPath(const std::string& golden_cache_dir, const std::string& backend,
                           int device_index);

class DeviceLock {
 public:
  // "" path: no lock (every call returns at once).
  DeviceLock(const std::string& path, double wait_s);
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

  void Shared();  // from exclusive: released first, then taken shared
  // From shared: released first (never upgraded in place). `wait_s` >= 0 bounds this wait
  // instead of the constructor's (a turn whose result stays, such as a task's eager baseline,
  // may wait longer than a candidate's timing).
  void Exclusive(double wait_s = -1);
  void Release();
  // "" unless a wait passed its bound; else a sentence for the result's diagnostics.
  std::string Note() const;

 private:
  void Turn(int op, double wait_s);          // LOCK_SH or LOCK_EX through the turn file
  bool Take(int fd, int op, double wait_s);  // polls flock(op | LOCK_NB) until the bound
  int fd_ = -1, turn_ = -1;
  int held_ = 0;  // 0, LOCK_SH or LOCK_EX
  double wait_s_ = 0;
  double waited_out_s_ = 0;  // the bound of the wait that passed it (Note)
  bool waited_out_ = false;
};

class SharedTimingLock {
 public:
  // Takes `path` shared, waiting at most `wait_s` seconds while an exclusive holder keeps it. No
  // lock, and no wait, where the file cannot be opened (empty path, missing directory, read-only
  // directory without the file) or flock fails: timing then goes on without it.
  SharedTimingLock(const std::string& path, double wait_s);
  ~SharedTimingLock();  // releases
  SharedTimingLock(const SharedTimingLock&) = delete;
  SharedTimingLock& operator=(const SharedTimingLock&) = delete;

  bool held() const { return fd_ >= 0; }
  // The wait passed its bound: the timing that follows may overlap the background measurement.
  bool waited_out() const { return waited_out_; }
  // "" unless waited_out(); else a sentence for the result's diagnostics.
  std::string Note() const;

 private:
  int fd_ = -1;
  bool waited_out_ = false;
  double wait_s_ = 0;
};

// The device's memory between the evaluations of a host that share a cache directory (htamd's
// lanes, concurrent htam-eval processes): before a job makes its tensors it reserves what it
// estimated it needs, and it waits while the reservations of the other live jobs and its own
// would pass `limit` (a share of the device's memory). Without it every job checks the free
// memory when it starts, finds it free, and several then run the device out of memory together:
// a verdict of Crash ("CUDA out of memory") that no candidate earned, and a cuDNN baseline timed
// with no room for its workspace. The reservations are files under <path>.d/, each holding its
// byte count and flocked by its holder for its life: a holder that died (kill -9 included) holds
// no lock, and its file is removed by the next job that reads them; <path> itself serializes the
// reading and the taking (names carry pid, clock and a counter: pids repeat across the sandboxes'
// pid namespaces). Thread-safety: one object per job; descriptors are close-on-exec.
class MemoryReservation {
 public:
  // Reserves `bytes` under `path` ("" = no reservation: returns at once, held() false), waiting
  // at most `wait_s` while the live reservations and `bytes` together pass `limit`; a job that
  // alone passes it is admitted once no other holds any (the caller refuses what can never fit).
  MemoryReservation(const std::string& path, uint64_t bytes, uint64_t limit, double wait_s);
  ~MemoryReservation();  // releases
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;

  bool held() const { return fd_ >= 0; }
  // The reservation's descriptor (its flock): a process that inherits it holds the reservation
  // until it ends (a job's background torch.compile measurement); -1 when not held.
  int fd() const { return fd_; }
  // Another process now holds it too (fd()): on release its file stays, and the next job that
  // reads the ledger removes it once that process ended.
  void HandOver() { handed_over_ = true; }
  bool waited_out() const { return waited_out_; }
  double waited_s() const { return waited_s_; }
  uint64_t others_bytes() const { return others_; }  // the most the others held at a look
  // What the wait was, for the result's diagnostics; "" when there was none.
  std::string Note() const;

 private:
  // The live reservations' bytes under the ledger's lock; removes the dead ones' files.
  uint64_t LiveBytes() const;
  int Claim();  // creates, flocks and fills this job's file under the ledger's lock; -1 = failed
  std::string dir_, file_;
  int fd_ = -1;
  bool waited_out_ = false, handed_over_ = false;
  double waited_s_ = 0, wait_s_ = 0;
  uint64_t bytes_ = 0, others_ = 0, limit_ = 0;
};

// <golden cache root>/device-<backend>-<index>.memory; "" as DeviceLockPath.
std::string DeviceMemoryPath(const std::string& golden_cache_dir, const std::string& backend,
                             int device_index);

}  // namespace htam
