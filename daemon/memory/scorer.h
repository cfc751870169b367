// The learned direction scorer (docs/memory.md, "Learned scorer"): from the transition records
// that count (verified by htamd's gate, or vouched), a per-direction logistic model of P(the step
// improves the kernel) and a linear model of its expected log gain (0 for a step that did not
// improve it), both over the transition key (state features and recent directions, policy.h)
// plus a bias, L2-regularised and fitted by one SGD step per record in id order.
// It is derived from the records like the transition index: trained as records are applied and
// rebuilt from the index and the transition table at open, so the same records give the same
// weights after a restart. Unverified (client-reported) records never train it.
// Thread-safety: none; Memory guards it with the index mutex.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/memory/memory.h"
#include "daemon/memory/policy.h"

namespace htam::memory {

class Scorer {
 public:
  static constexpr int kFeatures = kKeyDim + 1;  // the key and a bias

  // One training example: a record that counts (trusted, not an infrastructure error).
  // improved: Ok and faster beyond the timing spread; gain: its log gain (clipped by the caller).
  void Train(const float* key, uint64_t direction_id, bool improved, double gain,
             const MemoryOptions& o);
  // Trains on a record when it counts (trusted; status neither InfraError nor Unverified);
  // returns whether it did.
  bool MaybeTrain(const float* key, uint64_t direction_id, fb::OutcomeStatus status, double gain,
                  bool trusted, const MemoryOptions& o);

  struct Prediction {
    double p_improve = 0, expected_gain = 0;
    double records = 0;  // training records of this direction
    // The largest feature contributions to the gain estimate: (feature name, contribution).
    std::vector<std::pair<std::string, double>> top;
  };
  // False when the direction has no training record.
  bool Predict(const float* key, uint64_t direction_id, Prediction* out, int top = 0) const;

  // Records trained on in all.
  uint64_t records() const { return records_; }
  // True when the decision should use it: enabled and trained on at least scorer_min_records.
  bool Active(const MemoryOptions& o) const {
    return o.scorer && records_ >= static_cast<uint64_t>(std::max(0, o.scorer_min_records));
  }
  void Clear() {
    weights_.clear();
    records_ = 0;
  }

 private:
  struct Weights {
    float p[kFeatures] = {};
    float g[kFeatures] = {};
    double n = 0;
  };
  std::unordered_map<uint64_t, Weights> weights_;
  uint64_t records_ = 0;
};

// Name of feature i of the scorer's input (the transition key's layout, policy.cc).
std::string ScorerFeatureName(int i);

}  // namespace htam::memory
