// The transition-attention direction scorer (DESIGN.md, "Selection"): state and history keys,
// attention weights over past transitions, per-direction estimates, exploration, failure
// penalty, precondition masks and the soft bottleneck term. Pure functions of their inputs: deterministic, no I/O.
// Thread-safety: stateless; safe for concurrent use.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/memory/memory.h"

namespace htam::memory {

// Transition key layout: [state features | position-weighted history].
inline constexpr int kStateDim = 32;
inline constexpr int kHistoryDim = 16;
inline constexpr int kKeyDim = kStateDim + kHistoryDim;

// Everything the policy knows about "now".
struct PolicyState {
  uint64_t session_id = 0;
  std::string category;
  double log_size = 0;   // log10 of the bytes moved
  double intensity = 0;  // FLOPs per byte
  fb::Bottleneck bottleneck = fb::Bottleneck::Unknown;
  double speedup = 1;  // current best over the baseline
  uint32_t step = 0;
  std::string backend, arch;
  std::vector<uint64_t> history;            // directions of earlier steps, oldest first
  std::vector<fb::OutcomeStatus> outcomes;  // their outcomes
  std::vector<double> gains;                // their log gains (0 when not Ok)
  std::vector<uint32_t> path_steps;         // steps that raised the session best, oldest first
  // Strategies this session applied: one entry per (step, strategy credited by that step).
  struct Tried {
    uint64_t strategy_id = 0;
    uint32_t step = 0;
    fb::OutcomeStatus status = fb::OutcomeStatus::Ok;
    double gain = 0;           // log gain of the step (0 when not Ok)
    bool passed_over = false;  // advised at `step` and passed over: it did not fit the kernel
  };
  std::vector<Tried> tried;
};

// The steps that made the current kernel (each raised the session best): path_steps, plus any
// step whose outcome and gain show a success (so a state built from outcomes and gains alone
// works too); ascending. The last one is where the current kernel was made.
std::vector<uint32_t> ImprovingSteps(const PolicyState& s);

// Strategies this session tried without success, with how much that counts against advising
// them again: a try on the current kernel (after its last improvement) that failed or was no
// faster counts 1 (several entries of one step count once), a try on an earlier kernel 0.5 (the
// kernel it did not help is gone). A strategy whose last try improved the kernel counts 0 (it may
// have further settings to try). Sorted by strategy id.
std::vector<std::pair<uint64_t, double>> RetryCounts(const PolicyState& s);

// Strategies this session passed over (Tried::passed_over: advised, and the step applied what
// was ranked below them, or nothing), with how much that says they do not fit the kernel: each
// step that passed one over on the current kernel counts 1, on an earlier kernel 0.5 (another
// kernel may have a place for it). Sorted by strategy id.
std::vector<std::pair<uint64_t, double>> PassedOverCounts(const PolicyState& s);

// The L2-normalized key of a state and its history (what the transition index stores).
std::vector<float> TransitionKey(const PolicyState& s, const MemoryOptions& o);
// Cosine similarity of the state parts of two keys.
double StateSimilarity(const float* a, const float* b);
// Position-weighted agreement of two histories, aligned at their ends: the last step weighs 1,
// the one before `decay`, ...; 1 = same recent path, 0 = nothing in common. Two empty histories
// agree fully (both are session starts).
double HistoryAgreement(const std::vector<uint64_t>& mine, const std::vector<uint64_t>& theirs,
                        double decay, int length);
// Weight of experience gathered on `theirs` for a session on `mine`; *cross set when different.
double BackendFactor(std::string_view mine, std::string_view theirs, const MemoryOptions& o,
                     bool* cross);
// "sm_90" >= "sm_80"; families differ ("gfx90a" vs "sm_80") -> *comparable = false.
bool ArchAtLeast(std::string_view arch, std::string_view min_arch, bool* comparable);
// True when the step counts as a success: compiled, verified and faster than before.
bool IsSuccess(fb::OutcomeStatus status, double gain);
// True for the outcomes the failure penalty and statistics count as the candidate's failure.
bool IsFailure(fb::OutcomeStatus status);

// One attended past transition.
struct Neighbor {
  uint64_t transition_id = 0;
  uint64_t session_id = 0;
  double state_similarity = 0;
  double history_agreement = 0;
  double backend_factor = 1;
  bool cross_backend = false;
  double weight = 0;  // attention weight (unnormalized, in (0, 1])
  // Trust: evaluated by htamd's gate (verified), reported by a vouched client (vouched), or
  // neither (client-reported: weighed apart). trusted = verified || vouched.
  bool verified = true, vouched = false;
  bool trusted() const { return verified || vouched; }
  bool no_change = false;  // Ok inside the timing spread: gain 0, neither success nor failure
  uint32_t client = 0;     // interned client of its session (0: unknown); bounds per client
  uint64_t direction_id = 0;
  fb::OutcomeStatus status = fb::OutcomeStatus::Ok;
  double gain = 0;  // log(after / before) when Ok, else 0
  // What the step enabled: log(the best speedup of its session within continuation_horizon later
  // steps / its own speedup after), >= 0; 0 for a step that did not succeed (TransitionTable).
  double future_gain = 0;
  std::string backend;
  std::vector<uint64_t> strategy_ids;
  uint64_t learned_strategy_id = 0;
  // Advised before the step and passed over (TransitionRecord::passed_over_ids).
  std::vector<uint64_t> passed_over_ids;
};

// A successful neighbour's gain with what it enabled: gain + continuation_weight x future_gain.
double EnabledGain(const Neighbor& n, const MemoryOptions& o);

// Sets weight = backend_factor * exp((sim - 1) / T), sim = (1-h) state + h history, times
// unverified_weight for an untrusted step; clips each gain to +-max_step_log_gain; then scales
// the weights of each session's client-reported steps down so that they sum to at most
// max_session_weight, and those of each client's (Neighbor::client, when known) to at most
// max_client_weight. So no client-reported record, session or client moves an estimate with
// prior pseudo-count m by more than cap x max_step_log_gain / (cap + m) in expected log gain
// (and, without unverified_can_promote, never up); a verified record, measured by htamd's gate,
// by at most its clipped gain (docs/memory.md, "Trust").
void WeighNeighbors(std::vector<Neighbor>* neighbors, const MemoryOptions& o);

struct PolicyResult {
  std::vector<fb::DirectionScoreT> scores;  // best first; masked ones after every unmasked one
  size_t chosen = 0;                        // index into scores (0 unless everything was masked)
  std::string why;
  bool from_priors = false;  // no attended experience: priors decided
  // Attended client-reported steps and their weight; directions whose score they would have
  // raised and were held to the verified estimate (memory.unverified_can_promote false).
  int unverified = 0;
  double unverified_weight = 0;
  int held = 0;
  int learned = 0;  // directions whose estimate the learned scorer blended into
};

// The learned scorer's estimate for a direction in this state (scorer.h).
struct LearnedEstimate {
  double p_success = 0, expected_gain = 0;
  double records = 0;  // its training records of the direction
  std::vector<std::pair<std::string, double>> top;  // largest feature contributions to the gain
};

// With `learned` (memory.scorer, once the scorer is trained on scorer_min_records), each
// direction's p(success) and expected gain are blended with the scorer's: share c =
// scorer_weight x n / (n + scorer_confidence), n its training records of the direction.
PolicyResult ScoreDirections(const std::vector<fb::DirectionT>& directions,
                             const std::vector<Neighbor>& neighbors, const PolicyState& state,
                             const MemoryOptions& o,
                             const std::map<uint64_t, LearnedEstimate>* learned = nullptr);

// True when a direction or strategy with these targets fits a kernel of this class: no
// targets, an Unknown class, or the class among the targets (memory.bottleneck_mask).
bool TargetsFit(const std::vector<fb::Bottleneck>& targets, fb::Bottleneck bottleneck);

// Why a direction or strategy does not apply here ("" = it applies).
std::string MaskReason(const std::vector<std::string>& backends, std::string_view min_arch,
                       const std::vector<fb::Bottleneck>& targets, const PolicyState& state);

}  // namespace htam::memory
