// Transition attention: keys, attention weights and the direction score (see docs/memory.md).
#include "daemon/memory/policy.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "base/hash.h"

namespace htam::memory {
namespace {

uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

// Soft one-hot of x over evenly spaced centers (Gaussian bins): close values share mass.
void SoftBins(float* out, int bins, double x, double lo, double hi) {
  double step = (hi - lo) / (bins - 1);
  x = std::clamp(x, lo, hi);
  for (int i = 0; i < bins; ++i) {
    double d = (x - (lo + i * step)) / step;
    out[i] = static_cast<float>(std::exp(-0.5 * d * d * 2.0));
  }
}

void Scale(float* v, int n, double weight) {
  double norm = 0;
  for (int i = 0; i < n; ++i) norm += double(v[i]) * v[i];
  if (norm <= 0) return;
  double f = weight / std::sqrt(norm);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(v[i] * f);
}

const char* BottleneckName(fb::Bottleneck b) {
  return fb::EnumNameBottleneck(b);
}

// Appends printf-formatted a to out (no temporary string).
// fmt "%.Nf" and "%+.Nf" (one digit N) go through std::to_chars, which writes printf's digits
// without parsing the format or reading the locale; other formats, and values it cannot fit,
// through snprintf.
void AppendF(std::string* out, const char* fmt, double a) {
  char buf[64];
  const bool plus = fmt[0] == '%' && fmt[1] == '+';
  const char* f = fmt + (plus ? 2 : 1);
  if (fmt[0] == '%' && f[0] == '.' && f[1] >= '0' && f[1] <= '9' && f[2] == 'f' && f[3] == 0 &&
      std::isfinite(a)) {
    char* p = buf;
    if (plus && !std::signbit(a)) *p++ = '+';
    auto r = std::to_chars(p, buf + sizeof buf, a, std::chars_format::fixed, f[1] - '0');
    if (r.ec == std::errc()) {
      out->append(buf, r.ptr);
      return;
    }
  }
  int n = std::snprintf(buf, sizeof buf, fmt, a);
  if (n > 0) out->append(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
}

}  // namespace

std::vector<uint32_t> ImprovingSteps(const PolicyState& s) {
  std::vector<uint32_t> steps;
  for (uint32_t i : s.path_steps)
    if (i < s.history.size()) steps.push_back(i);
  for (size_t i = 0; i < s.history.size() && i < s.outcomes.size() && i < s.gains.size(); ++i)
    if (IsSuccess(s.outcomes[i], s.gains[i])) steps.push_back(static_cast<uint32_t>(i));
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

std::vector<std::pair<uint64_t, double>> RetryCounts(const PolicyState& s) {
  const std::vector<uint32_t> improving = ImprovingSteps(s);
  const int64_t last_improvement = improving.empty() ? -1 : static_cast<int64_t>(improving.back());
  std::vector<PolicyState::Tried> tries = s.tried;
  std::stable_sort(tries.begin(), tries.end(), [](const auto& a, const auto& b) {
    return a.strategy_id != b.strategy_id ? a.strategy_id < b.strategy_id : a.step < b.step;
  });
  std::vector<std::pair<uint64_t, double>> out;
  for (size_t i = 0; i < tries.size();) {
    size_t j = i;
    double count = 0;
    for (; j < tries.size() && tries[j].strategy_id == tries[i].strategy_id; ++j) {
      const auto& t = tries[j];
      if (j > i && tries[j - 1].step == t.step) continue;  // one step counts once
      if (IsSuccess(t.status, t.gain))
        count = 0;  // it helped: what came before no longer counts against it
      else if (t.status == fb::OutcomeStatus::Ok || IsFailure(t.status))
        count += static_cast<int64_t>(t.step) > last_improvement ? 1.0 : 0.5;
    }
    if (count > 0) out.emplace_back(tries[i].strategy_id, count);
    i = j;
  }
  return out;
}

std::vector<std::pair<uint64_t, double>> PassedOverCounts(const PolicyState& s) {
  const std::vector<uint32_t> improving = ImprovingSteps(s);
  const int64_t last_improvement = improving.empty() ? -1 : static_cast<int64_t>(improving.back());
  std::vector<std::pair<uint64_t, uint32_t>> passed;  // (strategy, step)
  for (const auto& t : s.tried)
    if (t.passed_over) passed.emplace_back(t.strategy_id, t.step);
  std::sort(passed.begin(), passed.end());
  passed.erase(std::unique(passed.begin(), passed.end()), passed.end());
  std::vector<std::pair<uint64_t, double>> out;
  for (const auto& [id, step] : passed) {
    double c = static_cast<int64_t>(step) > last_improvement ? 1.0 : 0.5;
    if (!out.empty() && out.back().first == id)
      out.back().second += c;
    else
      out.emplace_back(id, c);
  }
  return out;
}

std::vector<float> TransitionKey(const PolicyState& s, const MemoryOptions& o) {
  std::vector<float> k(kKeyDim, 0.0f);
  float* p = k.data();
  // [0,8) category, [8,13) bottleneck, [13,18) size, [18,23) intensity, [23,27) speedup,
  // [27,31) step, [31] bias: each group unit-norm times its weight.
  if (!s.category.empty()) p[IndexKey64(s.category) % 8] = 1.0f;
  Scale(p, 8, 1.0);
  p[8 + std::clamp(static_cast<int>(s.bottleneck), 0, 4)] = 1.0f;
  Scale(p + 8, 5, 1.0);
  SoftBins(p + 13, 5, s.log_size, 3, 11);
  Scale(p + 13, 5, 0.6);
  SoftBins(p + 18, 5, std::log2(1.0 + std::max(0.0, s.intensity)), 0, 8);
  Scale(p + 18, 5, 0.6);
  SoftBins(p + 23, 4, std::log(std::max(1e-3, s.speedup)), -0.5, 2.0);
  Scale(p + 23, 4, 0.5);
  SoftBins(p + 27, 4, std::min<double>(s.step, 12), 0, 12);
  Scale(p + 27, 4, 0.3);
  p[31] = 0.3f;
  // History: each recent direction adds its position weight at a hashed slot.
  float* h = p + kStateDim;
  double w = 1.0;
  int n = static_cast<int>(s.history.size());
  for (int i = n - 1; i >= 0 && n - i <= o.history_length; --i, w *= o.history_decay)
    h[Mix(s.history[i]) % kHistoryDim] += static_cast<float>(w);
  if (n == 0) h[0] = 1.0f;  // "session start" is a history of its own
  Scale(h, kHistoryDim, std::sqrt(o.history_weight / std::max(1e-9, 1 - o.history_weight)) * 2.0);
  Scale(p, kKeyDim, 1.0);
  return k;
}

double StateSimilarity(const float* a, const float* b) {
  double dot = 0, na = 0, nb = 0;
  for (int i = 0; i < kStateDim; ++i) {
    dot += double(a[i]) * b[i];
    na += double(a[i]) * a[i];
    nb += double(b[i]) * b[i];
  }
  if (na <= 0 || nb <= 0) return 0;
  return dot / std::sqrt(na * nb);
}

double HistoryAgreement(const std::vector<uint64_t>& mine, const std::vector<uint64_t>& theirs,
                        double decay, int length) {
  if (mine.empty() && theirs.empty()) return 1.0;
  double num = 0, den = 0, w = 1.0;
  for (int j = 1; j <= length; ++j, w *= decay) {
    bool have_a = static_cast<int>(mine.size()) >= j, have_b = static_cast<int>(theirs.size()) >= j;
    if (!have_a && !have_b) break;
    den += w;
    if (have_a && have_b && mine[mine.size() - j] == theirs[theirs.size() - j]) num += w;
  }
  return den > 0 ? num / den : 0.0;
}

double BackendFactor(std::string_view mine, std::string_view theirs, const MemoryOptions& o,
                     bool* cross) {
  *cross = mine != theirs && !mine.empty() && !theirs.empty();
  if (!*cross) return 1.0;
  auto gpu = [](std::string_view b) { return b == "cuda" || b == "hip"; };
  if (gpu(mine) && gpu(theirs)) return o.cross_backend_discount;
  return o.cpu_backend_discount;
}

bool ArchAtLeast(std::string_view arch, std::string_view min_arch, bool* comparable) {
  auto split = [](std::string_view a, std::string* family, long* number) {
    size_t i = 0;
    while (i < a.size() && !std::isdigit(static_cast<unsigned char>(a[i]))) ++i;
    *family = std::string(a.substr(0, i));
    *number = 0;
    std::string digits;
    for (size_t j = i; j < a.size() && std::isalnum(static_cast<unsigned char>(a[j])); ++j)
      digits.push_back(a[j]);
    // gfx90a: hexadecimal stepping; sm_90a: a trailing letter is a variant of sm_90.
    if (*family == "gfx")
      *number = std::strtol(digits.c_str(), nullptr, 16);
    else
      *number = std::strtol(digits.c_str(), nullptr, 10);
  };
  std::string fa, fm;
  long na, nm;
  split(arch, &fa, &na);
  split(min_arch, &fm, &nm);
  *comparable = !fa.empty() && fa == fm;
  return !*comparable || na >= nm;
}

double EnabledGain(const Neighbor& n, const MemoryOptions& o) {
  return n.gain + o.continuation_weight * n.future_gain;
}

bool IsSuccess(fb::OutcomeStatus status, double gain) {
  return status == fb::OutcomeStatus::Ok && gain > 1e-9;
}

bool IsFailure(fb::OutcomeStatus status) {
  return status != fb::OutcomeStatus::Ok && status != fb::OutcomeStatus::InfraError &&
         status != fb::OutcomeStatus::Unverified;
}

namespace {
// Scales the weights of each group (by key) of client-reported steps down so that each group's
// sum is at most cap (cap <= 0: no bound).
template <typename Key>
void CapGroups(std::vector<Neighbor>* neighbors, Key key, double cap) {
  if (!(cap > 0)) return;
  std::map<uint64_t, double> sum;
  for (const Neighbor& n : *neighbors)
    if (key(n) && !n.trusted()) sum[key(n)] += n.weight;
  for (Neighbor& n : *neighbors) {
    if (!key(n) || n.trusted()) continue;
    double s = sum[key(n)];
    if (s > cap) n.weight *= cap / s;
  }
}
}  // namespace

void WeighNeighbors(std::vector<Neighbor>* neighbors, const MemoryOptions& o) {
  double t = std::max(1e-3, o.attention_temperature);
  const double clip = std::max(0.0, o.max_step_log_gain);
  for (Neighbor& n : *neighbors) {
    double sim =
        (1 - o.history_weight) * n.state_similarity + o.history_weight * n.history_agreement;
    n.weight = n.backend_factor * std::exp((std::min(1.0, sim) - 1.0) / t);
    if (!n.trusted()) n.weight *= std::max(0.0, o.unverified_weight);
    n.gain = std::clamp(n.gain, -clip, clip);
    n.future_gain = std::clamp(n.future_gain, 0.0, clip);
  }
  CapGroups(neighbors, [](const Neighbor& n) { return n.session_id; }, o.max_session_weight);
  CapGroups(neighbors, [](const Neighbor& n) { return uint64_t{n.client}; }, o.max_client_weight);
}

bool TargetsFit(const std::vector<fb::Bottleneck>& targets, fb::Bottleneck bottleneck) {
  return targets.empty() || bottleneck == fb::Bottleneck::Unknown ||
         std::find(targets.begin(), targets.end(), bottleneck) != targets.end();
}

std::string MaskReason(const std::vector<std::string>& backends, std::string_view min_arch,
                       const std::vector<fb::Bottleneck>& targets, const PolicyState& s) {
  if (!backends.empty() && !s.backend.empty() &&
      std::find(backends.begin(), backends.end(), s.backend) == backends.end())
    return "not applicable to backend " + s.backend;
  if (!min_arch.empty() && !s.arch.empty()) {
    bool comparable = false;
    if (!ArchAtLeast(s.arch, min_arch, &comparable))
      return "needs " + std::string(min_arch) + ", session is on " + s.arch;
  }
  if (!TargetsFit(targets, s.bottleneck)) {
    std::string t;
    for (auto b : targets) t += (t.empty() ? "" : "/") + std::string(BottleneckName(b));
    return "targets " + t + "-bound kernels; state is " + BottleneckName(s.bottleneck) + "-bound";
  }
  return "";
}

namespace {

// What the attended steps say about one direction: their weight, the weight of those that
// succeeded and their weighted gain, how many and how many from another backend.
struct Acc {
  double n = 0, succ = 0, gain = 0;
  int raw = 0, cross = 0;
};

// The attended steps by direction: every one that counts into `acc` (weights summed in
// `total`), the verified and vouched ones also into `trusted` (`trusted_total`); the unverified
// ones counted in `r`.
void Accumulate(const std::vector<Neighbor>& neighbors, const MemoryOptions& o,
                std::map<uint64_t, Acc>* acc, std::map<uint64_t, Acc>* trusted, double* total,
                double* trusted_total, PolicyResult* r) {
  for (const Neighbor& nb : neighbors) {
    if (!nb.trusted()) {
      r->unverified++;
      r->unverified_weight += nb.weight;
      // Without unverified_can_promote only a reported failure counts, as a warning: a claimed
      // success or no change says nothing until htamd measured it.
      if (!o.unverified_can_promote && !IsFailure(nb.status)) continue;
    }
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1 && !nb.trusted()) break;
      Acc& a = (pass == 0 ? *acc : *trusted)[nb.direction_id];
      a.n += nb.weight;
      if (IsSuccess(nb.status, nb.gain)) {
        a.succ += nb.weight;
        a.gain += nb.weight * EnabledGain(nb, o);
      }
      a.raw++;
      a.cross += nb.cross_backend ? 1 : 0;
      *(pass == 0 ? total : trusted_total) += nb.weight;
    }
  }
}

// Penalty: directions that failed in this session. Attempts on the current kernel (after its
// last improvement) count in full, each one: the kernel they failed on is still the one to
// improve. Older attempts, on a kernel since replaced, count only within the last
// failure_memory steps and weigh less the older they are. A step that was Ok but no faster
// counts half.
std::map<uint64_t, double> RecentFailurePenalty(const PolicyState& s, const MemoryOptions& o) {
  std::map<uint64_t, double> penalty;
  const std::vector<uint32_t> improving = ImprovingSteps(s);
  const int last_improvement = improving.empty() ? -1 : static_cast<int>(improving.back());
  int n = static_cast<int>(s.history.size());
  for (int i = n - 1; i >= 0; --i) {
    bool on_kernel = i > last_improvement;
    int age = n - 1 - i;
    if (!on_kernel && age >= o.failure_memory) break;
    double w = on_kernel ? 1.0 : std::pow(o.history_decay, age);
    bool known = i < static_cast<int>(s.outcomes.size());
    bool failed = known && IsFailure(s.outcomes[i]);
    bool no_gain = known && s.outcomes[i] == fb::OutcomeStatus::Ok &&
                   (on_kernel || (i < static_cast<int>(s.gains.size()) && s.gains[i] <= 1e-9));
    if (failed)
      penalty[s.history[i]] += o.failure_penalty * w;
    else if (no_gain)
      penalty[s.history[i]] += 0.5 * o.failure_penalty * w;
  }
  return penalty;
}

// The why text's part on the learned scorer: in how many directions it was blended (`blended`)
// and what it predicts for the chosen one `c`.
void AppendLearnedWhy(const std::map<uint64_t, LearnedEstimate>& learned, int blended,
                      const fb::DirectionScoreT& c, std::string* why) {
  auto it = learned.find(c.direction_id);
  *why += " Learned scorer blended into " + std::to_string(blended) + " direction(s)";
  if (it != learned.end()) {
    const LearnedEstimate& e = it->second;
    *why += "; for " + c.name + " it predicts p(improve) ";
    AppendF(why, "%.2f", e.p_success);
    *why += ", E[log gain] ";
    AppendF(why, "%.3f", e.expected_gain);
    *why += " from " + std::to_string(static_cast<long long>(e.records)) + " verified records";
    if (!e.top.empty()) {
      *why += " (top contributions:";
      for (const auto& [name, v] : e.top) {
        *why += " " + name + " ";
        AppendF(why, "%+.3f", v);
      }
      *why += ")";
    }
  }
  *why += ".";
}

// The why text's part on masked directions (the first three with their reasons) and on the
// directions that lost bottleneck_penalty (`penalized`, the first three).
void AppendMasksWhy(const std::vector<fb::DirectionScoreT>& scores,
                    const std::vector<std::string>& penalized, const PolicyState& s,
                    const MemoryOptions& o, std::string* why) {
  int masked = 0;
  for (const auto& x : scores) masked += x.masked ? 1 : 0;
  if (masked) {
    *why += " Masked " + std::to_string(masked) + ":";
    int shown = 0;
    for (const auto& x : scores)
      if (x.masked && shown++ < 3) *why += " " + x.name + " (" + x.mask_reason + ");";
  }
  if (!penalized.empty() && o.bottleneck_penalty != 0) {
    *why += " Bottleneck penalty -";
    AppendF(why, "%.3f", o.bottleneck_penalty);
    *why += " (targets exclude " + std::string(BottleneckName(s.bottleneck)) +
            "-bound kernels) on " + std::to_string(penalized.size()) + ":";
    for (size_t i = 0; i < penalized.size() && i < 3; ++i) *why += " " + penalized[i] + ";";
  }
}

// The gain of a success in a direction's prior: prior_gain, or (pooled_direction_prior) what a
// success gained over the attended steps of every direction, so that a direction no similar step
// took is weighed at the gain similar steps measure, not at a configured constant far below it.
double PriorSuccessGain(const std::map<uint64_t, Acc>& by_direction, const MemoryOptions& o) {
  double gain = 0, succ = 0;
  for (const auto& [id, a] : by_direction) {
    gain += a.gain;
    succ += a.succ;
  }
  return o.pooled_direction_prior && succ > 1e-12 ? gain / succ : o.prior_gain;
}

}  // namespace

PolicyResult ScoreDirections(const std::vector<fb::DirectionT>& directions,
                             const std::vector<Neighbor>& neighbors, const PolicyState& s,
                             const MemoryOptions& o,
                             const std::map<uint64_t, LearnedEstimate>* learned) {
  // acc: every attended step; trusted: the verified and vouched ones only. Without
  // unverified_can_promote a direction's score is the lower of the two: client-reported
  // evidence may warn against a direction, never lift it.
  std::map<uint64_t, Acc> acc, trusted;
  double total = 0, trusted_total = 0;
  PolicyResult r;
  Accumulate(neighbors, o, &acc, &trusted, &total, &trusted_total, &r);
  std::map<uint64_t, double> penalty = RecentFailurePenalty(s, o);
  r.from_priors = total <= 1e-12;
  double m = std::max(1e-9, o.prior_strength);
  const double success_gain = PriorSuccessGain(acc, o);
  const double trusted_success_gain = PriorSuccessGain(trusted, o);
  // memory.bottleneck_mask: hard masks by the class (MaskReason reads the targets), soft takes
  // bottleneck_penalty from the score instead (a coarse class must not remove a direction the
  // kernel needs: docs/journal/2026-11-benchmarks-world.md, "Measured bottleneck in the
  // state"), off ignores it.
  const bool hard_mask = o.bottleneck_mask == "hard";
  const bool soft_mask = o.bottleneck_mask == "soft";
  const std::vector<fb::Bottleneck> no_targets;
  std::vector<std::string> penalized;  // soft: directions that lost bottleneck_penalty
  for (const fb::DirectionT& d : directions) {
    fb::DirectionScoreT sc;
    sc.direction_id = d.id;
    sc.name = d.name;
    double prior = std::clamp<double>(d.prior, 0.0, 1.0);
    auto estimate = [&](const Acc& a, double n_total, double prior_gain, fb::DirectionScoreT* out) {
      out->effective_count = a.n;
      out->p_success = (a.succ + m * prior) / (a.n + m);
      out->expected_gain = (a.gain + m * prior * prior_gain) / (a.n + m);
      out->exploration =
          n_total > 0 ? o.exploration * std::sqrt(std::log1p(n_total) / (1.0 + a.n)) : 0.0;
    };
    estimate(acc.count(d.id) ? acc[d.id] : Acc{}, total, success_gain, &sc);
    if (!o.unverified_can_promote && r.unverified > 0) {
      // The lower estimate of the two; exploration from the verified counts alone (reports do
      // not say a direction was explored, nor that the others were not).
      fb::DirectionScoreT v;
      estimate(trusted.count(d.id) ? trusted[d.id] : Acc{}, trusted_total, trusted_success_gain,
               &v);
      sc.exploration = v.exploration;
      if (v.expected_gain < sc.expected_gain) {
        sc.effective_count = v.effective_count;
        sc.p_success = v.p_success;
        sc.expected_gain = v.expected_gain;
        ++r.held;
      }
    }
    if (learned) {
      auto it = learned->find(d.id);
      if (it != learned->end()) {
        const LearnedEstimate& e = it->second;
        const double c = std::clamp(o.scorer_weight, 0.0, 1.0) * e.records /
                         (e.records + std::max(1e-9, o.scorer_confidence));
        sc.p_success = (1 - c) * sc.p_success + c * e.p_success;
        sc.expected_gain = (1 - c) * sc.expected_gain + c * e.expected_gain;
        ++r.learned;
      }
    }
    sc.penalty = penalty.count(d.id) ? penalty[d.id] : 0.0;
    // Seeded jitter far below any real difference: breaks exact ties reproducibly.
    uint64_t j = Mix(o.policy_seed ^ Mix(s.session_id ^ Mix(s.step ^ Mix(d.id))));
    double jitter = static_cast<double>(j >> 11) / static_cast<double>(1ull << 53) * 1e-9;
    sc.score = sc.expected_gain + sc.exploration - sc.penalty + jitter;
    if (soft_mask && !TargetsFit(d.targets, s.bottleneck)) {
      sc.score -= o.bottleneck_penalty;
      penalized.push_back(d.name);
    }
    sc.mask_reason = MaskReason(d.backends, d.min_arch, hard_mask ? d.targets : no_targets, s);
    sc.masked = !sc.mask_reason.empty();
    r.scores.push_back(std::move(sc));
  }
  bool any_open = std::any_of(r.scores.begin(), r.scores.end(), [](auto& x) { return !x.masked; });
  if (!any_open)  // every precondition failed: rank them all rather than answer nothing
    for (auto& x : r.scores) x.masked = false;
  std::stable_sort(r.scores.begin(), r.scores.end(), [](const auto& a, const auto& b) {
    if (a.masked != b.masked) return !a.masked;
    if (a.score != b.score) return a.score > b.score;
    return a.direction_id < b.direction_id;
  });
  if (r.scores.empty()) {
    r.why = "no directions in the store";
    return r;
  }
  // Why: the chosen direction's numbers, what they rest on, the runner-up and the masks.
  const auto& c = r.scores[0];
  std::string& why = r.why;
  why.reserve(384);
  why += "chose ";
  why += c.name;
  why += " (score ";
  AppendF(&why, "%.3f", c.score);
  why += ": E[log gain] ";
  AppendF(&why, "%.3f", c.expected_gain);
  why += ", p(success) ";
  AppendF(&why, "%.2f", c.p_success);
  if (c.exploration > 0) {
    why += ", exploration +";
    AppendF(&why, "%.3f", c.exploration);
  }
  if (c.penalty > 0) {
    why += ", recent-failure penalty -";
    AppendF(&why, "%.3f", c.penalty);
  }
  why += "). ";
  if (r.from_priors) {
    why += "No similar past transition: the seed priors decide.";
  } else {
    const Acc a = acc.count(c.direction_id) ? acc[c.direction_id] : Acc{};
    why +=
        "Attended " + std::to_string(neighbors.size()) + " similar transitions (effective count ";
    AppendF(&why, "%.2f", total);
    why += "); " + std::to_string(a.raw) + " took this direction (weight ";
    AppendF(&why, "%.2f", a.n);
    why += ")";
    if (a.cross) why += ", " + std::to_string(a.cross) + " from another backend (discounted)";
    why += ".";
    if (r.unverified) {
      why += " " + std::to_string(r.unverified) + " attended step(s) client-reported, unverified (weight ";
      AppendF(&why, "%.2f", r.unverified_weight);
      why += ")";
      if (r.held)
        why += "; " + std::to_string(r.held) +
               " direction(s) held to their verified estimate (unverified evidence does not promote)";
      why += ".";
    }
  }
  if (learned) AppendLearnedWhy(*learned, r.learned, c, &why);
  if (r.scores.size() > 1 && !r.scores[1].masked) {
    why += " Runner-up " + r.scores[1].name + " ";
    AppendF(&why, "%.3f", r.scores[1].score);
    why += ".";
  }
  AppendMasksWhy(r.scores, penalized, s, o, &why);
  if (!any_open) why += " Every direction's preconditions failed; ranked without masks.";
  return r;
}

}  // namespace htam::memory
