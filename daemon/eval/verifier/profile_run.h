// The host side of a plugin's profiler (backend.h, API 1.3: profile_command / profile_parse): asks
// the plugin for the command that wraps a process making the candidate's one call, runs it with a
// wall limit, and has the plugin read what it printed. The host knows no profiler by name; every
// way it can fail is a "profile unavailable: ..." note, never an error of the candidate.
// Used by htam-eval-worker (daemon/eval/verifier/eval_worker_main.cc) and htam-eval --in-process
// (tools/eval).
// Thread-safety: calls into the plugin instance: the caller serializes them (plugin ABI rule);
// RunProfile starts one child process per call.
#pragma once

#include <string>
#include <vector>

#include "backends/common/plugin_host.h"
#include "base/status.h"
#include "htam/schema/htg_generated.h"
#include "htam/schema/job_generated.h"

namespace htam {

// How to profile: the job's own table (schema/job.fbs ProfileRequest: the profiler binary, "" = the
// plugin finds its own; its search path, "" = the process's PATH; the wall limit of the profiled
// run; the thresholds of the classes, < 0 = the plugin's defaults), as the worker frame carries it.
using ProfileRequest = fb::ProfileRequestT;

struct ProfileCommand {
  std::vector<std::string> argv;           // the profiler and its flags
  std::vector<std::string> child_options;  // "key=value" for the profiled process's plugin
  std::string tool_name;                   // "ncu"
};

struct ProfileOutcome {
  bool available = false;  // false: the note says why
  std::string note;        // "ncu: Memory-bound" or "profile unavailable: ..."
  double dram_pct = -1, sm_pct = -1, occupancy_pct = -1;  // percent of peak; -1 not reported
  int kernels = 0;
  double total_us = 0;
  fb::Bottleneck bottleneck = fb::Bottleneck::Unknown;
};

// The plugin's command. Unavailable, its message the whole note ("profile unavailable: the cpu
// backend offers no profiler", or the plugin's reason: no profiler found here).
Result<ProfileCommand> GetProfileCommand(const BackendInstance& b, const ProfileRequest& r);

// Runs `c.argv + program_argv` in `cwd` (killed after r.timeout_s) and has the plugin parse it.
ProfileOutcome RunProfile(const BackendInstance& b, const ProfileCommand& c,
                          const std::vector<std::string>& program_argv, const std::string& cwd,
                          const ProfileRequest& r);

}  // namespace htam
