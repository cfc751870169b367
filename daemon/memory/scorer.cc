// The learned direction scorer (see scorer.h and docs/memory.md, "Learned scorer").
#include "daemon/memory/scorer.h"

#include <algorithm>
#include <cmath>

#include "daemon/memory/stats.h"

namespace htam::memory {
namespace {
// The key is unit-norm over 48 entries (a class's one-hot entry is about 0.5): scaled so that its
// entries are of the order of the bias.
constexpr double kScale = 3.0;
}  // namespace

std::string ScorerFeatureName(int i) {
  // The transition key's layout (policy.cc TransitionKey).
  if (i < 0 || i >= Scorer::kFeatures) return "?";
  if (i < 8) return "category#" + std::to_string(i);
  if (i < 13) {
    const int b = i - 8;
    const char* name = fb::EnumNameBottleneck(static_cast<fb::Bottleneck>(b));
    return std::string("bottleneck=") + (name && *name ? name : std::to_string(b).c_str());
  }
  if (i < 18) return "size-bin" + std::to_string(i - 13);
  if (i < 23) return "intensity-bin" + std::to_string(i - 18);
  if (i < 27) return "speedup-bin" + std::to_string(i - 23);
  if (i < 31) return "step-bin" + std::to_string(i - 27);
  if (i == 31) return "state-bias";
  if (i < kKeyDim) return "history#" + std::to_string(i - kStateDim);
  return "bias";
}

bool Scorer::MaybeTrain(const float* key, uint64_t direction_id, fb::OutcomeStatus status,
                        double gain, bool trusted, const MemoryOptions& o) {
  if (!trusted || !key || !Counts(status) || status == fb::OutcomeStatus::Unverified) return false;
  const double clip = std::max(0.0, o.max_step_log_gain);
  Train(key, direction_id, IsSuccess(status, gain), std::clamp(gain, -clip, clip), o);
  return true;
}

void Scorer::Train(const float* key, uint64_t direction_id, bool improved, double gain,
                   const MemoryOptions& o) {
  Weights& w = weights_[direction_id];
  // A constant step size: the weights follow recent experience as well as old.
  w.n += 1;
  double norm = 1.0;  // the bias
  for (int i = 0; i < kKeyDim; ++i) norm += kScale * kScale * double(key[i]) * key[i];
  const double lr = std::max(0.0, o.scorer_learning_rate) / (1.0 + norm);
  const double l2 = std::max(0.0, o.scorer_l2);
  double zp = 0, zg = 0;
  for (int i = 0; i < kKeyDim; ++i) {
    zp += double(w.p[i]) * kScale * key[i];
    zg += double(w.g[i]) * kScale * key[i];
  }
  zp += w.p[kKeyDim];
  zg += w.g[kKeyDim];
  const double p = 1.0 / (1.0 + std::exp(-std::clamp(zp, -30.0, 30.0)));
  const double ep = (improved ? 1.0 : 0.0) - p;
  const double eg = (improved ? std::max(0.0, gain) : 0.0) - zg;
  for (int i = 0; i <= kKeyDim; ++i) {
    const double x = i < kKeyDim ? kScale * key[i] : 1.0;
    const double decay = i < kKeyDim ? l2 : 0.0;  // the bias is not regularised
    w.p[i] = static_cast<float>(w.p[i] + lr * (ep * x - decay * w.p[i]));
    w.g[i] = static_cast<float>(w.g[i] + lr * (eg * x - decay * w.g[i]));
  }
  ++records_;
}

bool Scorer::Predict(const float* key, uint64_t direction_id, Prediction* out, int top) const {
  auto it = weights_.find(direction_id);
  if (it == weights_.end() || it->second.n <= 0) return false;
  const Weights& w = it->second;
  double zp = w.p[kKeyDim], zg = w.g[kKeyDim];
  std::vector<std::pair<int, double>> contrib;
  if (top > 0) contrib.emplace_back(kKeyDim, w.g[kKeyDim]);
  for (int i = 0; i < kKeyDim; ++i) {
    zp += double(w.p[i]) * kScale * key[i];
    double c = double(w.g[i]) * kScale * key[i];
    zg += c;
    if (top > 0 && key[i] != 0) contrib.emplace_back(i, c);
  }
  out->p_improve = 1.0 / (1.0 + std::exp(-std::clamp(zp, -30.0, 30.0)));
  out->expected_gain = zg;
  out->records = w.n;
  out->top.clear();
  if (top > 0) {
    std::sort(contrib.begin(), contrib.end(), [](const auto& a, const auto& b) {
      return std::abs(a.second) > std::abs(b.second);
    });
    for (size_t i = 0; i < contrib.size() && i < static_cast<size_t>(top); ++i)
      out->top.emplace_back(ScorerFeatureName(contrib[i].first), contrib[i].second);
  }
  return true;
}

}  // namespace htam::memory
