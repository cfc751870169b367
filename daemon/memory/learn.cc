// Learning: one write transaction per evaluated step (or per group of concurrent steps) updates
// the transition record, session, edges, statistics, candidate and learned strategies. Also the
// rebuild of everything derived, and the integrity check.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "base/log.h"
#include "daemon/memory/codec.h"
#include "daemon/memory/memory_impl.h"
#include "daemon/memory/session_steps.h"
#include "daemon/memory/stats.h"

namespace htam::memory {
namespace {

constexpr size_t kMaxProvenanceIds = 64;  // task/session ids kept per strategy provenance

double Dot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(a[i]) * b[i];
  return s;
}

std::string Slug(std::string_view text, size_t max_words) {
  std::string out;
  size_t words = 0;
  bool gap = false;
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) {
      if (gap && !out.empty()) {
        if (++words >= max_words) break;
        out.push_back('-');
      }
      gap = false;
      out.push_back(static_cast<char>(std::tolower(c)));
    } else {
      gap = true;
    }
  }
  return out.empty() ? "learned" : out;
}

template <typename T>
void AppendCapped(std::vector<T>* v, T x) {
  if (std::find(v->begin(), v->end(), x) != v->end()) return;
  v->push_back(x);
  if (v->size() > kMaxProvenanceIds) v->erase(v->begin());
}

}  // namespace

struct MemoryImpl::Prepared {
  StepInput in;
  StateInput state;
  std::vector<float> summary_vec;  // empty: no embedding for the summary
  std::string candidate_hash;
  // The session's last advice (strategy_scope all) when there is one: at which step, in order.
  std::optional<uint32_t> advice_step;
  std::vector<uint64_t> advised;
};

Result<MemoryImpl::Prepared> MemoryImpl::Prepare(const StepInput& in) {
  if (read_only_) return Status::PermissionDenied("memory opened read-only");
  if (in.session_id == 0) return Status::InvalidArgument("step without a session");
  if (static_cast<int>(in.status) < 0 ||
      static_cast<int>(in.status) > static_cast<int>(fb::OutcomeStatus::MAX))
    return Status::InvalidArgument("unknown outcome status");
  if (!std::isfinite(in.speedup_after) || in.speedup_after < 0)
    return Status::InvalidArgument("speedup_after must be a finite number >= 0");
  if (in.status == fb::OutcomeStatus::Ok && in.speedup_after <= 0)
    return Status::InvalidArgument("an Ok outcome needs a positive speedup");
  if (in.speedup_after > o_.max_speedup)
    return Status::InvalidArgument("speedup_after " + std::to_string(in.speedup_after) +
                                   " is above the plausible ceiling memory.max_speedup (" +
                                   std::to_string(o_.max_speedup) + ")");
  if (!std::isfinite(in.median_us) || in.median_us < 0 || !std::isfinite(in.spread_us) ||
      in.spread_us < 0)
    return Status::InvalidArgument("median_us and spread_us must be finite numbers >= 0");
  {
    auto dirs_ptr = Directions();
    const std::vector<fb::DirectionT>& dirs = *dirs_ptr;
    if (std::none_of(dirs.begin(), dirs.end(),
                     [&](const auto& d) { return d.id == in.direction_id; }))
      return Status::InvalidArgument("no such direction " + std::to_string(in.direction_id));
  }
  HTAM_RETURN_IF_ERROR(CheckClientVector(in.embedding));
  Prepared p;
  p.in = in;
  if (in.state) {
    p.state = *in.state;
  } else if (auto last = advice_.LastState(in.session_id)) {
    p.state = std::move(*last);
  }
  if (auto advised = advice_.LastAdvice(in.session_id)) {
    p.advice_step = advised->step;
    p.advised = std::move(advised->strategies);
  }
  if (in.embedding)
    p.summary_vec = *in.embedding;
  else if (meta_.embedder_model == kBuiltinEmbedder && !in.summary.empty())
    p.summary_vec = EmbedText(in.summary, meta_.embedder_dim);
  p.candidate_hash = in.candidate_hash;
  if (p.candidate_hash.empty() && !in.source.empty())
    p.candidate_hash = CandidateHash(in.language, in.source);
  return p;
}

// The advice that the step of the session at `step` passed over: what its NextStep ranked above
// the first strategy the step applied, or all of it when it applied none (it did not fit the
// kernel). A learned strategy counts as the one it was learned as (TransitionTable::Parent), once.
std::vector<uint64_t> MemoryImpl::PassedOverIds(const Prepared& p, uint32_t step) {
  std::vector<uint64_t> out;
  if (!p.advice_step || *p.advice_step != step) return out;  // the step followed no advice
  ReaderMutexLock l(&index_mu_);
  auto canon = [&](uint64_t id) REQUIRES_SHARED(index_mu_) {
    uint64_t parent = table_.Parent(id);
    return parent ? parent : id;
  };
  std::set<uint64_t> applied;
  for (uint64_t id : p.in.strategy_ids) applied.insert(canon(id));
  for (uint64_t id : p.advised) {
    uint64_t c = canon(id);
    if (applied.count(c)) break;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

// ApplyStep's parts that need nothing of MemoryImpl: each reads or writes one kind of record in
// the caller's write transaction.
namespace {

// The session of a step, which must be open; *bytes: its stored record (for BuildPolicyState).
Status ReadOpenSession(Txn& t, uint64_t id, fb::SessionT* session, std::string_view* bytes) {
  Status st = t.Get(Db::kSessions, KeyU64(id), bytes);
  if (st.IsNotFound()) return Status::NotFound("no such session " + std::to_string(id));
  HTAM_RETURN_IF_ERROR(st);
  HTAM_RETURN_IF_ERROR(Decode(*bytes, session, "session"));
  if (session->state == fb::SessionState::Closed)
    return Status::FailedPrecondition("session " + std::to_string(id) + " is closed");
  return Status::OK();
}

Status CheckStrategiesExist(Txn& t, const std::vector<uint64_t>& ids) {
  for (uint64_t sid : ids) {
    std::string_view sv;
    Status s = t.Get(Db::kStrategies, KeyU64(sid), &sv);
    if (s.IsNotFound()) return Status::InvalidArgument("no such strategy " + std::to_string(sid));
    HTAM_RETURN_IF_ERROR(s);
  }
  return Status::OK();
}

// A near-duplicate success joins the provenance of the strategy it repeats.
Status MergeIntoStrategy(Txn& t, uint64_t id, const fb::SessionT& session, uint64_t now) {
  std::string_view sv;
  HTAM_RETURN_IF_ERROR(t.Get(Db::kStrategies, KeyU64(id), &sv));
  fb::StrategyT s;
  HTAM_RETURN_IF_ERROR(Decode(sv, &s, "strategy"));
  if (!s.provenance) s.provenance = std::make_unique<fb::ProvenanceT>();
  AppendCapped(&s.provenance->task_ids, session.task_id);
  AppendCapped(&s.provenance->session_ids, session.id);
  s.updated_ns = now;
  return t.Put(Db::kStrategies, KeyU64(id), Encode(s));
}

// Whether a strategy of `direction` is named `name` already.
Result<bool> StrategyNameTaken(Txn& t, uint64_t direction, const std::string& name) {
  bool taken = false;
  Status scan_error;
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kDirectionStrategies, KeyU64(direction),
                              [&](std::string_view key, std::string_view) {
                                std::string_view v;
                                scan_error = t.Get(Db::kStrategies, KeyU64(DecodeU64(key, 8)), &v);
                                if (!scan_error.ok()) return false;
                                FbView<fb::Strategy> x(v);
                                taken = x && x->name() && x->name()->str() == name;
                                return !taken;
                              }));
  HTAM_RETURN_IF_ERROR(scan_error);
  return taken;
}

// A readable name for a strategy learned from `summary` on `task`: the summary's first words;
// where its direction has that name already, the task's name added ("...-for-<task>"), and only
// then a second, third ... ("-2", "-3").
Result<std::string> LearnedStrategyName(Txn& t, uint64_t direction, const std::string& summary,
                                        const std::string& task) {
  const std::string base = Slug(summary, 6);
  HTAM_ASSIGN_OR_RETURN(bool taken, StrategyNameTaken(t, direction, base));
  if (!taken) return base;
  const std::string with_task = base + "-for-" + Slug(task, 4);
  for (int n = 1;; ++n) {
    std::string name = n == 1 ? with_task : with_task + "-" + std::to_string(n);
    HTAM_ASSIGN_OR_RETURN(taken, StrategyNameTaken(t, direction, name));
    if (!taken) return name;
  }
}

// A new strategy learned from the step's summary (embedded as vec); returns its id.
Result<uint64_t> CreateLearnedStrategy(Txn& t, const StepInput& in, const std::vector<float>& vec,
                                       const fb::SessionT& session, const PolicyState& ps,
                                       uint64_t now) {
  fb::StrategyT s;
  HTAM_ASSIGN_OR_RETURN(s.id, t.NextId(Db::kStrategies));
  s.direction_id = in.direction_id;
  HTAM_ASSIGN_OR_RETURN(s.name,
                        LearnedStrategyName(t, in.direction_id, in.summary, session.task_name));
  s.title = in.summary;
  s.description = "Learned from a verified" + std::string(in.verified ? "" : " (client-reported)") +
                  " step of task " + session.task_name + " on " + session.backend +
                  (session.arch.empty() ? "" : " " + session.arch) + ": " + in.summary;
  if (ps.bottleneck != fb::Bottleneck::Unknown) {
    s.targets.push_back(ps.bottleneck);
    s.preconditions.push_back(std::string("seen to help ") + fb::EnumNameBottleneck(ps.bottleneck) +
                              "-bound " + ps.category + " kernels");
  }
  s.provenance = std::make_unique<fb::ProvenanceT>();
  s.provenance->source = "learned";
  s.provenance->task_ids = {session.task_id};
  s.provenance->session_ids = {session.id};
  s.provenance->backend = session.backend;
  s.provenance->arch = session.arch;
  s.provenance->model = session.model;
  s.embedding = vec;
  s.stats = std::make_unique<fb::GainStats>();
  s.created_ns = s.updated_ns = now;
  HTAM_RETURN_IF_ERROR(t.Put(Db::kStrategies, KeyU64(s.id), Encode(s)));
  HTAM_RETURN_IF_ERROR(t.Put(Db::kDirectionStrategies, KeyPair(s.direction_id, s.id), ""));
  return s.id;
}

// The record's fields that come from the step, its session (before the step) and its state.
void FillTransitionRecord(const StepInput& in, const fb::SessionT& session, const PolicyState& ps,
                          const std::vector<float>& key, double before, uint64_t now,
                          fb::TransitionRecordT* rec) {
  rec->session_id = session.id;
  rec->task_id = session.task_id;
  rec->backend = session.backend;
  rec->arch = session.arch;
  rec->step = session.steps;
  rec->state = std::make_unique<fb::StateT>();
  rec->state->category = ps.category;
  rec->state->log_size = static_cast<float>(ps.log_size);
  rec->state->intensity = static_cast<float>(ps.intensity);
  rec->state->bottleneck = ps.bottleneck;
  rec->state->speedup = static_cast<float>(ps.speedup);
  rec->state->step = ps.step;
  rec->state->backend = ps.backend;
  rec->state->arch = ps.arch;
  rec->state->vector = key;
  rec->history = ps.history;
  rec->direction_id = in.direction_id;
  rec->strategy_ids = in.strategy_ids;
  rec->summary = in.summary;
  rec->status = in.status;
  rec->speedup_before = static_cast<float>(before);
  rec->speedup_after = static_cast<float>(in.speedup_after);
  rec->median_us = in.median_us;
  rec->spread_us = in.spread_us;
  rec->profile = std::make_unique<fb::ProfileT>(in.profile);
  rec->verified = in.verified;
  rec->diagnostics = in.diagnostics;
  rec->model = session.model;
  rec->created_ns = now;
}

// The statistics of the record's direction, edge and credited strategies (the same functions as
// the rebuild, over the stored record).
Status AddToStatistics(Txn& t, const fb::TransitionRecord& r, double gain,
                       const std::string& candidate_hash, uint64_t now) {
  {
    std::string_view dv;
    HTAM_RETURN_IF_ERROR(t.Get(Db::kDirections, KeyU64(r.direction_id()), &dv));
    fb::DirectionT d;
    HTAM_RETURN_IF_ERROR(Decode(dv, &d, "direction"));
    d.stats = std::make_unique<fb::GainStats>(
        AddOutcome(d.stats ? *d.stats : fb::GainStats(), r.status(), gain));
    HTAM_RETURN_IF_ERROR(t.Put(Db::kDirections, KeyU64(d.id), Encode(d)));
  }
  {
    auto [from, to, cluster] = EdgeOf(r);
    std::string ek = KeyEdge(from, to, cluster);
    std::string_view ev;
    fb::TransitionEdgeT e;
    Status es = t.Get(Db::kEdges, ek, &ev);
    if (es.ok())
      HTAM_RETURN_IF_ERROR(Decode(ev, &e, "edge"));
    else if (!es.IsNotFound())
      return es;
    e.from_direction = from;
    e.to_direction = to;
    e.cluster = cluster;
    e.stats = std::make_unique<fb::GainStats>(
        AddOutcome(e.stats ? *e.stats : fb::GainStats(), r.status(), gain));
    HTAM_RETURN_IF_ERROR(t.Put(Db::kEdges, ek, Encode(e)));
  }
  bool example = r.verified() && IsSuccess(r.status(), gain) && !candidate_hash.empty();
  for (uint64_t sid : CreditedStrategies(r)) {
    std::string_view sv;
    HTAM_RETURN_IF_ERROR(t.Get(Db::kStrategies, KeyU64(sid), &sv));
    fb::StrategyT s;
    HTAM_RETURN_IF_ERROR(Decode(sv, &s, "strategy"));
    s.stats = std::make_unique<fb::GainStats>(
        AddOutcome(s.stats ? *s.stats : fb::GainStats(), r.status(), gain));
    if (Trusted(r))
      s.verified_stats = std::make_unique<fb::GainStats>(
          AddOutcome(s.verified_stats ? *s.verified_stats : fb::GainStats(), r.status(), gain));
    if (example) s.example_candidate = candidate_hash;
    s.updated_ns = now;
    HTAM_RETURN_IF_ERROR(t.Put(Db::kStrategies, KeyU64(sid), Encode(s)));
  }
  return Status::OK();
}

// The candidate (content-addressed; the same source met again gains a transition id).
Status AddToCandidate(Txn& t, const StepInput& in, const std::string& hash, uint64_t transition_id,
                      uint64_t now) {
  std::string_view cv;
  fb::CandidateT c;
  Status cs = t.Get(Db::kCandidates, hash, &cv);
  if (cs.ok()) {
    HTAM_RETURN_IF_ERROR(Decode(cv, &c, "candidate"));
  } else if (cs.IsNotFound()) {
    c.hash = hash;
    c.language = in.language;
    c.source = in.source;
    c.created_ns = now;
  } else {
    return cs;
  }
  if (in.status == fb::OutcomeStatus::CompileError && c.compile_log.empty())
    c.compile_log = in.diagnostics;
  c.transition_ids.push_back(transition_id);
  return t.Put(Db::kCandidates, hash, Encode(c));
}

// The session after the step (r, stored with gain): the step's own row, and the record's
// scalars (both the same size at every step).
Status AdvanceSession(Txn& t, const StepInput& in, const fb::TransitionRecord& r, double gain,
                      const std::string& candidate_hash, uint64_t now, fb::SessionT* session) {
  SessionStep row;
  row.direction_id = in.direction_id;
  row.status = in.status;
  if (IsSuccess(r.status(), gain) && r.speedup_after() > session->best_speedup) {
    session->best_speedup = r.speedup_after();
    session->best_verified = Trusted(r);
    session->best_candidate = candidate_hash;
    row.raised_best = true;
  }
  HTAM_RETURN_IF_ERROR(PutSessionStep(t, session->id, session->steps, row));
  session->steps += 1;
  if (in.measured_bottleneck != fb::Bottleneck::Unknown)
    session->measured_bottleneck = in.measured_bottleneck;
  session->updated_ns = now;
  return t.Put(Db::kSessions, KeyU64(session->id), Encode(*session));
}

}  // namespace

uint64_t MemoryImpl::MostSimilarStrategy(Txn& t, const Prepared& p, const NewStrategies& batch_new,
                                         double* similarity) {
  const StepInput& in = p.in;
  const size_t dim = p.summary_vec.size();
  uint64_t best_id = 0;
  double best_sim = -2;
  std::vector<Hit> hits;
  {
    ReaderMutexLock l(&index_mu_);
    auto it = strategy_index_.find(in.direction_id);
    if (it != strategy_index_.end()) hits = it->second->Search(p.summary_vec.data(), 8);
  }
  for (const Hit& h : hits) {
    std::string_view sv;
    if (!t.Get(Db::kStrategies, KeyU64(h.id), &sv).ok()) continue;
    FbView<fb::Strategy> s(sv);
    if (!s || s->merged_into()) continue;
    if (h.similarity > best_sim) best_sim = h.similarity, best_id = h.id;
  }
  for (const auto& [nid, vec] : batch_new) {  // created earlier in this transaction
    std::string_view sv;
    if (!t.Get(Db::kStrategies, KeyU64(nid), &sv).ok()) continue;
    FbView<fb::Strategy> s(sv);
    if (!s || s->direction_id() != in.direction_id || vec.size() != dim) continue;
    double sim = Dot(vec.data(), p.summary_vec.data(), dim);
    if (sim > best_sim) best_sim = sim, best_id = nid;
  }
  *similarity = best_sim;
  return best_id;
}

// Learning a strategy: a success whose summary is new under this direction creates one; a
// near-duplicate is merged into the existing strategy.
Status MemoryImpl::LearnStrategy(Txn& t, const Prepared& p, const fb::SessionT& session,
                                 const PolicyState& ps, uint64_t now, NewStrategies* batch_new,
                                 IndexDelta* delta, fb::TransitionRecordT* rec, StepRecorded* out) {
  double best_sim = -2;
  uint64_t best_id = MostSimilarStrategy(t, p, *batch_new, &best_sim);
  if (best_id && best_sim >= o_.merge_threshold) {
    HTAM_RETURN_IF_ERROR(MergeIntoStrategy(t, best_id, session, now));
    rec->learned_strategy_id = best_id;
    rec->learned_merged = true;
    out->merged_into = best_id;
    return Status::OK();
  }
  HTAM_ASSIGN_OR_RETURN(uint64_t id,
                        CreateLearnedStrategy(t, p.in, p.summary_vec, session, ps, now));
  batch_new->emplace_back(id, p.summary_vec);
  delta->strategies.emplace_back(p.in.direction_id, id);
  delta->strategy_vectors.insert(delta->strategy_vectors.end(), p.summary_vec.begin(),
                                 p.summary_vec.end());
  rec->learned_strategy_id = id;
  rec->learned_merged = false;
  out->new_strategy_id = id;
  return Status::OK();
}

// Everything one step changes, inside the caller's write transaction.
Status MemoryImpl::ApplyStep(Txn& t, const Prepared& p, NewStrategies* batch_new, IndexDelta* delta,
                             StepRecorded* out) {
  const StepInput& in = p.in;
  uint64_t now = NowNs();
  std::string_view v;
  fb::SessionT session;
  HTAM_RETURN_IF_ERROR(ReadOpenSession(t, in.session_id, &session, &v));
  FbView<fb::Session> sview(v);
  // A record keeps the window of history that attention compares (memory.history_length, and
  // the transition table's rows), not the session's whole path: a long session's records stay
  // the same size, and the step reads only that window.
  const size_t window =
      static_cast<size_t>(std::max(o_.history_length, TransitionTable::kHistory));
  PolicyState ps;
  HTAM_RETURN_IF_ERROR(BuildPolicyState(t, *sview, p.state, &ps, false, false, window));
  std::vector<float> key = TransitionKey(ps, o_);
  HTAM_RETURN_IF_ERROR(CheckStrategiesExist(t, in.strategy_ids));

  fb::TransitionRecordT rec;
  HTAM_ASSIGN_OR_RETURN(rec.id, t.NextId(Db::kTransitions));
  double before = session.best_speedup > 0 ? session.best_speedup : 1.0;
  // Through float, as stored: the learning decision agrees with what a rebuild sees.
  const float before_f = static_cast<float>(before), after_f = static_cast<float>(in.speedup_after);
  rec.no_change = in.status == fb::OutcomeStatus::Ok &&
                  NoChange(before_f, after_f, in.median_us, in.spread_us, o_.no_change_ratio);
  rec.vouched = !in.verified && Vouched(session.client);
  double gain = rec.no_change ? 0.0 : StepGain(in.status, before_f, after_f);
  // Only evidence that may promote teaches: a client-reported success creates no strategy
  // unless its client is vouched for (or memory.unverified_can_promote).
  const bool may_teach = in.verified || rec.vouched || o_.unverified_can_promote;
  if (may_teach && IsSuccess(in.status, gain) && !p.summary_vec.empty() && !in.summary.empty())
    HTAM_RETURN_IF_ERROR(LearnStrategy(t, p, session, ps, now, batch_new, delta, &rec, out));

  FillTransitionRecord(in, session, ps, key, before, now, &rec);
  if (rec.history.size() > window)
    rec.history.erase(rec.history.begin(), rec.history.end() - static_cast<ptrdiff_t>(window));
  rec.candidate_hash = p.candidate_hash;
  rec.passed_over_ids = PassedOverIds(p, session.steps);
  std::string rec_bytes = Encode(rec);
  HTAM_RETURN_IF_ERROR(t.Put(Db::kTransitions, KeyU64(rec.id), rec_bytes));
  HTAM_RETURN_IF_ERROR(t.Put(Db::kSessionTransitions, KeyPair(session.id, rec.id), ""));
  FbView<fb::TransitionRecord> r(rec_bytes);
  // Re-read through the stored bytes: statistics see exactly what a rebuild will see (floats).
  double stored_gain = RecordGain(*r);
  HTAM_RETURN_IF_ERROR(AddToStatistics(t, *r, stored_gain, p.candidate_hash, now));
  if (!p.candidate_hash.empty())
    HTAM_RETURN_IF_ERROR(AddToCandidate(t, in, p.candidate_hash, rec.id, now));
  HTAM_RETURN_IF_ERROR(AdvanceSession(t, in, *r, stored_gain, p.candidate_hash, now, &session));

  delta->transition_ids.push_back(rec.id);
  delta->transition_records.push_back(std::move(rec_bytes));
  delta->transition_keys.insert(delta->transition_keys.end(), key.begin(), key.end());
  out->transition_id = rec.id;
  out->best_speedup = session.best_speedup;
  out->step = rec.step;
  return Status::OK();
}

Result<std::vector<StepRecorded>> MemoryImpl::CommitPrepared(
    const std::vector<const Prepared*>& steps) {
  HTAM_RETURN_IF_ERROR(EnsureIndexes());
  std::vector<StepRecorded> outs;
  bool backlog = false;
  {
    MutexLock one(&commit_mu_);  // commits (and their deltas) in order
    // Learning searches the strategy index: it must hold every committed strategy.
    if (std::any_of(steps.begin(), steps.end(),
                    [](const Prepared* p) { return !p->summary_vec.empty(); }))
      WaitApplied();
    IndexDelta delta;
    NewStrategies batch_new;
    HTAM_RETURN_IF_ERROR(store_->Write([&](Txn& t) -> Status {
      // May run again after map growth: start from scratch.
      outs.assign(steps.size(), StepRecorded());
      delta = IndexDelta();
      batch_new.clear();
      for (size_t i = 0; i < steps.size(); ++i)
        HTAM_RETURN_IF_ERROR(ApplyStep(t, *steps[i], &batch_new, &delta, &outs[i]));
      return Status::OK();
    }));
    // Durable now: the commit was synced. Its delta joins the queue in commit order; the applier
    // adds it to the indexes, and every search waits for it first (WaitApplied).
    deltas_.Publish(std::move(delta));
    group_commits_++;
    steps_recorded_ += steps.size();
    // Back-pressure: writes faster than the indexes can take them for long (a sustained
    // overload) wait below, with the commit lock released, so the queue of deltas (about 1 KiB a
    // step) stays bounded.
    constexpr uint64_t kMaxPendingDeltas = 256;
    backlog = deltas_.backlog() > kMaxPendingDeltas;
  }
  if (backlog) WaitApplied();
  return outs;
}

std::vector<Result<StepRecorded>> MemoryImpl::CommitGroup(
    const std::vector<const Prepared*>& steps) {
  std::vector<Result<StepRecorded>> results;
  auto all = CommitPrepared(steps);
  if (all.ok()) {
    for (auto& r : all.value()) results.emplace_back(r);
  } else if (steps.size() == 1) {
    results.emplace_back(all.status());
  } else {
    // One bad step must not fail its neighbours: commit them one by one.
    for (const Prepared* p : steps) {
      auto one = CommitPrepared({p});
      if (one.ok())
        results.emplace_back(one.value()[0]);
      else
        results.emplace_back(one.status());
    }
  }
  return results;
}

Result<StepRecorded> MemoryImpl::RecordStep(const StepInput& in) {
  HTAM_ASSIGN_OR_RETURN(Prepared p, Prepare(in));
  return group_commit_.Submit(&p);
}

Result<std::vector<StepRecorded>> MemoryImpl::RecordSteps(const std::vector<StepInput>& steps) {
  std::vector<Prepared> prepared;
  prepared.reserve(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    auto p = Prepare(steps[i]);
    if (!p.ok()) return p.status().WithContext("step " + std::to_string(i));
    prepared.push_back(std::move(p).value());
  }
  std::vector<const Prepared*> ptrs;
  for (const auto& p : prepared) ptrs.push_back(&p);
  return CommitPrepared(ptrs);
}

Result<std::vector<uint64_t>> MemoryImpl::AddStrategies(std::vector<fb::StrategyT> strategies) {
  if (read_only_) return Status::PermissionDenied("memory opened read-only");
  HTAM_RETURN_IF_ERROR(EnsureIndexes());
  bool builtin = meta_.embedder_model == kBuiltinEmbedder;
  std::set<uint64_t> dirs;
  for (const auto& d : *Directions()) dirs.insert(d.id);
  for (auto& s : strategies) {
    if (!dirs.count(s.direction_id))
      return Status::InvalidArgument("strategy " + s.name + ": no such direction " +
                                     std::to_string(s.direction_id));
    if (s.title.empty()) return Status::InvalidArgument("a strategy needs a title");
    if (s.name.empty()) s.name = Slug(s.title, 6);
    if (s.embedding.empty() && builtin)
      s.embedding = EmbedText(StrategyText(s), meta_.embedder_dim);
    if (!s.embedding.empty() && s.embedding.size() != meta_.embedder_dim)
      return Status::InvalidArgument(
          "strategy " + s.name + ": embedding dimension " + std::to_string(s.embedding.size()) +
          " differs from the store's " + std::to_string(meta_.embedder_dim));
    s.stats = std::make_unique<fb::GainStats>();  // statistics come from records only
    s.example_candidate.clear();
    if (!s.provenance) {
      s.provenance = std::make_unique<fb::ProvenanceT>();
      s.provenance->source = "imported";
    }
  }
  MutexLock one(&commit_mu_);
  std::vector<uint64_t> ids;
  IndexDelta delta;
  HTAM_RETURN_IF_ERROR(store_->Write([&](Txn& t) -> Status {
    ids.clear();
    delta = IndexDelta();
    HTAM_ASSIGN_OR_RETURN(uint64_t next, t.NextId(Db::kStrategies));
    uint64_t now = NowNs();
    for (auto& s : strategies) {
      s.id = next++;
      s.created_ns = s.updated_ns = now;
      HTAM_RETURN_IF_ERROR(t.Put(Db::kStrategies, KeyU64(s.id), Encode(s)));
      HTAM_RETURN_IF_ERROR(t.Put(Db::kDirectionStrategies, KeyPair(s.direction_id, s.id), ""));
      ids.push_back(s.id);
      delta.strategies.emplace_back(s.direction_id, s.id);
      if (s.embedding.empty())
        delta.strategy_vectors.insert(delta.strategy_vectors.end(), meta_.embedder_dim, 0.0f);
      else
        delta.strategy_vectors.insert(delta.strategy_vectors.end(), s.embedding.begin(),
                                      s.embedding.end());
    }
    return Status::OK();
  }));
  deltas_.Publish(std::move(delta));
  one.Unlock();
  WaitApplied();
  return ids;
}

// ---------------------------------------------------------------- rebuild and check

Status MemoryImpl::ComputeDerived(Txn& t, Derived* d) {
  Status inner;
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kTransitions, "", [&](std::string_view k, std::string_view v) {
    FbView<fb::TransitionRecord> r(v);
    if (!r) {
      inner = Status::Corruption("malformed transition record " + std::to_string(DecodeU64(k)));
      return false;
    }
    Accumulate(*r, d);
    return true;
  }));
  return inner;
}

// Edges, direction and strategy statistics and example candidates from a fold of the records,
// in the caller's write transaction (a rebuild, a migration).
Status MemoryImpl::WriteDerived(Txn& t) {
  Derived d;
  HTAM_RETURN_IF_ERROR(ComputeDerived(t, &d));
  HTAM_RETURN_IF_ERROR(t.Clear(Db::kEdges));
  for (const auto& [k, stats] : d.edges) {
    fb::TransitionEdgeT e;
    std::tie(e.from_direction, e.to_direction, e.cluster) = k;
    e.stats = std::make_unique<fb::GainStats>(stats);
    HTAM_RETURN_IF_ERROR(
        t.Put(Db::kEdges, KeyEdge(e.from_direction, e.to_direction, e.cluster), Encode(e)));
  }
  std::vector<std::pair<std::string, std::string>> puts;
  Status inner;
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kDirections, "", [&](std::string_view k, std::string_view v) {
    fb::DirectionT x;
    inner = Decode(v, &x, "direction");
    auto it = d.directions.find(x.id);
    x.stats =
        std::make_unique<fb::GainStats>(it == d.directions.end() ? fb::GainStats() : it->second);
    puts.emplace_back(std::string(k), Encode(x));
    return inner.ok();
  }));
  HTAM_RETURN_IF_ERROR(inner);
  for (const auto& [k, v] : puts) HTAM_RETURN_IF_ERROR(t.Put(Db::kDirections, k, v));
  puts.clear();
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kStrategies, "", [&](std::string_view k, std::string_view v) {
    fb::StrategyT x;
    inner = Decode(v, &x, "strategy");
    auto it = d.strategies.find(x.id);
    x.stats =
        std::make_unique<fb::GainStats>(it == d.strategies.end() ? fb::GainStats() : it->second);
    auto vt = d.verified_strategies.find(x.id);
    x.verified_stats = std::make_unique<fb::GainStats>(
        vt == d.verified_strategies.end() ? fb::GainStats() : vt->second);
    auto ex = d.examples.find(x.id);
    x.example_candidate = ex == d.examples.end() ? "" : ex->second;
    puts.emplace_back(std::string(k), Encode(x));
    return inner.ok();
  }));
  HTAM_RETURN_IF_ERROR(inner);
  for (const auto& [k, v] : puts) HTAM_RETURN_IF_ERROR(t.Put(Db::kStrategies, k, v));
  return Status::OK();
}

Status MemoryImpl::RebuildDerived() {
  if (read_only_) return Status::PermissionDenied("memory opened read-only");
  MutexLock one(&commit_mu_);
  WaitApplied();  // nothing committed may be applied after the rebuild
  HTAM_RETURN_IF_ERROR(store_->Write([&](Txn& t) -> Status {
    HTAM_RETURN_IF_ERROR(WriteDerived(t));
    return RebuildSecondary(t);
  }));
  // The FAISS indexes, from the records.
  {
    MutexLock g(&index_init_mu_);
    WriterMutexLock l(&index_mu_);
    transition_index_ = std::make_unique<VectorIndex>(TransitionIndexOptions());
    strategy_index_.clear();
    ++strategy_epoch_;
    table_.Clear();
    transitions_covered_ = strategies_covered_ = 0;
    snap_transitions_ = snap_strategies_ = 0;
    index_source_ = "rebuilt";
    table_source_ = "rebuilt";
    HTAM_RETURN_IF_ERROR(BuildIndexesFromStore(0, 0, 0));
    indexes_ready_ = true;
  }
  return LoadDirections();
}

namespace {

// Integrity (Check): every session against the task index and its step rows (and the number of
// transitions `steps_of_session` counted for it); the task index and the direction index against
// the records they name (`strategy_dir`: each strategy's direction).
Status CheckSessionsAndIndexes(Txn& t, const std::map<uint64_t, uint64_t>& strategy_dir,
                               std::map<uint64_t, uint32_t>* steps_of_session,
                               const std::function<void(std::string)>& bad) {
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kSessions, "", [&](std::string_view, std::string_view v) {
    FbView<fb::Session> s(v);
    if (!s) return bad("malformed session record"), true;
    std::string_view x;
    if (!t.Get(Db::kTaskSessions, KeyPair(s->task_id(), s->id()), &x).ok())
      bad("session " + std::to_string(s->id()) + " missing from task index");
    if (s->steps() != (*steps_of_session)[s->id()])
      bad("session " + std::to_string(s->id()) + " counts " + std::to_string(s->steps()) +
          " steps, the store holds " + std::to_string((*steps_of_session)[s->id()]));
    uint32_t rows = 0;
    bool in_order = true;
    Status rs = ForEachSessionStep(t, *s, 0, [&](uint32_t step, const SessionStep&) {
      in_order = in_order && step == rows;
      ++rows;
      return true;
    });
    if (!rs.ok())
      bad(rs.message());
    else if (!in_order || rows != s->steps())
      bad("session " + std::to_string(s->id()) + " counts " + std::to_string(s->steps()) +
          " steps, its step rows " + std::to_string(rows) + (in_order ? "" : " (with gaps)"));
    return true;
  }));
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kTaskSessions, "", [&](std::string_view k, std::string_view) {
    std::string_view v;
    if (!t.Get(Db::kSessions, KeyU64(DecodeU64(k, 8)), &v).ok())
      bad("task index names a missing session");
    return true;
  }));
  HTAM_RETURN_IF_ERROR(
      t.Scan(Db::kDirectionStrategies, "", [&](std::string_view k, std::string_view) {
        auto it = strategy_dir.find(DecodeU64(k, 8));
        if (it == strategy_dir.end() || it->second != DecodeU64(k))
          bad("direction index disagrees with strategy " + std::to_string(DecodeU64(k, 8)));
        return true;
      }));
  return Status::OK();
}

}  // namespace

Status MemoryImpl::Check(std::vector<std::string>* problems) {
  problems->clear();
  WaitApplied();
  auto bad = [&](std::string s) { problems->push_back(std::move(s)); };
  if (meta_.schema_version != kStoreSchemaVersion)
    bad("schema version " + std::to_string(meta_.schema_version) + " is not " +
        std::to_string(kStoreSchemaVersion));
  HTAM_ASSIGN_OR_RETURN(Txn t, store_->BeginRead());
  Derived d;
  HTAM_RETURN_IF_ERROR(ComputeDerived(t, &d));
  Status inner;
  // Statistics equal to a rebuild.
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kDirections, "", [&](std::string_view, std::string_view v) {
    FbView<fb::Direction> x(v);
    if (!x) return bad("malformed direction record"), true;
    fb::GainStats want = d.directions.count(x->id()) ? d.directions[x->id()] : fb::GainStats();
    if (!SameStats(x->stats() ? *x->stats() : fb::GainStats(), want))
      bad("direction " + std::to_string(x->id()) + " statistics differ from its records: stored " +
          StatsText(x->stats() ? *x->stats() : fb::GainStats()) + ", records give " +
          StatsText(want));
    return true;
  }));
  size_t embedded = 0;
  std::map<uint64_t, uint64_t> strategy_dir;
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kStrategies, "", [&](std::string_view, std::string_view v) {
    FbView<fb::Strategy> x(v);
    if (!x) return bad("malformed strategy record"), true;
    strategy_dir[x->id()] = x->direction_id();
    if (x->embedding() && x->embedding()->size() == meta_.embedder_dim) ++embedded;
    fb::GainStats want = d.strategies.count(x->id()) ? d.strategies[x->id()] : fb::GainStats();
    if (!SameStats(x->stats() ? *x->stats() : fb::GainStats(), want))
      bad("strategy " + std::to_string(x->id()) + " statistics differ from its records");
    fb::GainStats want_v = d.verified_strategies.count(x->id()) ? d.verified_strategies[x->id()]
                                                                 : fb::GainStats();
    if (!SameStats(x->verified_stats() ? *x->verified_stats() : fb::GainStats(), want_v))
      bad("strategy " + std::to_string(x->id()) +
          " verified statistics differ from its verified records");
    std::string ex = d.examples.count(x->id()) ? d.examples[x->id()] : "";
    if ((x->example_candidate() ? x->example_candidate()->str() : "") != ex)
      bad("strategy " + std::to_string(x->id()) + " example candidate differs from its records");
    std::string_view iv;
    if (!t.Get(Db::kDirectionStrategies, KeyPair(x->direction_id(), x->id()), &iv).ok())
      bad("strategy " + std::to_string(x->id()) + " missing from direction index");
    return true;
  }));
  size_t edges = 0;
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kEdges, "", [&](std::string_view, std::string_view v) {
    FbView<fb::TransitionEdge> e(v);
    ++edges;
    if (!e) return bad("malformed edge record"), true;
    EdgeKey k{e->from_direction(), e->to_direction(), e->cluster()};
    auto it = d.edges.find(k);
    if (it == d.edges.end() || !SameStats(e->stats() ? *e->stats() : fb::GainStats(), it->second))
      bad("edge " + std::to_string(e->from_direction()) + "->" + std::to_string(e->to_direction()) +
          " differs from its records");
    return true;
  }));
  if (edges != d.edges.size())
    bad("store has " + std::to_string(edges) + " edges, records give " +
        std::to_string(d.edges.size()));
  // Secondary indexes agree with the records, both ways.
  std::map<uint64_t, uint32_t> steps_of_session;
  size_t transitions = 0;
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kTransitions, "", [&](std::string_view, std::string_view v) {
    FbView<fb::TransitionRecord> r(v);
    ++transitions;
    steps_of_session[r->session_id()]++;
    std::string_view x;
    if (!t.Get(Db::kSessionTransitions, KeyPair(r->session_id(), r->id()), &x).ok())
      bad("transition " + std::to_string(r->id()) + " missing from session index");
    if (r->candidate_hash() && r->candidate_hash()->size() &&
        !t.Get(Db::kCandidates, r->candidate_hash()->string_view(), &x).ok())
      bad("transition " + std::to_string(r->id()) + " names a missing candidate");
    return true;
  }));
  HTAM_RETURN_IF_ERROR(
      t.Scan(Db::kSessionTransitions, "", [&](std::string_view k, std::string_view) {
        std::string_view v;
        if (!t.Get(Db::kTransitions, KeyU64(DecodeU64(k, 8)), &v).ok()) {
          bad("session index names missing transition " + std::to_string(DecodeU64(k, 8)));
        } else {
          FbView<fb::TransitionRecord> r(v);
          if (r && r->session_id() != DecodeU64(k))
            bad("session index disagrees with transition " + std::to_string(r->id()));
        }
        return true;
      }));
  HTAM_RETURN_IF_ERROR(CheckSessionsAndIndexes(t, strategy_dir, &steps_of_session, bad));
  // FAISS indexes hold every record.
  bool indexes_ready;
  {
    MutexLock g(&index_init_mu_);
    indexes_ready = indexes_ready_;
  }
  if (indexes_ready) {
    ReaderMutexLock l(&index_mu_);
    size_t strat = 0;
    for (const auto& [dir, idx] : strategy_index_) strat += idx->size();
    if (transition_index_->size() != transitions)
      bad("transition index holds " + std::to_string(transition_index_->size()) + " of " +
          std::to_string(transitions) + " records");
    if (strat != embedded)
      bad("strategy index holds " + std::to_string(strat) + " of " + std::to_string(embedded) +
          " embedded strategies");
    // The transition table: one row per record, equal to the record's facts.
    if (table_.rows() != transitions)
      bad("transition table holds " + std::to_string(table_.rows()) + " rows of " +
          std::to_string(transitions) + " records");
    size_t reported = 0;
    HTAM_RETURN_IF_ERROR(t.Scan(
        Db::kTransitions, "", [&](std::string_view, std::string_view v) REQUIRES_SHARED(index_mu_) {
          FbView<fb::TransitionRecord> r(v);
          if (!r) return true;
          std::string diff = table_.Compare(*r, kKeyDim);
          if (!diff.empty() && reported++ < 16)
            bad("transition table row " + std::to_string(r->id()) + ": " + diff);
          return true;
        }));
  }
  if (!problems->empty())
    return Status::Corruption(std::to_string(problems->size()) + " integrity problems");
  return Status::OK();
}

}  // namespace htam::memory
