// Statistics derived from transition records: direction and strategy GainStats, transition edges
// and example candidates. The incremental update (one record at a time, in id order) and the
// rebuild use the same functions, so both give bit-identical results.
// Thread-safety: plain values and functions; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "daemon/memory/memory.h"

namespace htam::memory {

// log(after / before) of an Ok outcome with positive speedups; 0 otherwise.
double StepGain(fb::OutcomeStatus status, double speedup_before, double speedup_after);
// The gain of a stored record: StepGain, and 0 for a step recorded as no change (inside the
// timing spread), which is then neither a success nor a failure.
double RecordGain(const fb::TransitionRecord& r);
// Weighed as verified evidence: evaluated by htamd's gate, or reported by a vouched client.
bool Trusted(const fb::TransitionRecord& r);
// Whether an Ok step from `before` to `after` is inside the timing spread: |after/before - 1| at
// most max(ratio, spread_us / median_us).
bool NoChange(double before, double after, double median_us, double spread_us, double ratio);
// Whether the outcome enters statistics at all (an infrastructure error is nobody's result).
bool Counts(fb::OutcomeStatus status);
// Adds one outcome to a GainStats (a fresh one when stats is null-initialized).
fb::GainStats AddOutcome(const fb::GainStats& stats, fb::OutcomeStatus status, double gain);
bool SameStats(const fb::GainStats& a, const fb::GainStats& b);
std::string StatsText(const fb::GainStats& s);

// The strategies a record credits: its strategy_ids plus the learned one, without duplicates.
std::vector<uint64_t> CreditedStrategies(const fb::TransitionRecord& r);

using EdgeKey = std::tuple<uint64_t, uint64_t, uint32_t>;  // from, to, cluster

struct Derived {
  std::map<uint64_t, fb::GainStats> directions;
  std::map<uint64_t, fb::GainStats> strategies;
  std::map<uint64_t, fb::GainStats> verified_strategies;  // over Trusted() records only
  std::map<uint64_t, std::string> examples;  // strategy -> candidate of its last verified success
  std::map<EdgeKey, fb::GainStats> edges;
};

// Folds one record (records must come in id order).
void Accumulate(const fb::TransitionRecord& r, Derived* d);
EdgeKey EdgeOf(const fb::TransitionRecord& r);

}  // namespace htam::memory
