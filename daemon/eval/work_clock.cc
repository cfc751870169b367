// WorkClock: stage and job limits that count a job's own work (work_clock.h).
#include "daemon/eval/work_clock.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace htam::eval {
namespace {

std::vector<pid_t> ListInts(const std::string& dir) {
  std::vector<pid_t> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long v = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && v > 0) out.push_back(pid_t(v));
  }
  closedir(d);
  return out;
}

bool ReadSchedstat(pid_t pid, pid_t tid, uint64_t* run_ns, uint64_t* wait_ns) {
  char path[96];
  std::snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", int(pid), int(tid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  unsigned long long run = 0, wait = 0;
  int got = std::fscanf(f, "%llu %llu", &run, &wait);
  std::fclose(f);
  if (got != 2) return false;
  *run_ns = run;
  *wait_ns = wait;
  return true;
}

}  // namespace

WorkClock::WorkClock(pid_t root, int cores) : root_(root), cores_(cores), last_(Clock::now()) {
  if (cores_ <= 0) cores_ = std::max(1, int(sysconf(_SC_NPROCESSORS_ONLN)));
  Sample();
}

void WorkClock::Sample() {
  const Clock::time_point now = Clock::now();
  const double wall = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  // Every thread of the tree: its CPU time and run-queue delay since the last sample.
  std::vector<pid_t> procs{root_};
  std::map<pid_t, ThreadTimes> current;
  uint64_t tree_run = 0, tree_wait = 0, busiest_run = 0;
  for (size_t i = 0; i < procs.size() && i < 4096; ++i) {
    const pid_t p = procs[i];
    for (pid_t t : ListInts("/proc/" + std::to_string(p) + "/task")) {
      ThreadTimes now_t;
      if (!ReadSchedstat(p, t, &now_t.run_ns, &now_t.wait_ns)) continue;
      current[t] = now_t;
      auto before = seen_.find(t);
      const ThreadTimes prev = before == seen_.end() ? ThreadTimes{} : before->second;
      // A thread first seen now: only what it did since the last sample can be told apart, and
      // that is unknown; its totals so far are counted from its start, bounded by the interval.
      uint64_t run = now_t.run_ns >= prev.run_ns ? now_t.run_ns - prev.run_ns : 0;
      uint64_t wait = now_t.wait_ns >= prev.wait_ns ? now_t.wait_ns - prev.wait_ns : 0;
      const uint64_t cap = uint64_t(wall * 1e9);
      run = std::min(run, cap);
      wait = std::min(wait, cap);
      tree_run += run;
      tree_wait += wait;
      busiest_run = std::max(busiest_run, run);
      std::ifstream in("/proc/" + std::to_string(p) + "/task/" + std::to_string(t) + "/children");
      pid_t c = 0;
      while (in >> c) procs.push_back(c);
    }
  }
  seen_ = std::move(current);
  if (wall <= 0 || waiting_) return;  // a declared wait already excludes this interval
  // The tree alone kept the host's cores busy: its run-queue delay is of its own making.
  if (double(tree_run) * 1e-9 >= 0.9 * wall * cores_) return;
  // Work handed between processes (verifier and runner) waits on the run queue in turns: the
  // delays add up. Threads that wait side by side would count twice: the interval keeps at
  // least the CPU time of its busiest thread (the work on its critical path).
  cpu_waits_s_ += std::max(0.0, std::min(double(tree_wait) * 1e-9,
                                         wall - double(busiest_run) * 1e-9));
}

void WorkClock::BeginWait() {
  if (waiting_) return;
  Sample();
  waiting_ = true;
  wait_start_ = Clock::now();
}

void WorkClock::EndWait() {
  if (!waiting_) return;
  declared_s_ += std::chrono::duration<double>(Clock::now() - wait_start_).count();
  waiting_ = false;
  last_ = Clock::now();
}

double WorkClock::ExcludedSeconds() const {
  double open = waiting_ ? std::chrono::duration<double>(Clock::now() - wait_start_).count() : 0;
  return cpu_waits_s_ + declared_s_ + open;
}

WorkClock::Clock::time_point WorkClock::Deadline(Clock::time_point start,
                                                 std::chrono::seconds limit,
                                                 double excluded_at_start,
                                                 double wall_factor) const {
  const double moved = std::max(0.0, ExcludedSeconds() - excluded_at_start);
  const double bound = double(limit.count()) * std::max(1.0, wall_factor);
  const double total = std::min(double(limit.count()) + moved, bound);
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(total));
}

}  // namespace htam::eval
