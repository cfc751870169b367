// The gate's comparisons of outputs on the host: a candidate's output against the reference's
// (CheckOutput) and two runs of the candidate on the same inputs (CheckSame). Each returns "" when
// it passes, else the reason as the user reads it. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/eval/gate/task_spec.h"
#include "daemon/eval/gate/tensor_data.h"

namespace htam::gate_detail {

// Whether element `i` of `t` still holds the poison written before the call (never written).
bool IsPoison(const HostTensor& t, int64_t i);

// " at element i", or "" for held-out shapes (`hide`): positions would reveal the sizes.
std::string At(int64_t i, bool hide);

// A candidate output against the reference's, within the task's tolerance; `where` ends the
// message (the case).
std::string CheckOutput(const HostTensor& c, const HostTensor& r, const Tolerance& tol,
                        const std::string& where, bool hide = false);

// Two candidate runs on the same inputs: bit-identical, or within the task's tolerance.
std::string CheckSame(const HostTensor& a, const HostTensor& b, const Tolerance& tol, bool hide);

}  // namespace htam::gate_detail
