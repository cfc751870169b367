// posix_spawn + poll on a pipe; the child's process group is killed on timeout.
#include "backends/hip/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

extern char** environ;

namespace htam::hip {

Result<ToolResult> RunTool(const std::vector<std::string>& argv, const std::string& cwd,
                           double timeout_s, size_t max_output,
                           const std::vector<std::string>& env_extra) {
  if (argv.empty()) return Status::InvalidArgument("RunTool: empty command");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull >= 0) posix_spawn_file_actions_adddup2(&fa, devnull, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);

  // The child runs in cwd: a small shell-free trampoline is not available in posix_spawn before
  // glibc 2.29's addchdir_np, which Debian 12 has.
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());

  std::vector<std::string> env_store;
  for (char** e = environ; e && *e; ++e) env_store.emplace_back(*e);
  for (const auto& kv : env_extra) {
    std::string key = kv.substr(0, kv.find('=') + 1);
    env_store.erase(std::remove_if(env_store.begin(), env_store.end(),
                                   [&](const std::string& s) { return s.rfind(key, 0) == 0; }),
                    env_store.end());
    env_store.push_back(kv);
  }
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (devnull >= 0) close(devnull);
  if (rc != 0) {
    close(fds[0]);
    return Status::IOError("cannot run " + argv[0] + ": " + strerror(rc));
  }
  ToolResult r;
  auto deadline = t0 + std::chrono::milliseconds(int64_t((timeout_s > 0 ? timeout_s : 1e7) * 1000));
  char buf[8192];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, int(std::min<long long>(left, 250)));
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      ssize_t got = read(fds[0], buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      if (r.output.size() < max_output)
        r.output.append(buf, std::min(size_t(got), max_output - r.output.size()));
    }
  }
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!r.timed_out) {
    if (WIFEXITED(st))
      r.exit_code = WEXITSTATUS(st);
    else
      r.signaled = true;
  }
  return r;
}

}  // namespace htam::hip
