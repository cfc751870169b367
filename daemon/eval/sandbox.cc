// Sandboxed worker processes; see sandbox.h.
#include "daemon/eval/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>

namespace htam::eval {
namespace {

struct MountEntry {
  std::string path;
  unsigned long flags;  // MS_NOSUID ... to keep on remount
};

// Mounts that are made read-only in the worker's mount namespace: every mount but kernel
// pseudo-filesystems and device trees (GPU device nodes stay usable).
std::vector<MountEntry> ReadMounts() {
  std::vector<MountEntry> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, devno, root, mp, opts;
    ls >> id >> parent >> devno >> root >> mp >> opts;
    if (mp.rfind("/proc", 0) == 0 || mp.rfind("/sys", 0) == 0 || mp.rfind("/dev", 0) == 0 ||
        mp.rfind("/run", 0) == 0)
      continue;
    if (mp.find('\\') != std::string::npos) continue;  // escaped names: skip
    unsigned long f = 0;
    std::istringstream os(opts);
    std::string o;
    while (std::getline(os, o, ',')) {
      if (o == "nosuid")
        f |= MS_NOSUID;
      else if (o == "nodev")
        f |= MS_NODEV;
      else if (o == "noexec")
        f |= MS_NOEXEC;
      else if (o == "noatime")
        f |= MS_NOATIME;
      else if (o == "nodiratime")
        f |= MS_NODIRATIME;
      else if (o == "relatime")
        f |= MS_RELATIME;
    }
    out.push_back({mp, f});
  }
  return out;
}

void SetLimit(int resource, uint64_t value) {
  if (!value) return;
  struct rlimit r;
  r.rlim_cur = r.rlim_max = value;
  setrlimit(resource, &r);
}

// async-signal-safe message to fd 2
void Say(const char* m) {
  ssize_t ignored = write(2, m, strlen(m));
  (void)ignored;
}

}  // namespace

std::string DescribeWaitStatus(int st) {
  if (WIFEXITED(st)) return "exit code " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    int s = WTERMSIG(st);
    const char* d = strsignal(s);
    return std::string(sigabbrev_np(s) ? "SIG" + std::string(sigabbrev_np(s))
                                       : "signal " + std::to_string(s)) +
           " (" + (d ? d : "?") + ")";
  }
  return "status " + std::to_string(st);
}

ProcessEnd ClassifyProcessEnd(int st, const std::string& who, const std::string& context,
                              const std::string& memory_detail) {
  const int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  if (sig == SIGXCPU) return {fb::OutcomeStatus::Timeout, "CPU time limit exceeded" + context};
  if (sig == SIGXFSZ)
    return {fb::OutcomeStatus::ResourceLimit, "file size limit exceeded" + context};
  if (sig == SIGKILL)
    return {fb::OutcomeStatus::ResourceLimit, "killed (out of memory?)" + context};
  if (WIFEXITED(st) && WEXITSTATUS(st) == kExitResourceLimit)
    return {fb::OutcomeStatus::ResourceLimit, "memory limit reached" + memory_detail + context};
  return {fb::OutcomeStatus::Crash, who + " died (" + DescribeWaitStatus(st) + ")" + context +
                                        (WIFEXITED(st) ? ": the candidate ended the process" : "")};
}

void RemoveTree(const std::string& path) {
  if (path.empty()) return;
  nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p) == 0 ? 0 : 0; },
      16, FTW_DEPTH | FTW_PHYS);
}

namespace {

// Processes the current user has now (RLIMIT_NPROC counts every process of the user).
uint64_t ProcessesOfThisUser() {
  uint64_t mine = 0;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      struct stat st;
      if (stat((std::string("/proc/") + e->d_name).c_str(), &st) == 0 && st.st_uid == getuid())
        ++mine;
    }
    closedir(d);
  }
  return mine;
}

// Everything the child of Spawn needs, prepared before fork: after it, the child makes only
// async-signal-safe calls.
struct ChildPlan {
  const SandboxOptions* o = nullptr;
  bool root = false;
  bool drop = false;  // switch to uid/gid before exec
  uid_t uid = 0;
  gid_t gid = 0;
  uint64_t nproc_limit = 0;
  std::vector<char*> args, envp;
  bool try_mounts = false;
  std::vector<std::string> binds;  // stay writable under a read-only root
  std::vector<MountEntry> mounts;  // remounted read-only
  std::string temp;                // the worker's private temporary directory, its cwd
  const MemoryCgroup* cgroup = nullptr;
  int sock = -1, out = -1;  // the protocol socket (fd 3) and the output pipe (fds 1, 2)
};

// The child's file descriptors: stdin /dev/null, stdout and stderr the output pipe, fd 3 the
// protocol socket, nothing else; default signal handling.
void SetUpChildFds(const ChildPlan& p) {
  int s = fcntl(p.sock, F_DUPFD, 100);
  int out = fcntl(p.out, F_DUPFD, 100);
  int nul = open("/dev/null", O_RDONLY);
  dup2(nul, 0);
  dup2(out, 1);
  dup2(out, 2);
  dup2(s, 3);
  syscall(SYS_close_range, 4u, ~0u, 0u);
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// A network namespace of its own, and a mount namespace where the root is read-only but for the
// binds. Returns whether the mount namespace was made.
bool EnterNamespaces(const ChildPlan& p) {
  if (p.o->isolate_network) {
    if (unshare(CLONE_NEWNET) != 0 && !p.root) unshare(CLONE_NEWUSER | CLONE_NEWNET);
  }
  if (!p.try_mounts || unshare(CLONE_NEWNS) != 0 ||
      mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return false;
  for (const auto& b : p.binds) mount(b.c_str(), b.c_str(), nullptr, MS_BIND | MS_REC, nullptr);
  for (const auto& m : p.mounts)
    mount(nullptr, m.path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | m.flags, nullptr);
  return true;
}

void SetChildLimits(const ChildPlan& p) {
  const SandboxOptions& o = *p.o;
  SetLimit(RLIMIT_AS, o.memory_bytes);
  SetLimit(RLIMIT_CPU, o.cpu_seconds);
  if (o.defer_drop && o.file_bytes) {
    // The worker's runner keeps this as its hard limit; the verifier lifts its own soft one
    // (its shared buffers are memfd files), so the hard limit stays open here.
    struct rlimit fs {
      o.file_bytes, RLIM_INFINITY
    };
    setrlimit(RLIMIT_FSIZE, &fs);
  } else {
    SetLimit(RLIMIT_FSIZE, o.file_bytes);
  }
  SetLimit(RLIMIT_NPROC, p.nproc_limit);
  SetLimit(RLIMIT_CORE, 0);
  struct rlimit zero {
    0, 0
  };
  setrlimit(RLIMIT_CORE, &zero);
}

// In a new PID namespace, this process forks the worker as the namespace's init and only mirrors
// how it ended (so the Evaluator can classify it); the worker returns from here with a /proc of
// its own.
void BecomePidNamespaceInit() {
  pid_t init = fork();
  if (init > 0) {
    int st = 0;
    while (waitpid(init, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(st)) {
      signal(WTERMSIG(st), SIG_DFL);
      kill(getpid(), WTERMSIG(st));
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 125);
  }
  if (init < 0) _exit(125);
  // The worker is this namespace's init; a /proc of its own (still as root, before the drop).
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    Say("htam-eval-worker sandbox: cannot mount a /proc of the PID namespace (GPU runtimes "
        "may not start; eval.sandbox_pid_namespace = false runs workers without one)\n");
}

// The child of Spawn, from fork to exec: async-signal-safe calls only.
[[noreturn]] void RunSandboxedChild(const ChildPlan& p) {
  setpgid(0, 0);
  // Into the memory cgroup first: everything the worker starts inherits it.
  if (p.cgroup && !p.cgroup->AddSelf()) {
    Say("htam-eval-worker sandbox: cannot join the worker's memory cgroup\n");
    _exit(126);
  }
  SetUpChildFds(p);
  const bool own_mounts = EnterNamespaces(p);
  // A PID namespace: when the worker (its init) dies, the kernel kills every process the
  // candidate started, however it detached (setsid, double fork); nothing outlives the job.
  // Only with a mount namespace of its own, where the worker gets a /proc of its PID
  // namespace: the CUDA runtime reads /proc for its own PID and fails to start
  // (cudaErrorOperatingSystem) when /proc belongs to the parent namespace.
  const bool pidns = p.o->pid_namespace && p.root && own_mounts && unshare(CLONE_NEWPID) == 0;
  SetChildLimits(p);
  if (pidns) BecomePidNamespaceInit();
  if (p.drop) {
    if (setgroups(0, nullptr) != 0 || setgid(p.gid) != 0 || setuid(p.uid) != 0) {
      Say("htam-eval-worker sandbox: cannot drop privileges\n");
      _exit(126);
    }
  }
  if (chdir(p.temp.c_str()) != 0) {
    Say("htam-eval-worker sandbox: cannot enter temp dir (every parent of eval.scratch_dir "
        "must be searchable by eval.sandbox_user)\n");
    _exit(126);
  }
  execve(p.args[0], p.args.data(), p.envp.data());
  Say("htam-eval-worker sandbox: exec failed: ");
  Say(p.args[0]);
  Say("\n");
  _exit(127);
}

}  // namespace

Result<std::unique_ptr<WorkerProcess>> WorkerProcess::Spawn(const std::vector<std::string>& argv,
                                                            const SandboxOptions& o) {
  std::unique_ptr<WorkerProcess> w(new WorkerProcess);
  std::string tmpl =
      (o.scratch_dir.empty() ? std::string("/tmp") : o.scratch_dir) + "/htam-worker-XXXXXX";
  std::vector<char> tbuf(tmpl.begin(), tmpl.end());
  tbuf.push_back('\0');
  if (!mkdtemp(tbuf.data()))
    return Status::IOError("creating worker temp dir under " + o.scratch_dir + ": " +
                           strerror(errno));
  w->temp_dir_ = tbuf.data();

  ChildPlan plan;
  plan.o = &o;
  plan.root = geteuid() == 0;
  plan.nproc_limit = o.max_processes;
  // RLIMIT_NPROC counts every process of the user: leave room for the ones it already has.
  if (!plan.root && plan.nproc_limit) plan.nproc_limit += ProcessesOfThisUser();
  if (plan.root && !o.user.empty()) {
    if (struct passwd* pw = getpwnam(o.user.c_str())) {
      plan.uid = pw->pw_uid;
      plan.gid = pw->pw_gid;
      plan.drop = true;
      if (chown(w->temp_dir_.c_str(), plan.uid, plan.gid) != 0)
        return Status::IOError("chown of worker temp dir: " + std::string(strerror(errno)));
    }
  }
  // The environment: a fixed minimum, the private temporary directory, and eval.sandbox_env_keep.
  std::vector<std::string> env_store{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w->temp_dir_,
                                     "TMPDIR=" + w->temp_dir_, "LANG=C.UTF-8", "LC_ALL=C.UTF-8"};
  for (const auto& name : o.env_keep)
    if (const char* v = getenv(name.c_str())) env_store.push_back(name + "=" + v);
  for (auto& e : env_store) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);
  std::vector<std::string> argv_store = argv;
  if (plan.drop && o.defer_drop) {
    // The worker drops privileges itself, after starting its runner.
    argv_store.insert(argv_store.end(), {"--drop-uid", std::to_string(plan.uid), "--drop-gid",
                                         std::to_string(plan.gid)});
    plan.drop = false;
  }
  for (auto& a : argv_store) plan.args.push_back(a.data());
  plan.args.push_back(nullptr);
  plan.binds = {w->temp_dir_};
  for (const auto& d : o.writable_dirs) plan.binds.push_back(d);
  plan.try_mounts = o.readonly_fs && plan.root;
  if (plan.try_mounts) plan.mounts = ReadMounts();
  plan.temp = w->temp_dir_;
  if (o.cgroup_parent && o.host_memory_bytes) {
    static std::atomic<uint64_t> seq{0};
    auto g = MemoryCgroup::Create(*o.cgroup_parent,
                                  "htamd-" + std::to_string(getpid()) + "-w" +
                                      std::to_string(seq.fetch_add(1)),
                                  o.host_memory_bytes);
    if (!g.ok())
      return Status::Unavailable("worker memory cgroup: " + g.status().message());
    w->cgroup_ = std::move(*g);
  }
  plan.cgroup = w->cgroup_.get();

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Status::IOError(std::string("socketpair: ") + strerror(errno));
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    close(sv[0]);
    close(sv[1]);
    return Status::IOError(std::string("pipe: ") + strerror(errno));
  }
  plan.sock = sv[1];
  plan.out = pfd[1];
  pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    close(pfd[0]);
    close(pfd[1]);
    return Status::ResourceExhausted(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) RunSandboxedChild(plan);
  close(sv[1]);
  close(pfd[1]);
  w->pid_ = pid;
  w->sock_ = sv[0];
  w->out_fd_ = pfd[0];
  fcntl(w->sock_, F_SETFL, fcntl(w->sock_, F_GETFL) | O_NONBLOCK);
  fcntl(w->out_fd_, F_SETFL, fcntl(w->out_fd_, F_GETFL) | O_NONBLOCK);
  return w;
}

WorkerProcess::~WorkerProcess() {
  Kill();
  if (sock_ >= 0) close(sock_);
  if (out_fd_ >= 0) close(out_fd_);
  RemoveTree(temp_dir_);
}

Status WorkerProcess::Send(const nlohmann::json& frame) {
  // The socket is non-blocking for reads; WriteFrame retries EAGAIN.
  return WriteFrame(sock_, frame);
}

Status WorkerProcess::SendBuffer(const std::string& buffer) {
  return WriteBufferFrame(sock_, buffer);
}

void WorkerProcess::DrainOutput(size_t cap) {
  if (out_fd_ < 0) return;
  char buf[65536];
  for (;;) {
    ssize_t r = read(out_fd_, buf, sizeof buf);
    if (r > 0) {
      output_total_ += uint64_t(r);
      if (output_.size() < cap) output_.append(buf, std::min(size_t(r), cap - output_.size()));
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {  // writer closed
      close(out_fd_);
      out_fd_ = -1;
    }
    return;
  }
}

Result<nlohmann::json> WorkerProcess::Receive(std::chrono::steady_clock::time_point deadline,
                                              size_t capture_cap, size_t flood_limit) {
  for (;;) {
    nlohmann::json frame;
    Status err;
    if (reader_.Next(&frame, &err)) return frame;
    if (!err.ok()) return err;
    if (reader_.eof()) return Status::NotFound("worker closed its socket");
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return Status::Timeout("deadline");
    int ms = int(std::min<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1, 1000));
    pollfd p[2] = {{sock_, POLLIN, 0}, {out_fd_, POLLIN, 0}};
    int n = poll(p, out_fd_ >= 0 ? 2 : 1, ms);
    if (n < 0 && errno != EINTR) return Status::IOError(std::string("poll: ") + strerror(errno));
    if (out_fd_ >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
      DrainOutput(capture_cap);
      if (flood_limit && output_total_ > flood_limit)
        return Status::ResourceExhausted("output flood");
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) reader_.Feed(sock_);
  }
}

int WorkerProcess::Kill() {
  if (pid_ > 0 && !reaped_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    int st = 0;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    wait_status_ = st;
  } else if (pid_ > 0) {
    kill(-pid_, SIGKILL);  // stragglers of the group
  }
  return wait_status_;
}

int WorkerProcess::Reap(std::chrono::milliseconds timeout) {
  if (reaped_) return wait_status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      wait_status_ = st;
      kill(-pid_, SIGKILL);
      DrainOutput(1 << 20);
      return st;
    }
    if (std::chrono::steady_clock::now() >= deadline) return Kill();
    usleep(2000);
  }
}

}  // namespace htam::eval
