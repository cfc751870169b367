// htam-bench helpers.
#include "tools/bench/bench.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "base/paths.h"
#include "base/process.h"

namespace htam::bench {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double rank = p / 100.0 * (v.size() - 1);
  size_t lo = static_cast<size_t>(rank);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - lo);
}

static uint64_t StatusField(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0)
      return std::stoull(line.substr(std::string(field).size())) * 1024;
  return 0;
}
uint64_t RssBytes() {
  return StatusField("VmRSS:");
}
uint64_t PeakRssBytes() {
  return StatusField("VmHWM:");
}
uint64_t RssAnonBytes() {
  return StatusField("RssAnon:");
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  return total;
}

std::string RunCapture(const std::vector<std::string>& argv, int* status) {
  // stdout alone (callers parse it); stderr and a Ctrl-C reach the child as they reach us.
  ProcessOptions o;
  o.max_output = std::numeric_limits<size_t>::max();
  o.stderr_to = StderrTo::kParent;
  o.own_group = false;
  auto r = RunProcess(argv, o);
  if (!r.ok()) {
    std::fprintf(stderr, "htam-bench: %s\n", r.status().message().c_str());
    *status = 127;
    return "";
  }
  *status = r->signaled ? 128 + r->signal : r->exit_code;
  return r->output;
}

std::string SelfExe() {
  return ExecutablePath();
}

}  // namespace htam::bench
