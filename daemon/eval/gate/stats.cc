// Timing statistics; see stats.h.
#include "daemon/eval/gate/stats.h"

#include <algorithm>

namespace htam {
namespace {
double Quantile(const std::vector<double>& sorted, double q) {
  double pos = q * double(sorted.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - double(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}
}  // namespace

TimingStats Summarize(std::vector<double> samples) {
  TimingStats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.count = static_cast<uint32_t>(samples.size());
  s.min = samples.front();
  s.max = samples.back();
  s.median = Quantile(samples, 0.5);
  s.q1 = Quantile(samples, 0.25);
  s.q3 = Quantile(samples, 0.75);
  s.iqr = s.q3 - s.q1;
  return s;
}

}  // namespace htam
