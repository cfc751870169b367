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

  const bool root = geteuid() == 0;
  uint64_t nproc_limit = o.max_processes;
  if (!root && nproc_limit) {
    // RLIMIT_NPROC counts every process of the user: leave room for the ones it already has.
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
    nproc_limit += mine;
  }
  uid_t uid = 0;
  gid_t gid = 0;
  bool drop = false;
  if (root && !o.user.empty()) {
    if (struct passwd* pw = getpwnam(o.user.c_str())) {
      uid = pw->pw_uid;
      gid = pw->pw_gid;
      drop = true;
      if (chown(w->temp_dir_.c_str(), uid, gid) != 0)
        return Status::IOError("chown of worker temp dir: " + std::string(strerror(errno)));
    }
  }
  // Everything the child needs, prepared before fork.
  std::vector<std::string> env_store{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w->temp_dir_,
                                     "TMPDIR=" + w->temp_dir_, "LANG=C.UTF-8", "LC_ALL=C.UTF-8"};
  for (const auto& name : o.env_keep)
    if (const char* v = getenv(name.c_str())) env_store.push_back(name + "=" + v);
  std::vector<char*> envp, args;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_store = argv;
  if (drop && o.defer_drop) {
    argv_store.insert(argv_store.end(), {"--drop-uid", std::to_string(uid), "--drop-gid",
                                         std::to_string(gid)});
    drop = false;
  }
  for (auto& a : argv_store) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<MountEntry> mounts;
  std::vector<std::string> binds{w->temp_dir_};
  for (const auto& d : o.writable_dirs) binds.push_back(d);
  const bool try_mounts = o.readonly_fs && root;
  if (try_mounts) mounts = ReadMounts();
  std::string temp = w->temp_dir_;
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
  const MemoryCgroup* cgroup = w->cgroup_.get();

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Status::IOError(std::string("socketpair: ") + strerror(errno));
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    close(sv[0]);
    close(sv[1]);
    return Status::IOError(std::string("pipe: ") + strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    close(pfd[0]);
    close(pfd[1]);
    return Status::ResourceExhausted(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    // ---- child: async-signal-safe calls only ----
    setpgid(0, 0);
    // Into the memory cgroup first: everything the worker starts inherits it.
    if (cgroup && !cgroup->AddSelf()) {
      Say("htam-eval-worker sandbox: cannot join the worker's memory cgroup\n");
      _exit(126);
    }
    int s = fcntl(sv[1], F_DUPFD, 100);
    int out = fcntl(pfd[1], F_DUPFD, 100);
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
    if (o.isolate_network) {
      if (unshare(CLONE_NEWNET) != 0 && !root) unshare(CLONE_NEWUSER | CLONE_NEWNET);
    }
    bool own_mounts = false;
    if (try_mounts && unshare(CLONE_NEWNS) == 0 &&
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) {
      own_mounts = true;
      for (const auto& b : binds) mount(b.c_str(), b.c_str(), nullptr, MS_BIND | MS_REC, nullptr);
      for (const auto& m : mounts)
        mount(nullptr, m.path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | m.flags,
              nullptr);
    }
    // A PID namespace: when the worker (its init) dies, the kernel kills every process the
    // candidate started, however it detached (setsid, double fork); nothing outlives the job.
    // Only with a mount namespace of its own, where the worker gets a /proc of its PID
    // namespace: the CUDA runtime reads /proc for its own PID and fails to start
    // (cudaErrorOperatingSystem) when /proc belongs to the parent namespace.
    const bool pidns = o.pid_namespace && root && own_mounts && unshare(CLONE_NEWPID) == 0;
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
    SetLimit(RLIMIT_NPROC, nproc_limit);
    SetLimit(RLIMIT_CORE, 0);
    struct rlimit zero {
      0, 0
    };
    setrlimit(RLIMIT_CORE, &zero);
    if (pidns) {
      pid_t init = fork();
      if (init > 0) {
        // This process only mirrors how the worker ended, so the Evaluator can classify it.
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
    if (drop) {
      if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
        Say("htam-eval-worker sandbox: cannot drop privileges\n");
        _exit(126);
      }
    }
    if (chdir(temp.c_str()) != 0) {
      Say("htam-eval-worker sandbox: cannot enter temp dir (every parent of eval.scratch_dir "
          "must be searchable by eval.sandbox_user)\n");
      _exit(126);
    }
    execve(args[0], args.data(), envp.data());
    Say("htam-eval-worker sandbox: exec failed: ");
    Say(args[0]);
    Say("\n");
    _exit(127);
  }
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
