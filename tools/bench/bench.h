// Shared helpers of htam-bench subcommands: timing, percentiles, process memory, child processes
// (the command line: args.h). Thread-safety: plain functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace htam::bench {

double NowSeconds();                                 // monotonic
double Percentile(std::vector<double> v, double p);  // p in [0, 100]; 0 for an empty vector
uint64_t RssBytes();                                 // current resident set (VmRSS)
uint64_t PeakRssBytes();                             // VmHWM
uint64_t RssAnonBytes();                             // RssAnon: private memory, not mapped files
uint64_t DirBytes(const std::string& dir);           // total size of regular files below dir

// Runs `argv` (argv[0] = program path) and returns its stdout (its stderr goes to ours); *status
// gets the exit status, 128 + the signal that killed it, or 127 when it could not start.
std::string RunCapture(const std::vector<std::string>& argv, int* status);
std::string SelfExe();

}  // namespace htam::bench
