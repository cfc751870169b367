// The gate's host comparisons; see compare.h.
#include "daemon/eval/gate/compare.h"

#include <algorithm>
#include <cmath>

#include "daemon/eval/gate/device_buffers.h"

namespace htam::gate_detail {

bool IsPoison(const HostTensor& t, int64_t i) {
  int sz = htam_dtype_size(t.dtype);
  for (int b = 0; b < sz; ++b)
    if (t.bytes[size_t(i) * sz + b] != kPoisonByte) return false;
  return true;
}

// Compares a candidate output with the reference's. "" when it passes.
// Element positions are left out for held-out shapes (`hide`): they would reveal the sizes.
std::string At(int64_t i, bool hide) {
  return hide ? "" : " at element " + std::to_string(i);
}

std::string CheckOutput(const HostTensor& c, const HostTensor& r, const Tolerance& tol,
                        const std::string& where, bool hide) {
  const int64_t n = c.numel();
  bool all_zero = true, ref_nonzero = false;
  int64_t bad = 0, first_bad = -1;
  // Blocks converted by typed loops (ReadAsDouble): no per-element dtype dispatch.
  constexpr int64_t kBlock = 4096;
  double cb[kBlock], rb[kBlock];
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t b1 = std::min(n, b0 + kBlock);
    ReadAsDouble(c, b0, b1, cb);
    ReadAsDouble(r, b0, b1, rb);
    for (int64_t i = b0; i < b1; ++i) {
      const double cv = cb[i - b0], rv = rb[i - b0];
      all_zero &= cv == 0;
      ref_nonzero |= rv != 0;
      if (!std::isfinite(cv)) {
        bool same = (std::isnan(cv) && std::isnan(rv)) || (std::isinf(cv) && cv == rv);
        if (!same) {
          if (c.IsFloat() && IsPoison(c, i))
            return "output '" + c.name + "' not written" + At(i, hide) + " (poison left)" + where;
          return "output '" + c.name + "' has " + (std::isnan(cv) ? "NaN" : "Inf") + At(i, hide) +
                 " where the reference has " + FormatNumber(rv) + where;
        }
        continue;
      }
      if (!std::isfinite(rv)) {
        ++bad;
        if (first_bad < 0) first_bad = i;
        continue;
      }
      if (std::fabs(cv - rv) > tol.atol + tol.rtol * std::fabs(rv)) {
        ++bad;
        if (first_bad < 0) first_bad = i;
      }
    }
  }
  if (all_zero && ref_nonzero)
    return "output '" + c.name + "' is all zeros where the reference is not" + where;
  if (double(bad) > tol.bad_budget * double(n)) {
    std::string count = hide ? FormatNumber(100.0 * double(bad) / double(n)) + "% of the elements"
                             : std::to_string(bad) + " of " + std::to_string(n) + " elements";
    return count + " of '" + c.name + "' outside tolerance (rtol " + FormatNumber(tol.rtol) +
           ", atol " + FormatNumber(tol.atol) + "); first" +
           (hide ? std::string() : " at element " + std::to_string(first_bad)) + ": got " +
           FormatNumber(c.At(first_bad)) + ", expected " + FormatNumber(r.At(first_bad)) + where;
  }
  return "";
}

// Two candidate runs on the same inputs: bit-identical, or within the task's tolerance.
std::string CheckSame(const HostTensor& a, const HostTensor& b, const Tolerance& tol, bool hide) {
  if (a.bytes == b.bytes) return "";
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) {
    double x = a.At(i), y = b.At(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x == y) continue;
    if (std::isfinite(x) && std::isfinite(y) &&
        std::fabs(x - y) <= tol.atol + tol.rtol * std::fabs(x))
      continue;
    return "two calls with the same inputs disagree on '" + a.name + "'" + At(i, hide) + ": " +
           FormatNumber(x) + " vs " + FormatNumber(y);
  }
  return "";
}

}  // namespace htam::gate_detail
