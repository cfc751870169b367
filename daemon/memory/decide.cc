// NextStep: attend over similar past transitions, score the directions, retrieve strategies
// under the chosen one, and explain the choice.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "daemon/memory/codec.h"
#include "daemon/memory/memory_impl.h"
#include "daemon/memory/session_steps.h"
#include "daemon/memory/stats.h"

namespace htam::memory {
namespace {
constexpr size_t kMaxEvidence = 16;     // attended transitions listed in a full answer
constexpr size_t kCompactEvidence = 4;  // ... in the compact answer (message size)

// MaskReason(...).empty() of a stored strategy, read from its bytes without copies.
// use_bottleneck false: the targets are not checked (memory.bottleneck_mask soft or off).
bool PreconditionsHold(const fb::Strategy& s, const PolicyState& ps, bool use_bottleneck) {
  if (s.backends() && s.backends()->size() > 0 && !ps.backend.empty()) {
    bool listed = false;
    for (auto b : *s.backends()) listed = listed || b->string_view() == ps.backend;
    if (!listed) return false;
  }
  if (s.min_arch() && s.min_arch()->size() > 0 && !ps.arch.empty()) {
    bool comparable = false;
    if (!ArchAtLeast(ps.arch, s.min_arch()->string_view(), &comparable)) return false;
  }
  if (use_bottleneck && s.targets() && s.targets()->size() > 0 &&
      ps.bottleneck != fb::Bottleneck::Unknown) {
    bool listed = false;
    for (auto tg : *s.targets())
      listed = listed || static_cast<fb::Bottleneck>(tg) == ps.bottleneck;
    if (!listed) return false;
  }
  return true;
}

// TargetsFit of a stored strategy: no targets, an Unknown class, or the class among them.
bool StrategyTargetsFit(const fb::Strategy& s, fb::Bottleneck bottleneck) {
  if (!s.targets() || s.targets()->size() == 0 || bottleneck == fb::Bottleneck::Unknown)
    return true;
  for (auto tg : *s.targets())
    if (static_cast<fb::Bottleneck>(tg) == bottleneck) return true;
  return false;
}

// "%.2f" of x (std::to_chars writes printf's digits without parsing a format).
std::string Short(double x) {
  char b[32];
  if (std::isfinite(x)) {
    auto r = std::to_chars(b, b + sizeof b, x, std::chars_format::fixed, 2);
    if (r.ec == std::errc()) return std::string(b, r.ptr);
  }
  std::snprintf(b, sizeof b, "%.2f", x);
  return b;
}

// What the attended steps say about strategies: per strategy (by id) the attention-weighted gain
// of the steps that credited it and their weight; per strategy (as recorded: the one a learned
// strategy counts as) the weight of other sessions' steps that passed it over.
struct StrategyEvidence {
  struct Credit {
    uint64_t strategy;
    double wgain, w;
  };
  std::vector<Credit> effect;                        // by strategy
  std::vector<std::pair<uint64_t, double>> passed;   // by strategy
};

// trusted_only: the verified and vouched steps alone. canon (null: none): the strategy a credited
// one counts as (a learned strategy as the one it was learned as), so that both are one piece of
// advice with one body of evidence.
StrategyEvidence GatherStrategyEvidence(const std::vector<Neighbor>& neighbors,
                                        const PolicyState& ps, const MemoryOptions& o,
                                        bool trusted_only,
                                        const std::unordered_map<uint64_t, uint64_t>* canon) {
  using Credit = StrategyEvidence::Credit;
  StrategyEvidence ev;
  // (strategy, w*gain, w) per crediting neighbour, each strategy once per neighbour, in neighbour
  // order; a stable sort by strategy keeps that order, so the sums add in it.
  std::vector<Credit> credits;
  std::vector<uint64_t> credited;
  for (const Neighbor& n : neighbors) {
    if (trusted_only && !n.trusted()) continue;
    // A reported success or no change counts for nothing until measured (PolicyResult rules).
    if (!n.trusted() && !o.unverified_can_promote && !IsFailure(n.status)) continue;
    credited.assign(n.strategy_ids.begin(), n.strategy_ids.end());
    if (n.learned_strategy_id) credited.push_back(n.learned_strategy_id);
    if (canon)
      for (uint64_t& id : credited)
        if (auto it = canon->find(id); it != canon->end()) id = it->second;
    std::sort(credited.begin(), credited.end());
    credited.erase(std::unique(credited.begin(), credited.end()), credited.end());
    for (uint64_t s : credited)
      credits.push_back(
          Credit{s, n.weight * (IsSuccess(n.status, n.gain) ? EnabledGain(n, o) : 0.0), n.weight});
  }
  std::stable_sort(credits.begin(), credits.end(),
                   [](const Credit& a, const Credit& b) { return a.strategy < b.strategy; });
  for (const Credit& c : credits) {
    if (ev.effect.empty() || ev.effect.back().strategy != c.strategy)
      ev.effect.push_back(Credit{c.strategy, 0, 0});
    ev.effect.back().wgain += c.wgain;
    ev.effect.back().w += c.w;
  }
  // Advice that other sessions' steps in similar states passed over (it did not fit such
  // kernels). This session's own steps count through PassedOverCounts instead.
  if (o.strategy_scope == "all" && o.passed_over_weight != 0) {
    auto& p = ev.passed;
    for (const Neighbor& n : neighbors) {
      if (n.session_id == ps.session_id || (trusted_only && !n.trusted())) continue;
      for (uint64_t s : n.passed_over_ids) p.emplace_back(s, n.weight);
    }
    std::stable_sort(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t w = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      if (w && p[w - 1].first == p[i].first)
        p[w - 1].second += p[i].second;
      else
        p[w++] = p[i];
    }
    p.resize(w);
  }
  return ev;
}

double LookUp(const std::vector<std::pair<uint64_t, double>>& v, uint64_t key) {
  auto it = std::lower_bound(v.begin(), v.end(), key,
                             [](const auto& p, uint64_t s) { return p.first < s; });
  return it != v.end() && it->first == key ? it->second : 0.0;
}

// One candidate strategy's numbers in a decision.
struct StrategyNumbers {
  double score = 0, sim = 0, success_rate = 0, mean_gain = 0;
  bool cross = false;
  bool held = false;  // held to its verified estimate (unverified evidence would have raised it)
  size_t source = 0;
  double local_w = 0, retries = 0, passes = 0, passed_w = 0;
  uint64_t key = 0;  // the strategy it counts as (its parent for a learned one)
  uint32_t verified_uses = 0, unverified_uses = 0;
};

struct ScoredStrategy {
  const fb::Strategy* s;  // in the read transaction or the strategy record cache
  StrategyNumbers n;
};

// The re-ranking score of a strategy (docs/memory.md, "Retrieval") from the evidence `ev` and its
// statistics: every record's (`stats`) or the verified ones' (`verified_stats`).
// `pooled`: the mean log gain per use of the strategies offered in this decision (the same view
// of the statistics); none where none of them has a use or memory.pooled_strategy_prior is off.
void ScoreStrategy(const fb::Strategy& s, const PolicyState& ps, double dir_prior, double dir_score,
                   const StrategyEvidence& ev, bool verified_stats, bool all,
                   std::optional<double> pooled, const MemoryOptions& o, StrategyNumbers* x) {
  const double m = std::max(1e-9, o.prior_strength);
  const fb::GainStats zero;
  const fb::GainStats& every = s.stats() ? *s.stats() : zero;
  const fb::GainStats& verified = s.verified_stats() ? *s.verified_stats() : zero;
  const fb::GainStats& gs = verified_stats ? verified : every;
  x->verified_uses = verified.uses();
  x->unverified_uses = every.uses() > verified.uses() ? every.uses() - verified.uses() : 0;
  x->success_rate = (gs.successes() + 1.0) / (gs.uses() + 2.0);
  // What the strategy's record says about its gain anywhere. With a pooled mean, the record is
  // shrunk towards it by prior_strength pseudo-uses, so that a strategy with no use (or a few)
  // starts where the offered strategies' uses average, not at the seed's prior gain, which lies
  // far below what any applied strategy measures: else advice with a record from other kinds of
  // kernels outranks, on its record alone, the advice written for this kind that no similar
  // kernel had a chance to apply yet (docs/memory.md, "Retrieval").
  const double base = pooled ? *pooled : o.prior_gain * dir_prior;
  const double record = pooled      ? (gs.sum_gain() + m * *pooled) / (gs.uses() + m)
                        : gs.uses() ? gs.sum_gain() / gs.uses()
                                    : base;
  // How much that record, measured wherever the strategy was used, counts where no similar step
  // applied it (memory.record_weight): with less, measured advice outranks unmeasured advice only
  // on the evidence of similar states.
  const double rw = std::clamp(o.record_weight, 0.0, 1.0);
  const double global_mean = rw * record + (1.0 - rw) * base;
  // The evidence of the advice it is (its key: a learned strategy's parent) when shared.
  const uint64_t evidence_id = o.shared_evidence && all ? x->key : s.id();
  auto e = std::lower_bound(ev.effect.begin(), ev.effect.end(), evidence_id,
                            [](const StrategyEvidence::Credit& c, uint64_t id) {
                              return c.strategy < id;
                            });
  const bool credited_here = e != ev.effect.end() && e->strategy == evidence_id;
  x->local_w = credited_here ? e->w : 0.0;
  const double local_sum = credited_here ? e->wgain : 0.0;
  x->mean_gain = (local_sum + m * global_mean) / (x->local_w + m);
  std::string_view origin = s.provenance() && s.provenance()->backend()
                                ? s.provenance()->backend()->string_view()
                                : std::string_view();
  double bf = origin.empty() ? 1.0 : BackendFactor(ps.backend, origin, o, &x->cross);
  x->score = x->sim + o.rerank_effect_weight * x->mean_gain * bf + o.rerank_precondition_weight;
  if (o.bottleneck_mask == "soft" && !StrategyTargetsFit(s, ps.bottleneck))
    x->score -= o.bottleneck_penalty;
  if (!all) return;
  x->score += o.direction_weight * dir_score - o.retry_penalty * x->retries -
              o.not_applicable_penalty * x->passes + o.applied_weight * x->local_w / (x->local_w + m);
  x->passed_w = LookUp(ev.passed, x->key);
  x->score -= o.passed_over_weight * x->passed_w /
              (x->passed_w + o.passed_over_applied_weight * x->local_w + m);
}

// Why a strategy of the detailed head is in the list, beyond its statistics (scope all).
std::string StrategyNote(const StrategyNumbers& x, const fb::DirectionT& source,
                         const fb::DirectionT& chosen, double source_score, const MemoryOptions& o) {
  std::string note;
  if (source.id != chosen.id)
    note += "   Direction: " + source.title + " (score " + Short(source_score) + ")\n";
  if (x.local_w > 0)
    note += "   In similar states: attended steps that applied it weigh " + Short(x.local_w) +
            ", gain there shrunk to its record: mean log gain " + Short(x.mean_gain) + "\n";
  if (x.held)
    note += "   Client-reported (unverified) outcomes would rank it higher: held to its verified "
            "evidence\n";
  if (x.passed_w > 0)
    note += "   Passed over in similar states: attended steps of other sessions that did not "
            "apply it weigh " + Short(x.passed_w) + ", ranked lower\n";
  if (x.passes > 0 && o.not_applicable_penalty > 0)
    note += "   Passed over in this session (" + Short(x.passes) +
            " counted): it did not fit the kernel, ranked lower\n";
  if (x.retries > 0)
    note += "   Tried in this session without success (" + Short(x.retries) +
            " counted): ranked lower\n";
  return note;
}

// The answer's entry for a strategy. compact: id, name, title, direction, statistics and scores;
// no description, pattern, preconditions, failure modes, provenance, example or prompt text.
// example_room: bytes of example source the answer may still carry; an example that does not fit
// is left out (the strategy keeps its example_candidate hash).
fb::StrategyHitT MakeHit(Txn& t, const fb::Strategy& s, const StrategyNumbers& x, bool compact,
                         size_t* example_room) {
  fb::StrategyHitT h;
  h.strategy = std::make_unique<fb::StrategyT>();
  if (compact) {  // the few fields, copied from the stored bytes (no unpacking of the rest)
    fb::StrategyT& cs = *h.strategy;
    cs.id = s.id();
    cs.direction_id = s.direction_id();
    if (s.name()) cs.name = s.name()->str();
    if (s.title()) cs.title = s.title()->str();
    if (s.stats()) cs.stats = std::make_unique<fb::GainStats>(*s.stats());
  } else {
    s.UnPackTo(h.strategy.get());
    h.strategy->embedding.clear();  // not needed by clients; keeps messages small
    if (*example_room != std::numeric_limits<size_t>::max()) {  // the compact answer
      h.strategy->provenance.reset();
      h.strategy->created_ns = h.strategy->updated_ns = 0;
    }
  }
  h.score = x.score;
  h.similarity = x.sim;
  h.success_rate = x.success_rate;
  h.mean_gain = x.mean_gain;
  h.precondition_match = true;  // only strategies that apply are offered
  h.cross_backend = x.cross;
  h.verified_uses = x.verified_uses;
  h.unverified_uses = x.unverified_uses;
  if (!h.strategy->example_candidate.empty()) {
    std::string_view cv;
    if (t.Get(Db::kCandidates, h.strategy->example_candidate, &cv).ok()) {
      FbView<fb::Candidate> c(cv);
      if (c && c->source() && c->source()->size() <= *example_room) {
        h.example_source = c->source()->str();
        *example_room -= c->source()->size();
      }
    }
  }
  return h;
}

// The prompt context: what the agent reads. Full (text_in_prompt): the first `detailed` hits
// with their description, pattern, preconditions, known failures and evidence, the rest by name.
// Compact: the detailed head by name with its trust labels and why each ranks where it does;
// the strategies' text, numbers and the tail's names are in the answer's strategy list once,
// not repeated here.
std::string PromptContext(const fb::DirectionT& dir, const std::string& why,
                          const std::vector<fb::StrategyHitT>& hits,
                          const std::vector<std::string>& notes, size_t detailed,
                          bool text_in_prompt) {
  std::string p;
  p.reserve(1024);
  p += "Direction: " + dir.title + " (" + dir.name + ")\n";
  if (text_in_prompt) p += dir.description + "\n" + "Why: " + why + "\n";  // compact: in `why`
  if (!hits.empty())
    p += text_in_prompt ? "Strategies that apply here, best first:\n"
                        : "Strategies that apply here, best first (their text is in the list):\n";
  const size_t head = std::min(hits.size(), detailed);
  for (size_t i = 0; i < hits.size(); ++i) {
    if (i == head) {  // the compact tail: names on one line (full; compact: the list has them)
      if (!text_in_prompt) break;
      p += "Also ranked, by name (the strategy list has their titles):";
      for (size_t j = head; j < hits.size(); ++j)
        p += std::string(j == head ? " " : ", ") + hits[j].strategy->name;
      p += "\n";
      break;
    }
    const fb::StrategyHitT& h = hits[i];
    const fb::StrategyT& s = *h.strategy;
    if (text_in_prompt) {
      p += std::to_string(i + 1) + ". " + s.title + " [" + s.name + "]\n   " + s.description + "\n";
      if (!s.code_pattern.empty()) p += "   Pattern: " + s.code_pattern + "\n";
      if (!s.preconditions.empty()) {
        p += "   Preconditions:";
        for (const auto& x : s.preconditions) p += " " + x + ";";
        p += "\n";
      }
      if (!s.failure_modes.empty()) {
        p += "   Known failures:";
        for (const auto& x : s.failure_modes) p += " " + x + ";";
        p += "\n";
      }
    } else {
      p += std::to_string(i + 1) + ". " + s.name + "\n";
    }
    const fb::GainStats* gs = s.stats.get();
    if (gs && gs->uses() && !text_in_prompt) {  // the numbers are the hit's; the labels here
      p += "   Evidence: " + std::to_string(h.verified_uses) + " verified uses";
      if (h.unverified_uses)
        p += " (+" + std::to_string(h.unverified_uses) + " client-reported, unverified)";
      p += std::string(h.cross_backend ? " (learned on another backend)" : "") + "\n";
    } else if (gs && gs->uses()) {
      p += "   Evidence: " + std::to_string(h.verified_uses) + " verified uses";
      if (h.unverified_uses)
        p += " (+" + std::to_string(h.unverified_uses) + " client-reported, unverified)";
      p += ", success rate " + Short(h.success_rate) + ", mean log gain " + Short(h.mean_gain) +
           ", " + std::to_string(gs->compile_failures()) + " compile failures, " +
           std::to_string(gs->incorrect()) + " incorrect" +
           (h.cross_backend ? " (learned on another backend)" : "") + "\n";
    }
    p += notes[i];
  }
  return p;
}

// A direction whose strategies compete in a decision, with its direction score.
struct Source {
  const fb::DirectionT* dir;
  double dir_score;
};

// Which directions' strategies compete: the chosen one's only, or (strategy_scope "all") those
// of every direction the policy did not mask, each weighed by its direction's score, so that the
// list holds the strategies most likely to apply and help here whatever their direction. The
// chosen direction comes first and stays the answer's frame.
std::vector<Source> RetrievalSources(const fb::DirectionT& dir,
                                     const std::vector<fb::DirectionT>& dirs, const Decision& d,
                                     bool all) {
  std::vector<Source> sources{{&dir, 0.0}};
  if (!all) return sources;
  for (const auto& sc : d.scores) {
    if (sc.masked) continue;
    if (sc.direction_id == dir.id) {
      sources[0].dir_score = sc.score;
      continue;
    }
    for (const auto& x : dirs)
      if (x.id == sc.direction_id) sources.push_back(Source{&x, sc.score});
  }
  return sources;
}

// A candidate strategy: its id, its similarity to the query, its index into the sources.
struct Cand {
  uint64_t id;
  double sim;
  size_t source;
};

// Each strategy once, as it came first (the chosen direction's, then by direction score).
void KeepFirstOfEach(std::vector<Cand>* cands) {
  std::stable_sort(cands->begin(), cands->end(),
                   [](const Cand& a, const Cand& b) { return a.id < b.id; });
  cands->erase(std::unique(cands->begin(), cands->end(),
                           [](const Cand& a, const Cand& b) { return a.id == b.id; }),
               cands->end());
}

// Candidate `id`'s record: from the strategy record cache's `cached` records when it holds them,
// else read from the store and verified (into `added` when the cache asked to be filled, else
// into `read`); null when it cannot be read.
const fb::Strategy* CandidateRecord(
    Txn& t, uint64_t id, const StrategyRecordCache::Records* cached, bool fill,
    std::vector<std::pair<uint64_t, std::shared_ptr<const StrategyRecordCache::Record>>>* added,
    std::vector<FbView<fb::Strategy>>* read) {
  if (cached)
    if (auto hit = cached->find(id); hit != cached->end()) return hit->second->table;
  std::string_view bytes;
  if (!t.Get(Db::kStrategies, KeyU64(id), &bytes).ok()) return nullptr;
  if (fill) {
    auto r = StrategyRecordCache::Copy(bytes);
    if (!r) return nullptr;
    const fb::Strategy* s = r->table;
    added->emplace_back(id, std::move(r));
    return s;
  }
  FbView<fb::Strategy> v(bytes);
  if (!v) return nullptr;
  const fb::Strategy* s = v.get();
  read->push_back(std::move(v));
  return s;
}

// Best first (ties by id); with `all`, one entry per strategy (a learned one and its parent are
// the same advice); at most `listed`.
void RankStrategies(bool all, int listed, std::vector<ScoredStrategy>* scored) {
  std::sort(scored->begin(), scored->end(), [](const ScoredStrategy& a, const ScoredStrategy& b) {
    if (a.n.score != b.n.score) return a.n.score > b.n.score;
    return a.s->id() < b.s->id();
  });
  if (all) {
    std::vector<uint64_t> keys;
    keys.reserve(scored->size());
    for (const ScoredStrategy& x : *scored) keys.push_back(x.n.key);
    std::sort(keys.begin(), keys.end());
    if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) {
      std::unordered_set<uint64_t> seen_keys(scored->size() * 2);
      scored->erase(std::remove_if(scored->begin(), scored->end(),
                                   [&](const ScoredStrategy& x) {
                                     return !seen_keys.insert(x.n.key).second;
                                   }),
                    scored->end());
    }
  }
  if (scored->size() > static_cast<size_t>(std::max(0, listed)))
    scored->erase(scored->begin() + std::max(0, listed), scored->end());
}


// The answer's strategies (`scored`, ranked) and its prompt context: the first
// detailed_strategies in full (all of them in the `full` answer), the rest compact.
void FillStrategies(Txn& t, const std::vector<ScoredStrategy>& scored,
                    const std::vector<Source>& sources, const fb::DirectionT& dir, bool full,
                    bool all, const MemoryOptions& o, Decision* d) {
  std::vector<std::string> notes;  // per hit: why it is in the list, beyond its statistics
  const size_t detailed =
      full ? scored.size() : static_cast<size_t>(std::max(0, o.detailed_strategies));
  d->strategies.clear();
  // The compact answer's examples: in rank order while they fit answer_example_bytes.
  size_t example_room = full ? std::numeric_limits<size_t>::max()
                              : static_cast<size_t>(std::max(0, o.answer_example_bytes));
  for (const ScoredStrategy& x : scored) {
    const bool compact = d->strategies.size() >= detailed;
    const fb::DirectionT& sd = *sources[x.n.source].dir;
    notes.push_back(all && !compact ? StrategyNote(x.n, sd, dir, sources[x.n.source].dir_score, o)
                                    : std::string());
    d->strategies.push_back(MakeHit(t, *x.s, x.n, compact, &example_room));
  }
  d->prompt_context = PromptContext(dir, d->why, d->strategies, notes, detailed, full);
}


// A neighbour from its transition record `r` (one the table does not hold), as seen from the
// state with key `key`; `hist` is scratch space.
Neighbor NeighborOfRecord(const fb::TransitionRecord& r, const float* key, const PolicyState& ps,
                          const MemoryOptions& o, std::vector<uint64_t>* hist) {
  Neighbor n;
  n.transition_id = r.id();
  n.session_id = r.session_id();
  n.state_similarity = StateSimilarity(key, r.state()->vector()->data());
  hist->clear();
  if (r.history()) hist->assign(r.history()->begin(), r.history()->end());
  n.history_agreement = HistoryAgreement(ps.history, *hist, o.history_decay, o.history_length);
  n.backend = r.backend() ? r.backend()->str() : "";
  n.backend_factor = BackendFactor(ps.backend, n.backend, o, &n.cross_backend);
  n.direction_id = r.direction_id();
  n.status = r.status();
  n.gain = RecordGain(r);
  n.verified = r.verified();
  n.vouched = r.vouched();
  n.no_change = r.no_change();
  if (r.strategy_ids()) n.strategy_ids.assign(r.strategy_ids()->begin(), r.strategy_ids()->end());
  n.learned_strategy_id = r.learned_strategy_id();
  if (r.passed_over_ids())
    n.passed_over_ids.assign(r.passed_over_ids()->begin(), r.passed_over_ids()->end());
  return n;
}

// The nearest `count` neighbours that are not claims (`is_claim`), and the claims among them,
// in their order.
template <typename IsClaim>
void KeepNearestCounted(size_t count, const IsClaim& is_claim, std::vector<Neighbor>* neighbors) {
  size_t counted = 0, kept = 0;
  for (size_t i = 0; i < neighbors->size(); ++i) {
    if (!is_claim((*neighbors)[i]) && ++counted > count) continue;
    if (kept != i) (*neighbors)[kept] = std::move((*neighbors)[i]);
    ++kept;
  }
  neighbors->resize(kept);
}

// The `evidence` heaviest neighbours (ties in their order) as the decision's evidence.
void AddEvidence(const std::vector<Neighbor>& neighbors, size_t evidence, Decision* d) {
  std::vector<size_t> order(neighbors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return neighbors[a].weight > neighbors[b].weight; });
  for (size_t i = 0; i < order.size() && i < evidence; ++i) {
    const Neighbor& n = neighbors[order[i]];
    fb::EvidenceT e;
    e.transition_id = n.transition_id;
    e.weight = n.weight;
    e.similarity = n.state_similarity;
    e.history_agreement = n.history_agreement;
    e.direction_id = n.direction_id;
    e.status = n.status;
    e.gain = n.gain;
    e.backend = n.backend;
    e.cross_backend = n.cross_backend;
    e.verified = n.verified;
    e.vouched = n.vouched;
    e.no_change = n.no_change;
    d->evidence.push_back(std::move(e));
  }
}


// Direction `chosen`: its stored record where it reads, else its entry in `dirs` (empty when
// neither has it).
fb::DirectionT ChosenDirection(Txn& t, const std::vector<fb::DirectionT>& dirs, uint64_t chosen) {
  fb::DirectionT out;
  for (const auto& dir : dirs)
    if (dir.id == chosen) out = dir;
  std::string_view dv;
  if (t.Get(Db::kDirections, KeyU64(chosen), &dv).ok()) (void)Decode(dv, &out, "direction");
  return out;
}


// What scores every offered strategy of one decision the same way.
struct OfferedContext {
  const std::vector<Source>& sources;
  const std::unordered_map<uint64_t, uint64_t>& canon;  // candidate -> parent, where known
  const std::vector<std::pair<uint64_t, double>>& retries;
  const std::vector<std::pair<uint64_t, double>>& passes;
  const PolicyState& ps;
  const StrategyEvidence& all_ev;
  const StrategyEvidence* trusted_ev;  // set when unverified evidence may not promote
  bool all;
  std::optional<double> pooled_every, pooled_verified;
  const MemoryOptions& o;
};

// One offered strategy's numbers: from every attended step and, with trusted_ev, the lower of
// that and what the verified steps give (client-reported evidence may warn, never lift).
ScoredStrategy ScoreOffered(const Cand& c, const fb::Strategy& s, const OfferedContext& oc) {
  const Source& src = oc.sources[c.source];
  StrategyNumbers x;
  x.sim = c.sim;
  x.source = c.source;
  x.key = c.id;
  if (auto k = oc.canon.find(c.id); k != oc.canon.end()) x.key = k->second;
  x.retries = LookUp(oc.retries, x.key);
  x.passes = LookUp(oc.passes, x.key);
  StrategyNumbers v = x;
  ScoreStrategy(s, oc.ps, src.dir->prior, src.dir_score, oc.all_ev, /*verified_stats=*/false,
                oc.all, oc.pooled_every, oc.o, &x);
  if (oc.trusted_ev) {
    ScoreStrategy(s, oc.ps, src.dir->prior, src.dir_score, *oc.trusted_ev,
                  /*verified_stats=*/true, oc.all, oc.pooled_verified, oc.o, &v);
    if (v.score < x.score) {
      v.held = true;
      x = v;
    }
  }
  return ScoredStrategy{&s, x};
}

}  // namespace

uint32_t MemoryImpl::ClientOf(Txn& t, uint64_t session_id) {
  {
    MutexLock l(&clients_mu_);
    auto it = session_client_.find(session_id);
    if (it != session_client_.end()) return it->second;
  }
  std::string_view v;
  if (!t.Get(Db::kSessions, KeyU64(session_id), &v).ok()) return 0;
  FbView<fb::Session> s(v);
  if (!s) return 0;
  std::string client = s->client() ? s->client()->str() : "";
  MutexLock l(&clients_mu_);
  auto [c, added] = client_ids_.emplace(client, static_cast<uint32_t>(client_ids_.size() + 1));
  session_client_[session_id] = c->second;
  return c->second;
}

bool MemoryImpl::Vouched(std::string_view client) const {
  return !client.empty() &&
         std::find(trusted_clients_.begin(), trusted_clients_.end(), client) != trusted_clients_.end();
}

Status MemoryImpl::CheckClientVector(const std::optional<std::vector<float>>& v) const {
  if (!v) return Status::OK();
  if (meta_.embedder_model == kBuiltinEmbedder)
    return Status::InvalidArgument(
        "this store embeds with builtin-hash-v1: client vectors are refused (embeddings are never "
        "mixed; declare a client model when the store is created)");
  if (v->size() != meta_.embedder_dim)
    return Status::InvalidArgument("embedding has dimension " + std::to_string(v->size()) +
                                   ", the store's model " + meta_.embedder_model + " has " +
                                   std::to_string(meta_.embedder_dim));
  for (float x : *v)
    if (!std::isfinite(x)) return Status::InvalidArgument("embedding holds NaN or Inf");
  return Status::OK();
}

Status MemoryImpl::BuildPolicyState(Txn& t, const fb::Session& s, const StateInput& in,
                                    PolicyState* ps, bool from_table, bool tries, size_t window) {
  ps->session_id = s.id();
  std::string_view v;
  Status st = t.Get(Db::kTasks, KeyU64(s.task_id()), &v);
  if (st.ok()) {
    FbView<fb::Task> task(v);
    if (!task) return Status::Corruption("malformed task record");
    ps->category = task->category() ? task->category()->str() : "";
    ps->log_size = task->bytes() > 0 ? std::log10(task->bytes()) : 0;
    ps->intensity = task->bytes() > 0 ? task->flops() / task->bytes() : 0;
  } else if (!st.IsNotFound()) {
    return st;
  }
  // The caller's class, else the one the session's last profiled candidate was measured in.
  ps->bottleneck =
      in.bottleneck != fb::Bottleneck::Unknown ? in.bottleneck : s.measured_bottleneck();
  ps->speedup = in.speedup.value_or(s.best_speedup());
  ps->step = s.steps();
  ps->backend = s.backend() ? s.backend()->str() : "";
  ps->arch = s.arch() ? s.arch()->str() : "";
  if (window > 0) {
    const uint32_t from = s.steps() > window ? s.steps() - static_cast<uint32_t>(window) : 0;
    return ForEachSessionStep(t, s, from, [&](uint32_t, const SessionStep& row) {
      ps->history.push_back(row.direction_id);
      return true;
    });
  }
  HTAM_RETURN_IF_ERROR(ForEachSessionStep(t, s, 0, [&](uint32_t step, const SessionStep& row) {
    ps->history.push_back(row.direction_id);
    ps->outcomes.push_back(row.status);
    if (row.raised_best) ps->path_steps.push_back(step);
    return true;
  }));
  // Gains of the last few steps (for the "succeeded but no faster" half penalty), and with
  // `tries` the strategies of every step.
  ps->gains.assign(ps->history.size(), 0.0);
  size_t want = static_cast<size_t>(std::max(0, o_.failure_memory));
  std::vector<uint64_t> recent;
  HTAM_RETURN_IF_ERROR(
      t.Scan(Db::kSessionTransitions, KeyU64(s.id()), [&](std::string_view k, std::string_view) {
        recent.push_back(DecodeU64(k, 8));
        return true;
      }));
  auto tried = [&](uint64_t strategy, uint32_t step, fb::OutcomeStatus status, double gain) {
    if (strategy) ps->tried.push_back(PolicyState::Tried{strategy, step, status, gain});
  };
  size_t first = recent.size() > want ? recent.size() - want : 0;
  for (size_t i = tries ? 0 : first; i < recent.size(); ++i) {
    if (from_table) {
      index_mu_.AssertReaderHeld();  // from_table: the caller holds it (see the header)
      const TransitionTable::Row* row = table_.Find(recent[i]);
      if (row && !(row->flags & TransitionTable::kFallback)) {
        auto status = static_cast<fb::OutcomeStatus>(row->status);
        double gain = TransitionTable::Gain(*row);
        if (i >= first && row->step < ps->gains.size()) ps->gains[row->step] = gain;
        if (tries) {
          for (uint32_t j = 0; j < row->strategies; ++j)
            tried(table_.Strategies(*row)[j], row->step, status, gain);
          tried(row->learned_strategy_id, row->step, status, gain);
        }
        continue;
      }
    }
    std::string_view rv;
    if (!t.Get(Db::kTransitions, KeyU64(recent[i]), &rv).ok()) continue;
    FbView<fb::TransitionRecord> r(rv);
    if (!r) continue;
    double gain = RecordGain(*r);
    if (i >= first && r->step() < ps->gains.size()) ps->gains[r->step()] = gain;
    if (tries) {
      if (r->strategy_ids())
        for (uint64_t id : *r->strategy_ids()) tried(id, r->step(), r->status(), gain);
      tried(r->learned_strategy_id(), r->step(), r->status(), gain);
    }
  }
  return Status::OK();
}

Result<Decision> MemoryImpl::NextStep(uint64_t session_id, const StateInput& state,
                                      std::optional<std::vector<float>> embedding) {
  HTAM_RETURN_IF_ERROR(CheckClientVector(embedding));
  HTAM_RETURN_IF_ERROR(EnsureIndexes());
  WaitApplied();  // every acknowledged step is searchable
  std::shared_ptr<const std::vector<fb::DirectionT>> dirs_ptr = Directions();
  const std::vector<fb::DirectionT>& dirs = *dirs_ptr;
  if (dirs.empty())
    return Status::FailedPrecondition("the store has no directions (no seed taxonomy loaded)");

  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  std::string_view sv;
  Status st = t.Get(Db::kSessions, KeyU64(session_id), &sv);
  if (st.IsNotFound()) return Status::NotFound("no such session " + std::to_string(session_id));
  HTAM_RETURN_IF_ERROR(st);
  FbView<fb::Session> session(sv);
  if (!session) return Status::Corruption("malformed session record");
  if (session->state() == fb::SessionState::Closed)
    return Status::FailedPrecondition("session " + std::to_string(session_id) + " is closed");
  PolicyState ps;
  std::vector<float> key;
  std::vector<Neighbor> neighbors;
  std::map<uint64_t, LearnedEstimate> learned;
  {
    // The index, its table and the neighbours' facts under one shared lock: a decision reads
    // no transition record for a neighbour the table holds (rows missing there, e.g. of a
    // commit not yet applied, or that do not fit a row, are read from the store).
    ReaderMutexLock l(&index_mu_);
    HTAM_RETURN_IF_ERROR(
        BuildPolicyState(t, *session, state, &ps, o_.transition_table, /*tries=*/true));
    key = TransitionKey(ps, o_);
    // The learned scorer's estimate of every direction (memory.scorer; docs/memory.md).
    if (scorer_.Active(o_)) {
      for (const auto& dir : dirs) {
        Scorer::Prediction p;
        if (!scorer_.Predict(key.data(), dir.id, &p, 3)) continue;
        LearnedEstimate& e = learned[dir.id];
        e.p_success = p.p_improve;
        e.expected_gain = p.expected_gain;
        e.records = p.records;
        e.top = std::move(p.top);
      }
    }

    // 1. Attend: nearest past transitions by (state, history).
    thread_local std::vector<const float*> stored;
    // A client's claims (unverified, not failures) count for nothing without
    // unverified_can_promote (policy.h): they must not take the slots of steps that count, so
    // when some came back the search runs once more, wider, and keeps the nearest `neighbors`
    // that count (the claims stay, labelled, outside that budget).
    const bool claims_free = !o_.unverified_can_promote;
    auto is_claim = [&](const Neighbor& n) {
      return claims_free && !n.trusted() && !IsFailure(n.status);
    };
    int k = std::max(0, o_.neighbors);
    for (int attempt = 0; attempt < 2; ++attempt) {
      neighbors.clear();
      std::vector<Hit> hits = transition_index_->Search(key.data(), k, &stored);
      neighbors.reserve(hits.size());
      const bool use_table = o_.transition_table && o_.history_length <= TransitionTable::kHistory;
      std::vector<float> their;
      std::vector<uint64_t> hist;
      for (size_t hi = 0; hi < hits.size(); ++hi) {
        const Hit& h = hits[hi];
        const TransitionTable::Row* row = use_table ? table_.Find(h.id) : nullptr;
        if (row && !(row->flags & TransitionTable::kFallback)) {
          if (!(row->flags & TransitionTable::kKeyOk)) continue;
          auto status = static_cast<fb::OutcomeStatus>(row->status);
          if (!Counts(status)) continue;  // infrastructure errors say nothing about directions
          const float* theirs = stored[hi];
          if (!theirs) {
            if (!transition_index_->Reconstruct(h.id, &their)) continue;
            theirs = their.data();
          }
          Neighbor n;
          n.transition_id = h.id;
          n.session_id = row->session_id;
          n.state_similarity = StateSimilarity(key.data(), theirs);
          hist.assign(row->history, row->history + row->history_size);
          n.history_agreement =
              HistoryAgreement(ps.history, hist, o_.history_decay, o_.history_length);
          n.backend = table_.Backend(*row);
          n.backend_factor = BackendFactor(ps.backend, n.backend, o_, &n.cross_backend);
          n.direction_id = row->direction_id;
          n.status = status;
          n.gain = TransitionTable::Gain(*row);
          n.verified = row->flags & TransitionTable::kVerified;
          n.vouched = row->flags & TransitionTable::kVouched;
          n.no_change = row->flags & TransitionTable::kNoChange;
          if (o_.continuation_weight != 0)
            n.future_gain = table_.FutureGain(*row, o_.continuation_horizon);
          n.strategy_ids.assign(table_.Strategies(*row), table_.Strategies(*row) + row->strategies);
          n.learned_strategy_id = row->learned_strategy_id;
          n.passed_over_ids.assign(table_.PassedOver(*row), table_.PassedOver(*row) + row->passed);
          neighbors.push_back(std::move(n));
          continue;
        }
        std::string_view rv;
        if (!t.Get(Db::kTransitions, KeyU64(h.id), &rv).ok()) continue;
        FbView<fb::TransitionRecord> r(rv);
        if (!r || !r->state() || !r->state()->vector() || r->state()->vector()->size() != kKeyDim)
          continue;
        if (!Counts(r->status())) continue;
        neighbors.push_back(NeighborOfRecord(*r, key.data(), ps, o_, &hist));
      }
      const size_t claims = static_cast<size_t>(std::count_if(neighbors.begin(), neighbors.end(), is_claim));
      if (claims == 0 || attempt == 1 || hits.size() < static_cast<size_t>(k)) break;
      k *= 4;
    }
    KeepNearestCounted(static_cast<size_t>(std::max(0, o_.neighbors)), is_claim, &neighbors);
  }
  for (Neighbor& n : neighbors) n.client = ClientOf(t, n.session_id);
  WeighNeighbors(&neighbors, o_);

  // Advice of the last step that the session passed over counts as tried without success.
  const bool scope_all = o_.strategy_scope == "all";
  if (scope_all) PassedOver(session_id, &ps);

  // 2. Score every direction.
  PolicyResult pr = ScoreDirections(dirs, neighbors, ps, o_, learned.empty() ? nullptr : &learned);
  Decision d;
  d.step = ps.step;
  d.scores = pr.scores;
  d.why = pr.why;
  d.direction = ChosenDirection(t, dirs, pr.scores.empty() ? 0 : pr.scores[pr.chosen].direction_id);

  // Evidence: the heaviest attended transitions.
  AddEvidence(neighbors, state.full ? kMaxEvidence : kCompactEvidence, &d);

  // 3. Strategies under the chosen direction.
  fb::TaskT task;
  {
    std::string_view tv;
    if (t.Get(Db::kTasks, KeyU64(session->task_id()), &tv).ok()) (void)Decode(tv, &task, "task");
  }
  HTAM_RETURN_IF_ERROR(Retrieve(t, ps, task, d.direction, neighbors, state, embedding, &d));
  std::optional<SessionAdvice::Advised> advised;
  if (scope_all) {
    advised.emplace();
    advised->step = ps.step;
    for (const auto& h : d.strategies) advised->strategies.push_back(h.strategy->id);
  }
  advice_.Remember(session_id, state, advised);
  return d;
}

void MemoryImpl::PassedOver(uint64_t session_id, PolicyState* ps) {
  // A learned strategy and the one it was learned as are one strategy here.
  ReaderMutexLock il(&index_mu_);
  auto canon = [&](uint64_t id) REQUIRES_SHARED(index_mu_) {
    uint64_t p = table_.Parent(id);
    return p ? p : id;
  };
  for (auto& x : ps->tried) x.strategy_id = canon(x.strategy_id);
  advice_.AddPassedOver(session_id, canon, ps);
}

// Caller holds index_mu_ (shared at least).
std::vector<Hit> MemoryImpl::SearchStrategies(
    uint64_t direction, const VectorIndex& index, std::string_view query_key,
    const std::function<const std::vector<float>&()>& query, int k) {
  if (auto cached = retrieval_cache_.Find(strategy_epoch_, direction, k, query_key))
    return std::move(*cached);
  std::vector<Hit> hits = index.Search(query().data(), k);
  retrieval_cache_.Insert(strategy_epoch_, direction, k, query_key, hits);
  return hits;
}

Status MemoryImpl::Retrieve(Txn& t, const PolicyState& ps, const fb::TaskT& task,
                            const fb::DirectionT& dir, const std::vector<Neighbor>& neighbors,
                            const StateInput& in,
                            const std::optional<std::vector<float>>& embedding, Decision* d) {
  std::shared_ptr<const std::vector<fb::DirectionT>> dirs_ptr = Directions();
  const bool all = o_.strategy_scope == "all";
  const std::vector<Source> sources = RetrievalSources(dir, *dirs_ptr, *d, all);
  // Candidates: the most similar strategies of each source direction, plus those without
  // embeddings.
  std::vector<Cand> cands;
  // The query is the direction's title before the task's text: the text is hashed once, and
  // only when a search is not answered from the retrieval cache, which knows a builtin query by
  // its text (task text, then the title) and a client's by its vector's bytes.
  const bool builtin = !embedding && meta_.embedder_model == kBuiltinEmbedder;
  std::string text_key;  // the task text's length (8 bytes), the task text, then the title
  size_t text_len = 0;
  if (builtin) {
    const std::string text = task.category + " " + task.name + " " + task.description + " " +
                             fb::EnumNameBottleneck(ps.bottleneck) + " bound " + in.query_text;
    const uint64_t n = text.size();
    text_key.assign(reinterpret_cast<const char*>(&n), sizeof n);
    text_key += text;
    text_len = text_key.size();
  }
  std::optional<SuffixEmbedder> task_text;
  std::vector<float> query;
  if (embedding) query = *embedding;
  {
    ReaderMutexLock l(&index_mu_);
    for (size_t si = 0; si < sources.size(); ++si) {
      const fb::DirectionT& sd = *sources[si].dir;
      // The chosen direction's candidates in full; the others' at most
      // other_direction_candidates (fewer reads per decision, at some cost to the list).
      int k = si == 0 ? o_.retrieval_candidates
                      : std::min(o_.retrieval_candidates, o_.other_direction_candidates);
      auto it = strategy_index_.find(sd.id);
      if (it != strategy_index_.end() && (builtin || !query.empty()) && k > 0) {
        std::string_view query_key;
        if (builtin) {
          text_key.resize(text_len);
          text_key += sd.title;
          query_key = text_key;
        } else {
          query_key = std::string_view(reinterpret_cast<const char*>(query.data()),
                                       query.size() * sizeof(float));
        }
        auto embed = [&]() -> const std::vector<float>& {
          if (builtin) {
            if (!task_text)
              task_text.emplace(std::string_view(text_key).substr(8, text_len - 8),
                                meta_.embedder_dim);
            query = task_text->Embed(sd.title);
          }
          return query;
        };
        for (const Hit& h : SearchStrategies(sd.id, *it->second, query_key, embed, k))
          cands.push_back(Cand{h.id, h.similarity, si});
      }
      auto un = unembedded_.find(sd.id);
      if (un != unembedded_.end())
        for (uint64_t id : un->second) cands.push_back(Cand{id, 0.0, si});
    }
  }
  // This session's unsuccessful tries (strategy_scope "all": they weigh against a strategy).
  // ps.tried holds canonical ids (PassedOver): a learned strategy counts as its parent.
  std::vector<std::pair<uint64_t, double>> retries;
  std::vector<std::pair<uint64_t, double>> passes;  // strategy -> steps that passed it over
  // candidate (and, with shared_evidence, credited strategy) -> parent, where the table knows one
  std::unordered_map<uint64_t, uint64_t> canon;
  const bool shared = all && o_.shared_evidence;
  if (all) {
    retries = RetryCounts(ps);
    passes = PassedOverCounts(ps);
    ReaderMutexLock l(&index_mu_);
    for (const Cand& c : cands)
      if (uint64_t p = table_.Parent(c.id)) canon[c.id] = p;
    if (shared)
      for (const Neighbor& n : neighbors)
        if (n.learned_strategy_id)
          if (uint64_t p = table_.Parent(n.learned_strategy_id)) canon[n.learned_strategy_id] = p;
  }
  const StrategyEvidence all_ev = GatherStrategyEvidence(neighbors, ps, o_, /*trusted_only=*/false,
                                                         shared ? &canon : nullptr);
  // Without unverified_can_promote a strategy's score is the lower of what every attended step
  // and what the verified ones give: client-reported evidence may warn, never lift.
  const bool two_views = !o_.unverified_can_promote &&
                         std::any_of(neighbors.begin(), neighbors.end(),
                                     [](const Neighbor& n) { return !n.trusted(); });
  const StrategyEvidence trusted_ev =
      two_views ? GatherStrategyEvidence(neighbors, ps, o_, /*trusted_only=*/true,
                                         shared ? &canon : nullptr)
                : StrategyEvidence{};
  KeepFirstOfEach(&cands);
  std::vector<ScoredStrategy> scored;
  scored.reserve(cands.size());
  // The candidates' records: from the strategy record cache when it holds this state, else read
  // and verified here (and handed to the cache when it asks for them).
  bool fill = false;
  const std::shared_ptr<const StrategyRecordCache::Records> cached =
      strategy_records_.Find(t.id(), &fill);
  std::vector<std::pair<uint64_t, std::shared_ptr<const StrategyRecordCache::Record>>> added;
  std::vector<FbView<fb::Strategy>> read;  // records read from the store, uncached
  read.reserve(cands.size());
  // memory.bottleneck_mask: hard counts the class in the precondition match, soft takes
  // bottleneck_penalty from a strategy whose targets exclude it, off ignores it.
  const bool hard_mask = o_.bottleneck_mask == "hard";
  std::vector<std::pair<const Cand*, const fb::Strategy*>> offered;
  offered.reserve(cands.size());
  // The pooled mean log gain per use of what is offered, over every use and the verified ones.
  double sum_every = 0, sum_verified = 0, uses_every = 0, uses_verified = 0;
  for (const Cand& c : cands) {
    const fb::Strategy* s = CandidateRecord(t, c.id, cached.get(), fill, &added, &read);
    if (!s || s->merged_into()) continue;
    // Only what applies here: a strategy for another backend or a newer architecture (and, with
    // bottleneck_mask hard, another bottleneck) is not offered.
    if (!PreconditionsHold(*s, ps, hard_mask)) continue;
    offered.emplace_back(&c, s);
    if (const fb::GainStats* g = s->stats()) {
      sum_every += g->sum_gain();
      uses_every += g->uses();
    }
    if (const fb::GainStats* g = s->verified_stats()) {
      sum_verified += g->sum_gain();
      uses_verified += g->uses();
    }
  }
  const bool pool = all && o_.pooled_strategy_prior;
  std::optional<double> pooled_every, pooled_verified;
  if (pool && uses_every > 0) pooled_every = sum_every / uses_every;
  if (pool && uses_verified > 0) pooled_verified = sum_verified / uses_verified;
  const OfferedContext oc{sources, canon, retries, passes, ps, all_ev,
                          two_views ? &trusted_ev : nullptr,
                          all, pooled_every, pooled_verified, o_};
  for (const auto& [cp, s] : offered) scored.push_back(ScoreOffered(*cp, *s, oc));
  // The records of `added` stay alive in this decision through their pointers kept here.
  std::vector<std::shared_ptr<const StrategyRecordCache::Record>> kept;
  for (const auto& [id, r] : added) kept.push_back(r);
  strategy_records_.Add(t.id(), std::move(added));
  // The compact answer lists listed_strategies, the full one top_k_strategies.
  const int listed =
      in.full ? o_.top_k_strategies : std::min(o_.listed_strategies, o_.top_k_strategies);
  RankStrategies(all, listed, &scored);
  FillStrategies(t, scored, sources, dir, in.full, all, o_, d);
  return Status::OK();
}

}  // namespace htam::memory
