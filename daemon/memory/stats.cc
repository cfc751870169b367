// Statistics over transition records, shared by the incremental path and the rebuild.
#include "daemon/memory/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "daemon/memory/policy.h"

namespace htam::memory {

double StepGain(fb::OutcomeStatus status, double before, double after) {
  if (status != fb::OutcomeStatus::Ok || before <= 0 || after <= 0) return 0.0;
  return std::log(after / before);
}

double RecordGain(const fb::TransitionRecord& r) {
  return r.no_change() ? 0.0 : StepGain(r.status(), r.speedup_before(), r.speedup_after());
}

bool Trusted(const fb::TransitionRecord& r) {
  return r.verified() || r.vouched();
}

bool NoChange(double before, double after, double median_us, double spread_us, double ratio) {
  if (before <= 0 || after <= 0) return false;
  double band = std::max(0.0, ratio);
  if (median_us > 0 && spread_us > 0) band = std::max(band, spread_us / median_us);
  return std::abs(after / before - 1.0) <= band;
}

bool Counts(fb::OutcomeStatus status) {
  return status != fb::OutcomeStatus::InfraError;
}

fb::GainStats AddOutcome(const fb::GainStats& s, fb::OutcomeStatus st, double gain) {
  if (!Counts(st)) return s;
  uint32_t successes = s.successes() + (IsSuccess(st, gain) ? 1 : 0);
  uint32_t compile = s.compile_failures() + (st == fb::OutcomeStatus::CompileError ? 1 : 0);
  uint32_t incorrect =
      s.incorrect() +
      (st == fb::OutcomeStatus::Incorrect || st == fb::OutcomeStatus::Nondeterministic ? 1 : 0);
  uint32_t other =
      s.other_failures() + (st == fb::OutcomeStatus::Crash || st == fb::OutcomeStatus::Timeout ||
                                    st == fb::OutcomeStatus::ResourceLimit
                                ? 1
                                : 0);
  bool ok = st == fb::OutcomeStatus::Ok;
  double sum = s.sum_gain() + (ok ? gain : 0.0);
  double sq = s.sum_gain_sq() + (ok ? gain * gain : 0.0);
  // max_gain starts at 0: "the best improvement seen", never below no change.
  double mx = ok ? std::max(s.max_gain(), gain) : s.max_gain();
  return fb::GainStats(s.uses() + 1, successes, compile, incorrect, other, sum, sq, mx);
}

bool SameStats(const fb::GainStats& a, const fb::GainStats& b) {
  return a.uses() == b.uses() && a.successes() == b.successes() &&
         a.compile_failures() == b.compile_failures() && a.incorrect() == b.incorrect() &&
         a.other_failures() == b.other_failures() && a.sum_gain() == b.sum_gain() &&
         a.sum_gain_sq() == b.sum_gain_sq() && a.max_gain() == b.max_gain();
}

std::string StatsText(const fb::GainStats& s) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "uses=%u successes=%u compile_failures=%u incorrect=%u other=%u sum_gain=%.17g "
                "sum_gain_sq=%.17g max_gain=%.17g",
                s.uses(), s.successes(), s.compile_failures(), s.incorrect(), s.other_failures(),
                s.sum_gain(), s.sum_gain_sq(), s.max_gain());
  return buf;
}

std::vector<uint64_t> CreditedStrategies(const fb::TransitionRecord& r) {
  std::vector<uint64_t> out;
  if (r.strategy_ids())
    for (uint64_t id : *r.strategy_ids())
      if (id && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  if (r.learned_strategy_id() &&
      std::find(out.begin(), out.end(), r.learned_strategy_id()) == out.end())
    out.push_back(r.learned_strategy_id());
  return out;
}

EdgeKey EdgeOf(const fb::TransitionRecord& r) {
  uint64_t from =
      (r.history() && r.history()->size() > 0) ? r.history()->Get(r.history()->size() - 1) : 0;
  uint32_t cluster = r.state() ? static_cast<uint32_t>(r.state()->bottleneck()) : 0;
  return {from, r.direction_id(), cluster};
}

void Accumulate(const fb::TransitionRecord& r, Derived* d) {
  double gain = RecordGain(r);
  d->directions[r.direction_id()] = AddOutcome(d->directions[r.direction_id()], r.status(), gain);
  EdgeKey e = EdgeOf(r);
  d->edges[e] = AddOutcome(d->edges[e], r.status(), gain);
  bool example = r.verified() && IsSuccess(r.status(), gain) && r.candidate_hash() &&
                 r.candidate_hash()->size() > 0;
  for (uint64_t s : CreditedStrategies(r)) {
    d->strategies[s] = AddOutcome(d->strategies[s], r.status(), gain);
    if (Trusted(r))
      d->verified_strategies[s] = AddOutcome(d->verified_strategies[s], r.status(), gain);
    if (example) d->examples[s] = r.candidate_hash()->str();
  }
}

}  // namespace htam::memory
