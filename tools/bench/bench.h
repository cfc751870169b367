// Shared helpers of htam-bench subcommands: timing, percentiles, process memory, flag parsing.
// Thread-safety: plain functions; Flags is a value.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace htam::bench {

double NowSeconds();                                 // monotonic
double Percentile(std::vector<double> v, double p);  // p in [0, 100]; 0 for an empty vector
uint64_t RssBytes();                                 // current resident set (VmRSS)
uint64_t PeakRssBytes();                             // VmHWM
uint64_t RssAnonBytes();                             // RssAnon: private memory, not mapped files
uint64_t DirBytes(const std::string& dir);           // total size of regular files below dir

// --name value / --name=value / --flag; unknown flags are kept for the caller to reject.
class Flags {
 public:
  Flags(int argc, char** argv);
  std::string Get(const std::string& name, const std::string& def) const;
  int64_t GetInt(const std::string& name, int64_t def) const;
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::vector<int64_t> GetIntList(const std::string& name, const std::vector<int64_t>& def) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Names given that are not in `known`: "" when none.
  std::string Unknown(const std::vector<std::string>& known) const;

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// Runs `argv` (argv[0] = program path) and returns its stdout; *status gets the exit status.
std::string RunCapture(const std::vector<std::string>& argv, int* status);
std::string SelfExe();

}  // namespace htam::bench
