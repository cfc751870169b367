// Starting the runner: the process of htam-eval-worker that executes candidate code while the
// verifier (the worker that started it) keeps the inputs' expected outputs. The runner gets:
//   - its own mount view (when the worker starts as root): an empty read-only tmpfs over every
//     hidden directory (the task suite with its references, the data directory with the store,
//     golden data and the reference's compile cache, the workers' scratch directory), then only
//     its own temp and compile-cache directories bound back;
//   - the unprivileged user (setgid/setuid), PR_SET_NO_NEW_PRIVS, and a seccomp filter that
//     refuses ptrace, process_vm_readv/writev, pidfd_getfd and kcmp (EPERM), so it can neither
//     trace nor read the verifier, which also makes itself non-dumpable (PR_SET_DUMPABLE 0);
//   - its file-size limit made hard (the verifier lifts its own soft limit for shared buffers);
//   - one Unix socket to the verifier as fd 4; no protocol socket to the daemon (fd 3 closed).
// It inherits the worker's network and PID namespaces, limits and output pipe: the daemon's
// output-flood and time limits cover it, and it dies with the worker.
// Thread-safety: call before the worker starts threads (it forks).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace htam::eval {

struct RunnerSpawn {
  std::vector<std::string> argv;          // argv[0] = this binary
  std::vector<std::string> hidden_dirs;   // covered by an empty tmpfs in the runner's view
  std::vector<std::string> visible_dirs;  // bound back inside hidden ones (created if missing)
  std::string work_dir;                   // the runner's cwd, HOME and TMPDIR
  uid_t uid = 0;                          // drop to uid/gid when `drop` (the worker is root)
  gid_t gid = 0;
  bool drop = false;
  bool seccomp = true;
};

// What the runner got, for the worker's hello frame and INFO.
struct RunnerReport {
  pid_t pid = -1;
  int fd = -1;                // the verifier's end of the socket
  bool files_hidden = false;  // the hidden directories are covered in the runner's view
  bool seccomp = false;       // set in the child before exec (reported through a pipe)
};

Result<RunnerReport> SpawnRunner(const RunnerSpawn& spec);

// Installs the runner's seccomp filter in this process (no_new_privs first). Returns false when
// the kernel refused it.
bool InstallRunnerSeccomp();

}  // namespace htam::eval
