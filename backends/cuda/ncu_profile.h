// Optional profile of a candidate with Nsight Compute (ncu), on request (htam-eval-cli --profile,
// Submit.profile through htamd: daemon/eval/worker_main.cc):
// the candidate's one call runs under
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

// ncu on PATH, else /usr/local/cuda/bin/ncu; "" when neither exists.
std::string FindNcu();

struct NcuProfile {
  bool available = false;  // false: note says why (no ncu, run failed); not a candidate error
  std::string note;
  NcuMetrics metrics;
  fb::Bottleneck bottleneck = fb::Bottleneck::Unknown;
};

// Runs `ncu ... program_argv` (the program makes the candidate's one call) and classifies.
// `ncu` is a path ("" = none found: the note says so); the run is killed after timeout_s.
NcuProfile RunNcuProfile(const std::string& ncu, const std::vector<std::string>& program_argv,
                         const std::string& cwd, double timeout_s, const BottleneckThresholds& t);

}  // namespace htam::cuda
