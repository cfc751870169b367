// Child processes: fork + execvpe, output through a pipe, timeout by process group; background,
// channel, detached and forked starts.
#include "base/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

extern char** environ;

namespace htam {
namespace {

// The child's environment: ours, with `extra` ("NAME=value") added or replacing.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    bool overridden = false;
    for (const auto& x : extra) {
      if (kv.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0) overridden = true;
    }
    if (!overridden) env.push_back(kv);
  }
  for (const auto& x : extra) env.push_back(x);
  return env;
}

// What execve needs, built before fork (after it, only async-signal-safe calls): argv and the
// child's environment as null-terminated arrays over strings this object owns.
struct ExecImage {
  ExecImage(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env)
      : arg_store(argv), env_store(ChildEnvironment(extra_env)) {
    for (auto& a : arg_store) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  std::vector<std::string> arg_store, env_store;
  std::vector<char*> args, envp;
};

// What the child reports through its close-on-exec pipe when it cannot get to exec.
struct StartFailure {
  int stage;  // kChdir or kExec
  int error;  // errno
};
constexpr int kChdir = 1, kExec = 2;

// Keeps the head or the tail of what the child writes, within max_output bytes.
class OutputSink {
 public:
  explicit OutputSink(const ProcessOptions& o) : max_(o.max_output), tail_(o.keep_tail) {}
  void Add(const char* p, size_t n) {
    if (!tail_) {
      out_.append(p, std::min(n, max_ > out_.size() ? max_ - out_.size() : 0));
      return;
    }
    out_.append(p, n);
    // Amortised: trim now and then, not on every chunk.
    if (out_.size() > max_ && out_.size() - max_ > max_ / 2 + 65536) Trim();
  }
  std::string Take() {
    if (tail_) Trim();
    return std::move(out_);
  }

 private:
  void Trim() {
    if (out_.size() > max_) out_.erase(0, out_.size() - max_);
  }
  size_t max_;
  bool tail_;
  std::string out_;
};

// Reads what is there now (the descriptor is non-blocking). false at end of file.
bool ReadAvailable(int fd, OutputSink* sink) {
  char buf[65536];
  for (int i = 0; i < 64; ++i) {  // bounded: a writer that never pauses cannot hold us here
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      sink->Add(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
  return true;
}

}  // namespace

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const ProcessOptions& options) {
  if (argv.empty()) return Status::InvalidArgument("RunProcess: empty argv");
  ExecImage image(argv, options.extra_env);
  auto& args = image.args;
  auto& envp = image.envp;
  const char* cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();

  // Close-on-exec everywhere: a child started by another thread must not hold our pipe open.
  int out[2], report[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    return Status::IOError(std::string("cannot make a pipe: ") + strerror(errno));
  if (pipe2(report, O_CLOEXEC) != 0) {
    const int err = errno;
    close(out[0]);
    close(out[1]);
    return Status::IOError(std::string("cannot make a pipe: ") + strerror(err));
  }

  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {out[0], out[1], report[0], report[1]}) close(fd);
    return Status::IOError(std::string("fork failed: ") + strerror(err));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (options.own_group) setpgid(0, 0);
    dup2(out[1], 1);
    if (options.stderr_to == StderrTo::kOutput) dup2(out[1], 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    StartFailure f{kChdir, 0};
    if (cwd == nullptr || chdir(cwd) == 0) {
      execvpe(args[0], args.data(), envp.data());
      f.stage = kExec;
    }
    f.error = errno;
    ssize_t ignored = write(report[1], &f, sizeof f);
    (void)ignored;
    _exit(127);
  }
  if (options.own_group) setpgid(pid, pid);  // also from here: the group exists before any kill
  close(out[1]);
  close(report[1]);

  // Did it get to exec? The report pipe closes on exec; a failure writes to it first.
  StartFailure f{};
  ssize_t got;
  while ((got = read(report[0], &f, sizeof f)) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof f)) {
    close(out[0]);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (f.stage == kChdir)
      return Status::IOError("cannot enter " + options.cwd + ": " + strerror(f.error));
    return Status::Unavailable("cannot run " + argv[0] + ": " + strerror(f.error));
  }

  int fd = out[0];
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  OutputSink sink(options);
  ProcessResult r;
  int status = 0;
  bool lost = false;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      lost = true;  // reaped by someone else (waitpid(-1) elsewhere in the process)
      break;
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (options.timeout_s > 0 && elapsed > options.timeout_s) {
      if (options.own_group) kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      r.timed_out = true;
      break;
    }
    const int wait_ms = elapsed < 1.0 ? 2 : 10;
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      continue;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, wait_ms) > 0 && !ReadAvailable(fd, &sink)) {
      close(fd);  // end of file: every writer is gone; wait for the exit alone
      fd = -1;
    }
  }
  r.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // What it wrote before exiting is in the pipe now; a descendant that holds the pipe open after
  // it is not waited for.
  if (fd >= 0) {
    ReadAvailable(fd, &sink);
    close(fd);
  }
  r.output = sink.Take();
  if (lost) return Status::Internal("lost the exit status of " + argv[0] + " (reaped elsewhere)");
  if (!r.timed_out) {
    if (WIFEXITED(status)) {
      r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.signaled = true;
      r.signal = WTERMSIG(status);
    }
  }
  return r;
}

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, const std::string& cwd,
                                 double timeout_s, size_t max_output,
                                 const std::vector<std::string>& extra_env) {
  ProcessOptions o;
  o.cwd = cwd;
  o.timeout_s = timeout_s;
  o.max_output = max_output;
  o.extra_env = extra_env;
  return RunProcess(argv, o);
}

Result<pid_t> StartBackground(const std::vector<std::string>& argv, const std::string& log_path,
                              const std::vector<std::string>& extra_env) {
  if (argv.empty()) return Status::InvalidArgument("StartBackground: no command");
  ExecImage image(argv, extra_env);  // made before fork
  auto& args = image.args;
  auto& envp = image.envp;
  int log_fd = -1;
  if (!log_path.empty()) {
    log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0)
      return Status::IOError("cannot open " + log_path + ": " + std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    if (log_fd >= 0) close(log_fd);
    return Status::IOError(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    if (log_fd >= 0) {
      dup2(log_fd, 1);
      dup2(log_fd, 2);
    }
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  if (log_fd >= 0) close(log_fd);
  return pid;
}

Result<pid_t> StartWithChannel(const std::vector<std::string>& argv, int fd3,
                               const std::vector<std::string>& extra_env,
                               const std::string& label) {
  if (argv.empty()) return Status::InvalidArgument("StartWithChannel: no command");
  ExecImage image(argv, extra_env);  // made before fork
  auto& args = image.args;
  auto& envp = image.envp;
  const pid_t pid = fork();
  if (pid < 0) return Status::IOError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    if (dup2(fd3, 3) != 3) _exit(126);
    for (int fd = 4; fd < 4096; ++fd) close(fd);
    execve(args[0], args.data(), envp.data());
    dprintf(2, "%s: cannot execute %s: %s\n", label.c_str(), args[0], strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);  // also from here: the group exists before any kill
  return pid;
}

namespace {

int64_t MonotonicNs() {  // async-signal-safe
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// In a detached supervisor: `image` in a process group of its own, its stdout and stderr on `out`
// (nullptr: the supervisor's, /dev/null). Returns its pid, or -1. Async-signal-safe.
pid_t StartInGroup(const ExecImage& image, const char* out) {
  const pid_t p = fork();
  if (p == 0) {
    setpgid(0, 0);
    const int fd = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execve(image.args[0], image.args.data(), image.envp.data());
    _exit(127);
  }
  if (p > 0) setpgid(p, p);  // also from here: the group exists before any kill
  return p;
}

// The detached supervisor's life (StartDetached); never returns.
[[noreturn]] void Supervise(const ExecImage& command, const ExecImage& late,
                            const ExecImage& failed, const char* log, int64_t limit_ns,
                            const DetachedOptions& o) {
  if (o.nice != 0) setpriority(PRIO_PROCESS, 0, o.nice);
  // It waits for its children: SIGCHLD must not be ignored.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGCHLD, SIGPIPE, SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &dfl, nullptr);
  const int nul = open("/dev/null", O_RDWR);
  dup2(nul, 0);
  dup2(nul, 1);
  dup2(nul, 2);
  int first_closed = 3;
  int also = o.keep_fd >= 0 ? o.also_keep_fd : -1;
  if (also == 3) also = fcntl(also, F_DUPFD_CLOEXEC, 10);  // out of keep_fd's way
  if (o.keep_fd >= 0) {
    if (o.keep_fd == 3)
      fcntl(3, F_SETFD, 0);  // dup2 onto itself would leave close-on-exec set
    else
      dup2(o.keep_fd, 3);  // dup2 clears close-on-exec: the command holds it too
    first_closed = 4;
  }
  if (also >= 0) {
    if (also == 4)
      fcntl(4, F_SETFD, 0);
    else
      dup2(also, 4);
    first_closed = 5;
  }
  if (syscall(SYS_close_range, unsigned(first_closed), ~0u, 0u) != 0)
    for (int fd = first_closed; fd < 4096; ++fd) close(fd);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const pid_t m = StartInGroup(command, log);
  if (m < 0) _exit(1);
  const int64_t deadline = limit_ns > 0 ? MonotonicNs() + limit_ns : INT64_MAX;
  int st = 0;
  bool killed = false;
  for (;;) {
    const pid_t w = waitpid(m, &st, WNOHANG);
    if (w == m || (w < 0 && errno != EINTR)) break;
    if (MonotonicNs() > deadline) {
      kill(-m, SIGKILL);
      while (waitpid(m, &st, 0) < 0 && errno == EINTR) {
      }
      killed = true;
      break;
    }
    timespec tick{0, 50 * 1000 * 1000};
    nanosleep(&tick, nullptr);
  }
  kill(-m, SIGKILL);  // what the command left behind in its group
  const ExecImage& after = killed ? late : failed;
  if ((killed || !WIFEXITED(st) || WEXITSTATUS(st) != 0) && after.args[0]) {
    const pid_t n = StartInGroup(after, nullptr);
    while (n > 0 && waitpid(n, &st, 0) < 0 && errno == EINTR) {
    }
  }
  _exit(0);
}

}  // namespace

Status StartDetached(const std::vector<std::string>& argv, const DetachedOptions& options) {
  if (argv.empty()) return Status::InvalidArgument("StartDetached: no command");
  // Everything the supervisor needs, made before fork.
  const ExecImage command(argv, {}), late(options.on_timeout, {}), failed(options.on_failure, {});
  const std::string log = options.log_path;
  const int64_t limit_ns = options.timeout_s > 0 ? int64_t(options.timeout_s * 1e9) : 0;
  std::fflush(nullptr);
  const pid_t first = fork();
  if (first < 0) return Status::IOError(std::string("fork: ") + std::strerror(errno));
  if (first == 0) {
    setsid();                   // out of our session and process group
    if (fork() != 0) _exit(0);  // the supervisor is the grandchild: reparented, never our zombie
    Supervise(command, late, failed, log.empty() ? nullptr : log.c_str(), limit_ns, options);
  }
  while (waitpid(first, nullptr, 0) < 0 && errno == EINTR) {
  }
  return Status::OK();
}

int StopBackground(pid_t pid, int grace_ms) {
  if (pid <= 0) return -1;
  kill(pid, SIGTERM);
  int status = 0;
  for (int waited = 0; waited < grace_ms; waited += 50) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  return waitpid(pid, &status, 0) == pid ? status : -1;
}

Result<ForkedResult> RunForked(const std::function<int(std::string* reply)>& fn) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    return Status::IOError(std::string("cannot make a pipe: ") + strerror(errno));
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(p[0]);
    close(p[1]);
    return Status::IOError(std::string("fork: ") + strerror(err));
  }
  if (pid == 0) {
    close(p[0]);
    std::string reply;
    const int rc = fn(&reply);
    size_t off = 0;
    while (off < reply.size()) {
      ssize_t n = write(p[1], reply.data() + off, reply.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(rc);
  }
  close(p[1]);
  ForkedResult r;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) r.reply.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    r.signaled = true;
    r.signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  }
  return r;
}

Status ReplaceProcess(const std::vector<std::string>& argv) {
  if (argv.empty()) return Status::InvalidArgument("ReplaceProcess: no command");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(nullptr);
  execv(args[0], args.data());
  return Status::Unavailable("cannot run " + argv[0] + ": " + strerror(errno));
}

}  // namespace htam
