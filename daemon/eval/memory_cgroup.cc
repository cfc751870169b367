// Memory cgroups of sandboxed workers; see memory_cgroup.h.
#include "daemon/eval/memory_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/file.h"

namespace htam::eval {
namespace {

Status WriteFile(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("open " + path + ": " + strerror(errno));
  ssize_t n = write(fd, value.data(), value.size());
  int err = errno;
  close(fd);
  if (n != ssize_t(value.size())) return Status::IOError("write " + path + ": " + strerror(err));
  return Status::OK();
}

// "key value" lines (memory.events, memory.oom_control): the value of `key`, or -1.
int64_t KeyedValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  int64_t v;
  while (in >> k >> v)
    if (k == key) return v;
  return -1;
}

// This process's cgroup path in the hierarchy whose controller list matches `want`
// ("" = the unified one, "0::").
std::string OwnCgroup(bool v2) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (v2 && line.compare(0, 3, "0::") == 0) return path;
    if (!v2) {
      std::istringstream cs(ctl);
      std::string c;
      while (std::getline(cs, c, ','))
        if (c == "memory") return path;
    }
  }
  return "";
}

// Creates a probe child with a limit, moves a short-lived process into it, removes it.
Status Probe(const CgroupParent& p) {
  auto g = MemoryCgroup::Create(p, "htam-probe-" + std::to_string(getpid()), 64ull << 20);
  if (!g.ok()) return g.status();
  pid_t pid = fork();
  if (pid < 0) return Status::ResourceExhausted(std::string("fork: ") + strerror(errno));
  if (pid == 0) _exit((*g)->AddSelf() ? 0 : 1);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return Status::PermissionDenied("cannot move a process into " + (*g)->path());
  return Status::OK();
}

// Cgroups of daemons that died without removing them (killed): empty ones go, so that they do not
// pile up under the parent.
void RemoveStale(const std::string& parent) {
  DIR* d = opendir(parent.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    pid_t pid = 0;
    if (std::sscanf(e->d_name, "htamd-%d-w", &pid) != 1 || pid <= 0) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) rmdir((parent + "/" + e->d_name).c_str());
  }
  closedir(d);
}

}  // namespace

Result<CgroupParent> FindMemoryCgroupParent() {
  std::string why;
  struct stat st;
  if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0) {
    CgroupParent p{"/sys/fs/cgroup" + OwnCgroup(true), true};
    if (p.dir.back() == '/') p.dir.pop_back();
    // A v2 cgroup with processes may not have controllers enabled for children (no internal
    // processes rule), unless it is the root: try, and let the probe decide.
    if (ReadFileOrEmpty(p.dir + "/cgroup.subtree_control").find("memory") == std::string::npos)
      (void)WriteFile(p.dir + "/cgroup.subtree_control", "+memory");
    Status s = Probe(p);
    if (s.ok()) {
      RemoveStale(p.dir);
      return p;
    }
    why = "cgroup v2 at " + p.dir + ": " + s.message();
  } else if (stat("/sys/fs/cgroup/memory/memory.limit_in_bytes", &st) == 0) {
    std::string own = OwnCgroup(false);
    CgroupParent p{"/sys/fs/cgroup/memory" + own, false};
    if (p.dir.back() == '/') p.dir.pop_back();
    Status s = own.empty() ? Status::NotFound("no memory line in /proc/self/cgroup") : Probe(p);
    if (s.ok()) {
      RemoveStale(p.dir);
      return p;
    }
    why = "cgroup v1 at " + p.dir + ": " + s.message();
  } else {
    why = "no cgroup v2 hierarchy and no v1 memory controller under /sys/fs/cgroup";
  }
  return Status::Unavailable(why);
}

Result<std::unique_ptr<MemoryCgroup>> MemoryCgroup::Create(const CgroupParent& parent,
                                                           const std::string& name,
                                                           uint64_t limit_bytes) {
  std::unique_ptr<MemoryCgroup> g(new MemoryCgroup);
  g->path_ = parent.dir + "/" + name;
  g->v2_ = parent.v2;
  g->limit_ = limit_bytes;
  if (mkdir(g->path_.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::PermissionDenied("mkdir " + g->path_ + ": " + strerror(errno));
  const std::string limit = std::to_string(limit_bytes);
  if (g->v2_) {
    Status s = WriteFile(g->path_ + "/memory.max", limit);
    if (!s.ok()) return s;  // the destructor removes the directory
    struct stat st;
    if (stat((g->path_ + "/memory.swap.max").c_str(), &st) == 0)
      (void)WriteFile(g->path_ + "/memory.swap.max", "0");
  } else {
    Status s = WriteFile(g->path_ + "/memory.limit_in_bytes", limit);
    if (!s.ok()) return s;
    // memsw (memory + swap) must not be below the memory limit; absent without swap accounting.
    (void)WriteFile(g->path_ + "/memory.memsw.limit_in_bytes", limit);
  }
  g->procs_fd_ = open((g->path_ + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (g->procs_fd_ < 0)
    return Status::PermissionDenied("open " + g->path_ + "/cgroup.procs: " + strerror(errno));
  return g;
}

MemoryCgroup::~MemoryCgroup() {
  if (procs_fd_ >= 0) close(procs_fd_);
  // Whatever a candidate left behind (detached from the worker's process group) is still in the
  // cgroup: kill it. The kernel frees a cgroup a moment after its last process is reaped.
  for (int i = 0; i < 100; ++i) {
    if (rmdir(path_.c_str()) == 0 || errno == ENOENT) return;
    if (errno != EBUSY) return;
    std::istringstream procs(ReadFileOrEmpty(path_ + "/cgroup.procs"));
    pid_t pid;
    while (procs >> pid)
      if (pid > 0) kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status MemoryCgroup::AddProcess(pid_t pid) {
  return WriteFile(path_ + "/cgroup.procs", std::to_string(pid));
}

bool MemoryCgroup::AddSelf() const {
  // "0" names the writing process, in v1 and v2 alike.
  return procs_fd_ >= 0 && write(procs_fd_, "0", 1) == 1;
}

uint64_t MemoryCgroup::OomKills() const {
  if (v2_) {
    int64_t v = KeyedValue(ReadFileOrEmpty(path_ + "/memory.events"), "oom_kill");
    return v > 0 ? uint64_t(v) : 0;
  }
  int64_t v = KeyedValue(ReadFileOrEmpty(path_ + "/memory.oom_control"), "oom_kill");
  if (v < 0) v = std::atoll(ReadFileOrEmpty(path_ + "/memory.failcnt").c_str());
  return v > 0 ? uint64_t(v) : 0;
}

}  // namespace htam::eval
