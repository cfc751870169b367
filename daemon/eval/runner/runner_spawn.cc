// Starting the runner process; see runner_spawn.h.
#include "daemon/eval/runner/runner_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "base/file.h"

namespace htam::eval {
namespace {

// async-signal-safe message to fd 2, then exit
[[noreturn]] void Die(const char* m) {
  ssize_t w = write(2, m, strlen(m));
  (void)w;
  _exit(126);
}

// Moves a descriptor above the ones the child sets up (3, 4), keeping O_CLOEXEC.
int HighFd(int fd) {
  if (fd < 0 || fd >= 100) return fd;
  int h = fcntl(fd, F_DUPFD_CLOEXEC, 100);
  close(fd);
  return h;
}

bool Under(const std::string& path, const std::string& dir) {
  return path.size() >= dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/' || dir == "/");
}

}  // namespace

bool InstallRunnerSeccomp() {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return false;
  bool ok = true;
  for (int sc : {SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev),
                 SCMP_SYS(pidfd_getfd), SCMP_SYS(kcmp)})
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), sc, 0) == 0;
  ok = ok && seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

Result<RunnerReport> SpawnRunner(const RunnerSpawn& spec) {
  // Everything the child needs, prepared before the fork.
  std::vector<std::string> argv_store = spec.argv;
  std::vector<char*> args;
  for (auto& a : argv_store) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_store{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + spec.work_dir,
                                     "TMPDIR=" + spec.work_dir, "LANG=C.UTF-8", "LC_ALL=C.UTF-8"};
  for (const char* keep : {"LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"})
    if (const char* v = getenv(keep)) env_store.push_back(std::string(keep) + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  // Before the fork (plain library calls are fine there); a failure shows in the chown or the
  // runner's first write.
  (void)MakeDirs(spec.work_dir, 0755);
  if (spec.drop && chown(spec.work_dir.c_str(), spec.uid, spec.gid) != 0)
    return Status::IOError("chown of the runner's temp dir: " + std::string(strerror(errno)));
  // Directories to bind back: opened now (O_PATH), bound through /proc/self/fd once the hidden
  // directories above them are covered.
  const bool root = geteuid() == 0;
  std::vector<std::string> hidden, visible;
  for (const auto& d : spec.hidden_dirs) {
    struct stat st;
    if (d.empty() || stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    bool covered = false;  // inside another hidden directory: covered with it
    for (const auto& o : spec.hidden_dirs)
      covered = covered || (o != d && !o.empty() && Under(d, o));
    if (!covered) hidden.push_back(d);
  }
  for (const auto& d : spec.visible_dirs) {
    bool inside = false;
    for (const auto& h : hidden) inside = inside || Under(d, h);
    if (!inside) continue;
    // Bound back, a folder that holds a hidden one would show it again (the scratch folder with
    // the verifier's files, the store): refused rather than shown.
    for (const auto& h : spec.hidden_dirs)
      if (root && !h.empty() && Under(h, d))
        return Status::FailedPrecondition(
            "the runner needs " + d + ", which holds " + h +
            ", a folder hidden from candidates (eval.scratch_dir, general.data_dir, the task "
            "and cache folders, eval.runner_hidden_dirs): move the plugin, the program or the "
            "library folder out of it");
    (void)MakeDirs(d, 0755);  // one that cannot be made fails the child's open below
    visible.push_back(d);
  }
  // The child opens each (O_PATH) inside its new mount namespace as fd 200+i, before covering.
  std::vector<std::string> fd_paths;
  for (size_t i = 0; i < visible.size(); ++i)
    fd_paths.push_back("/proc/self/fd/" + std::to_string(200 + i));

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Status::IOError(std::string("socketpair: ") + strerror(errno));
  sv[0] = HighFd(sv[0]);
  sv[1] = HighFd(sv[1]);
  int rep[2];  // the child's report: [files hidden, seccomp] before exec
  if (pipe2(rep, O_CLOEXEC) != 0) {
    close(sv[0]);
    close(sv[1]);
    return Status::IOError(std::string("pipe: ") + strerror(errno));
  }
  rep[0] = HighFd(rep[0]);
  rep[1] = HighFd(rep[1]);
  pid_t pid = fork();
  if (pid < 0) {
    for (int f : {sv[0], sv[1], rep[0], rep[1]}) close(f);
    return Status::ResourceExhausted(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    // ---- child: async-signal-safe calls only (the parent may have threads) ----
    char report[2] = {0, 0};
    close(3);  // the daemon's protocol socket is the verifier's alone
    if (dup2(sv[1], 4) != 4) Die("htam runner: cannot set up its socket\n");
    signal(SIGPIPE, SIG_DFL);
    if (root && !hidden.empty() && unshare(CLONE_NEWNS) == 0 &&
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) {
      bool all = true;
      for (size_t i = 0; i < visible.size(); ++i) {
        int fd = open(visible[i].c_str(), O_PATH | O_DIRECTORY);
        all = all && fd >= 0 && dup2(fd, int(200 + i)) == int(200 + i);
        if (fd >= 0) close(fd);
      }
      for (const auto& h : hidden)
        all = all && mount("tmpfs", h.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                           "size=64k,mode=0755") == 0;
      for (size_t i = 0; i < visible.size(); ++i) {
        // the mount point inside the (still writable) tmpfs
        const std::string& v = visible[i];
        for (size_t k = 1; k <= v.size(); ++k)
          if (k == v.size() || v[k] == '/') {
            char tmp[4096];
            size_t n = k < sizeof tmp ? k : sizeof tmp - 1;
            std::memcpy(tmp, v.data(), n);
            tmp[n] = 0;
            mkdir(tmp, 0755);
          }
        all = all && mount(fd_paths[i].c_str(), v.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0;
      }
      for (const auto& h : hidden)
        mount(nullptr, h.c_str(), nullptr,
              MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
      report[0] = all ? 1 : 0;
    }
    for (size_t i = 0; i < visible.size(); ++i) close(int(200 + i));
    if (spec.drop) {
      if (setgroups(0, nullptr) != 0 || setgid(spec.gid) != 0 || setuid(spec.uid) != 0)
        Die("htam runner: cannot drop privileges\n");
    } else if (root) {
      // Still uid 0 (the sandbox user cannot reach the tree): no capability at all, none
      // regained at exec, so it can neither unmount its view nor read the verifier's memory.
      for (int c = 0; c <= 63; ++c) prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
      prctl(PR_SET_SECUREBITS,
            SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                SECBIT_NO_SETUID_FIXUP_LOCKED,
            0, 0, 0);
      __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct data[2] = {};
      if (syscall(SYS_capset, &hdr, data) != 0) Die("htam runner: cannot drop capabilities\n");
    }
    struct rlimit fs;
    if (getrlimit(RLIMIT_FSIZE, &fs) == 0) {
      fs.rlim_max = fs.rlim_cur;
      setrlimit(RLIMIT_FSIZE, &fs);
    }
    if (chdir(spec.work_dir.c_str()) != 0) Die("htam runner: cannot enter its temp dir\n");
    if (spec.seccomp) report[1] = InstallRunnerSeccomp() ? 1 : 0;
    ssize_t w = write(rep[1], report, 2);
    (void)w;
    execve(args[0], args.data(), envp.data());
    Die("htam runner: cannot execute the worker binary (hidden from its view?)\n");
  }
  close(sv[1]);
  close(rep[1]);
  RunnerReport r;
  r.pid = pid;
  r.fd = sv[0];
  char report[2] = {0, 0};
  ssize_t n;
  do {
    n = read(rep[0], report, 2);
  } while (n < 0 && errno == EINTR);
  close(rep[0]);
  r.files_hidden = n == 2 && report[0];
  r.seccomp = n == 2 && report[1];
  return r;
}

}  // namespace htam::eval
