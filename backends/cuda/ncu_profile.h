// Optional profile of a candidate with Nsight Compute (ncu), on request (htam-eval --profile,
// Submit.profile through htamd), offered by the CUDA plugin through the optional entry points
// htam_backend_profile_command / _parse (backend.h, API 1.3; the host side is
// daemon/eval/verifier/profile_run.h, which knows no profiler by name): the candidate's one call
// runs under
//   ncu --metrics dram__throughput.avg.pct_of_peak_sustained_elapsed,
//                 sm__throughput.avg.pct_of_peak_sustained_elapsed,
//                 sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum --csv
// in a subprocess; the CSV is parsed here and a bottleneck class (schema Bottleneck) derived with
// the thresholds of the configuration table (eval.cuda_profile_*). Where ncu is absent the
// result is a "profile unavailable" note, never an error of the candidate.
// Thread-safety: pure functions; RunNcuProfile starts one child process per call.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "htam/backend.h"
#include "htam/schema/htg_generated.h"

namespace htam::cuda {

// The metrics requested, in ncu's names.
extern const char* const kNcuMetrics[4];

// Duration-weighted means over every kernel the run launched except the backend's own (names
// starting with htam_: cache flush, hold, roofline probes) (percentages 0..100, -1 = not
// reported), their total time and their count.
struct NcuMetrics {
  double dram_pct = -1;       // dram__throughput.avg.pct_of_peak_sustained_elapsed
  double sm_pct = -1;         // sm__throughput.avg.pct_of_peak_sustained_elapsed
  double occupancy_pct = -1;  // sm__warps_active.avg.pct_of_peak_sustained_active
  double total_us = 0;        // gpu__time_duration.sum over all kernels
  int kernels = 0;
  std::vector<std::string> kernel_names;  // in launch order, each once
};

struct BottleneckThresholds {
  double memory_pct = 60;   // DRAM throughput from which a kernel is memory-bound
  double compute_pct = 60;  // SM throughput from which it is compute-bound
  double launch_us = 5;     // below both: launch-bound when the mean kernel is this short
};

// Parses `ncu --csv` output. Lines that are not CSV rows (==PROF== lines, the program's own
// output) are skipped; columns are found by header name ("ID", "Kernel Name", "Metric Name",
// "Metric Unit", "Metric Value"); values may carry thousands separators; durations in
// ns/us/ms/s. InvalidArgument when no header or no kernel row is found.
Result<NcuMetrics> ParseNcuCsv(std::string_view text);

// memory: dram >= memory_pct and dram >= sm; compute: sm >= compute_pct and sm > dram;
// otherwise (neither unit near its peak) launch when the mean kernel is shorter than launch_us,
// else latency. Unknown when a throughput is missing.
fb::Bottleneck ClassifyBottleneck(const NcuMetrics& m, const BottleneckThresholds& t);

// ncu in the directories of `search_path` (PATH form; "" = this process's PATH), else
// /usr/local/cuda/bin/ncu; "" when neither exists.
std::string FindNcu(const std::string& search_path = "");

// The options of the profiled process's plugin: ncu profiles every kernel of the process, so the
// one-call child measures no roofline and runs no CUPTI self-test at device open (ncu injects its
// own profiler); only the candidate's kernels are in the metrics.
extern const char* const kNcuChildOptions[2];

// `ncu --metrics ... --csv --target-processes all`: the prefix of the profiled program's argv.
// Unavailable when `ncu` is "" (none found; the message says where it was looked for) or is not
// an executable file.
Result<std::vector<std::string>> NcuCommand(const std::string& ncu);

struct NcuProfile {
  bool available = false;  // false: note says why (no ncu, run failed); not a candidate error
  std::string note;
  NcuMetrics metrics;
  fb::Bottleneck bottleneck = fb::Bottleneck::Unknown;
};

// What an ncu run printed, with its exit: the metrics and class (note "ncu: Memory-bound"), or
// available = false and the note says why without the "profile unavailable: " prefix (no CSV,
// no kernel, ncu's own ERR line, its exit code or signal).
NcuProfile InterpretNcuOutput(std::string_view output, int exit_code, bool signaled,
                              const BottleneckThresholds& t);

// Runs `ncu ... program_argv` (the program makes the candidate's one call) and classifies: the
// same steps the host takes through the plugin ABI, in one call (tests, tools without a plugin).
// `ncu` is a path ("" = none found: the note says so); the run is killed after timeout_s.
NcuProfile RunNcuProfile(const std::string& ncu, const std::vector<std::string>& program_argv,
                         const std::string& cwd, double timeout_s, const BottleneckThresholds& t);

// ---- the plugin ABI's profile entry points (API 1.3), for a plugin that profiles with ncu ----

// What the returned strings point into: valid until the next call with the same state.
struct NcuEntryState {
  std::vector<std::string> argv, child_options;
  std::vector<const char*> argv_ptrs, child_ptrs;
  std::string note;
};

// htam_backend_profile_command: the request's tool, else ncu found on its search path.
htam_backend_error* NcuProfileCommandEntry(const htam_profile_command_request* request,
                                           NcuEntryState* state, htam_profile_command* out);
// htam_backend_profile_parse: ParseNcuCsv and ClassifyBottleneck with the output's thresholds
// (< 0: BottleneckThresholds' defaults); HTAM_ERR_UNAVAILABLE with the reason otherwise.
htam_backend_error* NcuProfileParseEntry(const htam_profile_output* output, NcuEntryState* state,
                                         htam_profile_summary* out);

}  // namespace htam::cuda
