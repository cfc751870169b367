// Runs a tool (nvcc, ncu, hipcc, g++, the KernelBench scripts, a benchmark's child) as a child
// process with a wall-clock limit, capturing its output. By default the child gets its own
// process group so that a timeout kills the whole tool chain (nvcc spawns cicc, ptxas, gcc; hipcc
// spawns clang, lld, the bundler).
// Thread-safety: RunProcess is safe to call from several threads at once.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace htam {

// Where the child's stderr goes.
enum class StderrTo {
  kOutput,  // into ProcessResult::output, interleaved with stdout (a tool's diagnostics)
  kParent,  // this process's stderr, so that output is stdout alone (callers that parse it)
};

struct ProcessOptions {
  // The child's working directory; "" keeps this process's. Nothing is written there.
  std::string cwd;
  // Wall-clock limit; <= 0 means none.
  double timeout_s = 0;
  // Bytes of output kept; the rest is still read (the child never blocks on a full pipe) and
  // dropped.
  size_t max_output = 1 << 20;
  // false: keep the first max_output bytes; true: the last (where a tool's error line ends it).
  bool keep_tail = false;
  StderrTo stderr_to = StderrTo::kOutput;
  // "NAME=value" entries added to (and overriding) this process's environment; nvcc gets
  // TMPDIR=<its compile dir> so that it never needs a writable /tmp (sandboxed workers).
  std::vector<std::string> extra_env;
  // true: the child leads a process group of its own, killed whole on a timeout. false: it stays
  // in ours (a group kill of this process, or a Ctrl-C, reaches it) and a timeout kills it alone.
  bool own_group = true;
};

struct ProcessResult {
  int exit_code = -1;      // valid when !signaled && !timed_out
  bool signaled = false;   // killed by a signal it did not ask for
  int signal = 0;          // that signal, when signaled
  bool timed_out = false;  // killed by us after timeout_s
  std::string output;      // what StderrTo says, at most max_output bytes kept
  double wall_ms = 0;
};

// Runs argv[0] (searched in PATH when it has no slash) with stdin on /dev/null. IOError when no
// pipe or process can be made or `cwd` cannot be entered; Unavailable ("cannot run <argv[0]>:
// <reason>") when argv[0] cannot be executed; Internal when its exit status was taken by someone
// else's waitpid.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const ProcessOptions& options);

// The same with stdout and stderr interleaved and the child in its own process group.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, const std::string& cwd,
                                 double timeout_s, size_t max_output = 1 << 20,
                                 const std::vector<std::string>& extra_env = {});

// A process left running in the background (a daemon a benchmark drives): argv[0] is a path, its
// stdout and stderr are appended to `log_path` ("" keeps this process's), `extra_env` entries
// ("NAME=value") are added to its environment. It stays in this process's group. Returns its pid;
// IOError when no process can be made. An argv[0] that cannot be executed ends it with status 127.
Result<pid_t> StartBackground(const std::vector<std::string>& argv, const std::string& log_path,
                              const std::vector<std::string>& extra_env = {});

// A process that talks with this one through `fd3` (one end of a socketpair): argv[0] is a path,
// started in a process group of its own (its tools die with it) with `fd3` as its descriptor 3 and
// no other descriptor of ours beyond 0-2; `extra_env` entries ("NAME=value") are added to its
// environment. Returns its pid (stop it with a kill of its group and a waitpid); IOError when no
// process can be made. An argv[0] that cannot be executed writes "<label>: cannot execute
// <argv[0]>: <reason>" to stderr and ends it with status 127.
Result<pid_t> StartWithChannel(const std::vector<std::string>& argv, int fd3,
                               const std::vector<std::string>& extra_env,
                               const std::string& label);

// A command left to run on its own (StartDetached): what it does once it has ended.
struct DetachedOptions {
  // The command's stdout and stderr, truncated first; "" = /dev/null.
  std::string log_path;
  // Wall-clock limit; past it the command's process group is killed. <= 0: none.
  double timeout_s = 0;
  // Run (argv[0] a path, stdio on /dev/null, waited for) after the command was killed at
  // timeout_s, or after it ended otherwise than with status 0 (an exit code, a signal, or no
  // start); empty = nothing.
  std::vector<std::string> on_timeout;
  std::vector<std::string> on_failure;
  // A descriptor of ours that the command (and what runs after it) keeps as its descriptor 3,
  // e.g. a flock held for as long as it runs; -1 = none. No other descriptor beyond 0-2 is kept.
  int keep_fd = -1;
  // With keep_fd, a second descriptor of ours kept as descriptor 4 (e.g. a memory reservation the
  // command holds for as long as it runs); -1 = none.
  int also_keep_fd = -1;
  // The nice value (setpriority) the command runs at; 0 leaves ours.
  int nice = 0;
};

// Starts argv (argv[0] a path, our environment) detached from this process: a supervisor in a
// session of its own (out of our process group: a group kill of ours does not reach it), not our
// child (reparented to init, nobody here waits for it or leaves it a zombie), with stdio on
// /dev/null, default signal dispositions and no signal blocked. The supervisor runs the command
// in a process group of its own, kills that group at timeout_s (and once the command has ended:
// what it left behind), runs on_timeout or on_failure as DetachedOptions says, and exits. Returns
// once the supervisor is on its own; IOError when no process can be made. Safe in a process with
// other threads: between fork and exec only async-signal-safe calls.
Status StartDetached(const std::vector<std::string>& argv, const DetachedOptions& options);

// Stops a process of StartBackground: SIGTERM, then SIGKILL when it has not ended after
// `grace_ms`; reaps it. Returns its wait status, or -1 when `pid` is not a child of this process.
int StopBackground(pid_t pid, int grace_ms = 10000);

// How a function run by RunForked ended.
struct ForkedResult {
  int exit_code = -1;     // fn's return value, valid when !signaled
  bool signaled = false;  // the child died of a signal (a fault in a damaged store's pages)
  int signal = 0;         // that signal, when signaled
  std::string reply;      // what fn put in *reply; empty when the child ended before fn returned
};

// Runs `fn` in a forked copy of this process (stdio flushed first) and waits for it, so that a
// step which may crash (reading a damaged store through LMDB) cannot take this process down: when
// fn returns, the child sends *reply back through a pipe and exits with fn's return value. The
// child stays in this process's group. In a process with other threads, fn must keep to
// async-signal-safe calls (and a reply short enough to need no allocation: 15 bytes), as after any
// fork. IOError when no pipe or process can be made.
Result<ForkedResult> RunForked(const std::function<int(std::string* reply)>& fn);

// Replaces this process by argv[0] (a path), keeping its environment; stdio is flushed first.
// Returns only when that fails: Unavailable ("cannot run <argv[0]>: <reason>").
Status ReplaceProcess(const std::vector<std::string>& argv);

}  // namespace htam
