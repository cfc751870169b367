// A memory cgroup of one sandboxed worker: bounds the host memory of the worker and everything it
// starts (its runner, the candidate), where RLIMIT_AS cannot (GPU drivers reserve huge address
// ranges). cgroup v2 (memory.max, memory.swap.max) first, else the v1 memory controller
// (memory.limit_in_bytes, memory.memsw.limit_in_bytes).
// Thread-safety: FindMemoryCgroupParent is safe to call from any thread; a MemoryCgroup is owned
// by one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace htam::eval {

// Where this process may create child memory cgroups: the directory of its own cgroup in the
// unified (v2) hierarchy with `memory` enabled for children, else in the v1 memory hierarchy.
// Proven by creating and removing a probe child; empty cgroups of dead daemons (killed before they
// removed theirs) are removed there. The error says why none is usable.
struct CgroupParent {
  std::string dir;
  bool v2 = false;
};
Result<CgroupParent> FindMemoryCgroupParent();

class MemoryCgroup {
 public:
  // Creates `parent.dir/name` with a hard limit of `limit_bytes` (no swap beyond it where the
  // host says so) and opens its cgroup.procs for AddSelf.
  static Result<std::unique_ptr<MemoryCgroup>> Create(const CgroupParent& parent,
                                                      const std::string& name,
                                                      uint64_t limit_bytes);
  ~MemoryCgroup();  // removes the cgroup (its processes must have been reaped)

  // Moves `pid` (a process of ours) into the cgroup.
  Status AddProcess(pid_t pid);
  // Async-signal-safe: moves the calling process in (for a child between fork and exec).
  bool AddSelf() const;
  // OOM kills inside the cgroup so far (v2 memory.events oom_kill; v1 memory.oom_control
  // oom_kill, else memory.failcnt on kernels that do not count kills).
  uint64_t OomKills() const;
  uint64_t limit_bytes() const { return limit_; }
  const std::string& path() const { return path_; }

 private:
  MemoryCgroup() = default;
  std::string path_;
  bool v2_ = false;
  uint64_t limit_ = 0;
  int procs_fd_ = -1;
};

}  // namespace htam::eval
