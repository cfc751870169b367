// The gate's result (backends/common/gate.h) as an evaluation result (evaluator.h): the one
// mapping, used by the sandboxed worker (its result frame) and by htam-eval's in-process mode.
// Fields the gate does not know (device, arch, wall time, the profiling run's note) stay default.
// Thread-safety: a pure function.
#pragma once

#include "backends/common/gate.h"
#include "daemon/eval/evaluator.h"

namespace htam::eval {

inline EvalResult FromGateResult(const GateResult& g) {
  EvalResult r;
  r.status = g.status;
  r.diagnostics = g.diagnostics;
  r.candidate_hash = g.candidate_hash;
  r.median_us = g.median_us;
  r.spread_us = g.spread_us;
  r.repetitions = uint32_t(g.repetitions);
  r.baseline_us = g.baseline_us;
  r.speedup = g.speedup;
  r.profile = g.profile;
  r.stage_ms = g.stage_ms;
  r.op_ms = g.op_ms;
  r.compile_cached = g.compile_cached;
  r.compile_ms = g.compile_ms;
  r.cases = g.cases;
  r.flops = g.flops;
  r.bytes = g.bytes;
  r.sol_us = g.sol_us;
  r.floor_us = g.floor_us;
  r.copy_bytes_per_s = g.copy_bytes_per_s;
  r.fp32_flops = g.fp32_flops;
  r.tensor16_flops = g.tensor16_flops;
  r.golden_computed = g.golden_computed;
  r.baseline_compile_us = g.baseline_compile_us;
  r.baseline_note = g.baseline_note;
  return r;
}

}  // namespace htam::eval
