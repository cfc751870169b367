// Timing statistics: median, interquartile range and count of per-repetition times.
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <vector>

namespace htam {

struct TimingStats {
  double median = 0;
  double q1 = 0;
  double q3 = 0;
  double iqr = 0;  // q3 - q1: the spread reported with the median
  double min = 0;
  double max = 0;
  uint32_t count = 0;
};

// Quartiles by linear interpolation between order statistics; all zeros for an empty input.
TimingStats Summarize(std::vector<double> samples);

}  // namespace htam
