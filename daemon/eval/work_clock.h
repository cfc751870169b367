// The time a job's own work has taken, for its stage and job limits: wall time less the time the
// job waited for what is not its own — a busy CPU (the run-queue delay of its process tree, read
// from /proc/<tid>/schedstat) and the waits its worker declares (a device turn, a lock). So a
// candidate's verdict does not depend on how many other evaluations share the host.
// Thread-safety: external synchronization required (one evaluator thread per job).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>

namespace htam::eval {

class WorkClock {
 public:
  using Clock = std::chrono::steady_clock;

  // `root`: the worker process; its descendants (runner, helpers) are found through
  // /proc/<pid>/task/<tid>/children at every Sample(). `cores`: CPUs the host has (0: asks).
  explicit WorkClock(pid_t root, int cores = 0);

  // Reads the tree's scheduler statistics: the run-queue delay of its threads since the last
  // sample counts as waiting (at most the interval less the CPU time of its busiest thread),
  // unless the tree alone kept (nearly) every core busy, in which case the delay is its own
  // doing. Cheap (a few /proc reads per thread).
  void Sample();
  // Declared waits (the worker's "waiting" progress frames): excluded while they last.
  void BeginWait();
  void EndWait();
  bool waiting() const { return waiting_; }

  // Seconds excluded so far (CPU waits and declared waits, an open one included).
  double ExcludedSeconds() const;
  // A wall deadline `limit` after `start`, moved later by what was excluded since
  // `excluded_at_start`, and never past start + limit * wall_factor (a bound for work that
  // waits without end: a candidate cannot stretch its limit without bound by making the host busy).
  Clock::time_point Deadline(Clock::time_point start, std::chrono::seconds limit,
                             double excluded_at_start, double wall_factor) const;

 private:
  struct ThreadTimes {
    uint64_t run_ns = 0, wait_ns = 0;
  };
  pid_t root_;
  int cores_;
  Clock::time_point last_;
  std::map<pid_t, ThreadTimes> seen_;  // tid -> last schedstat
  double cpu_waits_s_ = 0;
  double declared_s_ = 0;
  bool waiting_ = false;
  Clock::time_point wait_start_;
};

}  // namespace htam::eval
