// Child processes for the toolchain: fork + execvp, output to a file, timeout by process group.
#include "base/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace htam {

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, const std::string& cwd,
                                 double timeout_s, size_t max_output,
                                 const std::vector<std::string>& extra_env) {
  if (argv.empty()) return Status::InvalidArgument("RunProcess: empty argv");
  std::string tmpl = cwd + "/.htam-proc-XXXXXX";
  int out_fd = mkstemp(tmpl.data());
  if (out_fd < 0)
    return Status::IOError("cannot create output file in " + cwd + ": " + strerror(errno));
  unlink(tmpl.c_str());  // the descriptor keeps it alive; nothing to clean up later

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child's environment, built before fork (nothing but exec-safe calls after it).
  std::vector<std::string> env_store;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    bool overridden = false;
    for (const auto& x : extra_env) {
      if (kv.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0) overridden = true;
    }
    if (!overridden) env_store.push_back(kv);
  }
  for (const auto& x : extra_env) env_store.push_back(x);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);

  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    close(out_fd);
    return Status::IOError(std::string("fork failed: ") + strerror(errno));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    setpgid(0, 0);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    execvpe(args[0], args.data(), envp.data());
    const char msg[] = "exec failed\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before any kill

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
    if (timeout_s > 0 && elapsed > timeout_s) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(elapsed < 1.0 ? 2 : 10));
  }
  r.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (lost) {
    close(out_fd);
    return Status::Internal("lost the exit status of " + argv[0] + " (reaped elsewhere)");
  }
  if (!r.timed_out) {
    if (WIFEXITED(status)) {
      r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.signaled = true;
    }
  }
  // Read back what it wrote (the head, bounded).
  lseek(out_fd, 0, SEEK_SET);
  char buf[65536];
  ssize_t n;
  while ((n = read(out_fd, buf, sizeof buf)) > 0) {
    size_t room = max_output > r.output.size() ? max_output - r.output.size() : 0;
    r.output.append(buf, std::min<size_t>(room, static_cast<size_t>(n)));
    if (room == 0) break;
  }
  close(out_fd);
  if (r.exit_code == 127 && r.output.find("exec failed") != std::string::npos) {
    return Status::Unavailable("cannot execute " + argv[0]);
  }
  return r;
}

}  // namespace htam
