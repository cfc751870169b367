// Export and import of the memory's records (exchange.h): the only code besides the memory's own
// write paths that puts direction and task names, ids, origins and transition keys in the store.
#include "daemon/memory/exchange.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "daemon/memory/codec.h"
#include "daemon/memory/memory.h"
#include "daemon/memory/memory_impl.h"
#include "daemon/memory/policy.h"
#include "daemon/memory/session_steps.h"
#include "daemon/memory/store.h"
#include "daemon/memory/store_file.h"

namespace htam::memory {
namespace fs = std::filesystem;

std::string StoreId(const fb::StoreMetaT& meta) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(meta.created_ns));
  return b;
}

namespace {

// Origins keys (Db::kOrigins): "o\0<kind>\0<origin>" -> local id (8 bytes BE);
// "r\0<kind>\0<local id BE>" -> origin. kind: "session" or "transition".
std::string OriginKey(const std::string& kind, const std::string& origin) {
  return "o" + std::string(1, '\0') + kind + '\0' + origin;
}
std::string ReverseKey(const std::string& kind, uint64_t id) {
  return "r" + std::string(1, '\0') + kind + '\0' + KeyU64(id);
}

// Reverse origins (kind -> local id -> origin) of a store, read before the memory opens it (one
// environment per process and file).
Result<std::map<std::string, std::map<uint64_t, std::string>>> ReadOrigins(const std::string& dir) {
  std::map<std::string, std::map<uint64_t, std::string>> out;
  HTAM_RETURN_IF_ERROR(InspectDataFile(dir).status());
  HTAM_ASSIGN_OR_RETURN(auto store, Store::Open(dir, /*map_size_mb=*/1, /*max_map_size_mb=*/1,
                                                /*read_only=*/true));
  HTAM_ASSIGN_OR_RETURN(Txn t, store->BeginRead());
  std::string prefix = "r" + std::string(1, '\0');
  HTAM_RETURN_IF_ERROR(t.Scan(Db::kOrigins, prefix, [&](std::string_view k, std::string_view v) {
    std::string_view rest = k.substr(2);
    size_t z = rest.find('\0');
    if (z == std::string_view::npos) return true;
    out[std::string(rest.substr(0, z))][DecodeU64(rest, z + 1)] = std::string(v);
    return true;
  }));
  return out;
}

}  // namespace

// ---------------------------------------------------------------- export

Result<ExchangeSet> ExportStore(const std::string& dir) {
  HTAM_ASSIGN_OR_RETURN(auto origins, ReadOrigins(dir));
  HTAM_ASSIGN_OR_RETURN(auto m, Memory::OpenReadOnly(dir));
  ExchangeSet set;
  HTAM_ASSIGN_OR_RETURN(set.meta, m->GetMeta());
  set.store_id = StoreId(set.meta);
  auto origin = [&](const char* kind, uint64_t id) {
    auto k = origins.find(kind);
    if (k != origins.end()) {
      auto it = k->second.find(id);
      if (it != k->second.end()) return it->second;
    }
    return set.store_id + "/" + std::to_string(id);
  };
  // Each list is its own read transaction while htamd may be writing: transitions first
  // (exchange.h).
  HTAM_ASSIGN_OR_RETURN(auto transitions, m->ListTransitions(0, 0));
  HTAM_ASSIGN_OR_RETURN(auto sessions, m->ListSessions(0, 0));
  HTAM_ASSIGN_OR_RETURN(set.strategies, m->ListStrategies(StrategyFilter{0, "", true, 0}));
  HTAM_ASSIGN_OR_RETURN(set.tasks, m->ListTasks());
  HTAM_ASSIGN_OR_RETURN(set.directions, m->ListDirections());
  HTAM_ASSIGN_OR_RETURN(set.edges, m->ListEdges(0));
  std::sort(transitions.begin(), transitions.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  std::sort(sessions.begin(), sessions.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  std::set<std::string> hashes;
  for (const auto& r : transitions)
    if (!r.candidate_hash.empty()) hashes.insert(r.candidate_hash);
  for (const auto& s : sessions)
    if (!s.best_candidate.empty()) hashes.insert(s.best_candidate);
  for (const auto& s : set.strategies)
    if (!s.example_candidate.empty()) hashes.insert(s.example_candidate);
  for (auto& s : sessions) {
    std::string o = origin("session", s.id);
    set.sessions.push_back({std::move(o), std::move(s)});
  }
  for (auto& r : transitions) {
    std::string o = origin("transition", r.id);
    set.transitions.push_back({std::move(o), std::move(r)});
  }
  for (const auto& h : hashes) {
    auto c = m->GetCandidate(h);
    if (c.ok())
      set.candidates.push_back(std::move(c).value());
    else if (!c.status().IsNotFound())
      return c.status();
  }
  return set;
}

// ---------------------------------------------------------------- import

namespace {

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return -2;
  double d = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += double(a[i]) * b[i];
    na += double(a[i]) * a[i];
    nb += double(b[i]) * b[i];
  }
  return na > 0 && nb > 0 ? d / std::sqrt(na * nb) : -2;
}

class Merger {
 public:
  Merger(Txn* t, const fb::StoreMetaT& meta, const fb::StoreMetaT& theirs, const ImportOptions& o,
         ImportReport* rep)
      : t_(t), meta_(meta), o_(o), rep_(rep), site_(o.site) {
    const std::string& model = theirs.embedder_model;
    uint32_t dim = theirs.embedder_dim;
    same_embedder_ = model == meta.embedder_model && dim == meta.embedder_dim;
    builtin_ = meta.embedder_model == kBuiltinEmbedder;
    if (!same_embedder_)
      rep_->notes.push_back("the export's embedder (" + model + "/" + std::to_string(dim) +
                            ") differs from this store's (" + meta.embedder_model + "/" +
                            std::to_string(meta.embedder_dim) + "): strategy embeddings " +
                            (builtin_ ? "recomputed" : "dropped"));
  }

  // Reads (copies of) the set's records: a rerun after map growth starts from the same set.
  Status Run(const ExchangeSet& f) {
    HTAM_RETURN_IF_ERROR(LoadLocal());
    HTAM_RETURN_IF_ERROR(Directions(f.directions));
    HTAM_RETURN_IF_ERROR(Tasks(f.tasks));
    HTAM_RETURN_IF_ERROR(Sessions(f.sessions));
    HTAM_RETURN_IF_ERROR(Strategies(f.strategies));
    HTAM_RETURN_IF_ERROR(Transitions(f.transitions));
    HTAM_RETURN_IF_ERROR(FinishSessions());
    return Candidates(f.candidates);
  }

 private:
  template <typename T>
  Status Put(Db db, uint64_t id, const T& rec) {
    return t_->Put(db, KeyU64(id), Encode(rec));
  }
  template <typename T>
  Result<T> GetRec(Db db, std::string_view key) {
    std::string_view v;
    HTAM_RETURN_IF_ERROR(t_->Get(db, key, &v));
    T out;
    HTAM_RETURN_IF_ERROR(Decode(v, &out, DbName(db)));
    return out;
  }
  Result<uint64_t> NextId(Db db) {
    uint64_t& next = next_[static_cast<int>(db)];
    if (next == 0) {
      HTAM_ASSIGN_OR_RETURN(next, t_->NextId(db));
    }
    return next++;
  }
  // The local id of a record first recorded at `origin`; 0 when this store does not hold it.
  Result<uint64_t> Origin(const std::string& kind, const std::string& origin) {
    std::string_view v;
    Status s = t_->Get(Db::kOrigins, OriginKey(kind, origin), &v);
    if (s.ok()) return DecodeU64(v);
    if (!s.IsNotFound()) return s;
    // Recorded here (this store's own export, or a copy of this store): "<our store id>/<id>".
    const std::string own = StoreId(meta_) + "/";
    if (origin.compare(0, own.size(), own) != 0) return uint64_t{0};
    std::string num = origin.substr(own.size());
    if (num.empty() || num.size() > 19 || num.find_first_not_of("0123456789") != std::string::npos)
      return uint64_t{0};
    uint64_t id = std::stoull(num);
    Status have = t_->Get(kind == "session" ? Db::kSessions : Db::kTransitions, KeyU64(id), &v);
    if (have.IsNotFound()) return uint64_t{0};
    HTAM_RETURN_IF_ERROR(have);
    return id;
  }
  Status SetOrigin(const std::string& kind, const std::string& origin, uint64_t id) {
    HTAM_RETURN_IF_ERROR(t_->Put(Db::kOrigins, OriginKey(kind, origin), KeyU64(id)));
    return t_->Put(Db::kOrigins, ReverseKey(kind, id), origin);
  }
  static uint64_t Map(const std::map<uint64_t, uint64_t>& m, uint64_t id) {
    auto it = m.find(id);
    return it == m.end() ? 0 : it->second;
  }

  // Local directions and strategies (for matching by name and embedding).
  Status LoadLocal() {
    Status inner;
    HTAM_RETURN_IF_ERROR(t_->Scan(Db::kDirections, "", [&](std::string_view, std::string_view v) {
      fb::DirectionT d;
      inner = Decode(v, &d, "direction");
      if (inner.ok()) dir_by_name_[d.name] = d.id;
      return inner.ok();
    }));
    HTAM_RETURN_IF_ERROR(inner);
    HTAM_RETURN_IF_ERROR(t_->Scan(Db::kTasks, "", [&](std::string_view, std::string_view v) {
      fb::TaskT t;
      inner = Decode(v, &t, "task");
      if (inner.ok()) task_by_name_[t.name] = t.id;
      return inner.ok();
    }));
    HTAM_RETURN_IF_ERROR(inner);
    HTAM_RETURN_IF_ERROR(t_->Scan(Db::kStrategies, "", [&](std::string_view, std::string_view v) {
      fb::StrategyT s;
      inner = Decode(v, &s, "strategy");
      if (inner.ok())
        local_strategies_.push_back(
            {s.id, s.direction_id, s.name, s.embedding, s.merged_into != 0});
      return inner.ok();
    }));
    return inner;
  }

  Status Directions(const std::vector<fb::DirectionT>& items) {
    for (const auto& it : items) {
      fb::DirectionT d = it;
      auto found = dir_by_name_.find(d.name);
      if (found != dir_by_name_.end()) {
        dir_map_[d.id] = found->second;
        rep_->merged["direction"]++;
        continue;
      }
      uint64_t file_id = d.id;
      HTAM_ASSIGN_OR_RETURN(d.id, NextId(Db::kDirections));
      d.stats = std::make_unique<fb::GainStats>();  // rebuilt from the records
      HTAM_RETURN_IF_ERROR(Put(Db::kDirections, d.id, d));
      HTAM_RETURN_IF_ERROR(t_->Put(Db::kDirectionNames, d.name, KeyU64(d.id)));
      dir_map_[file_id] = dir_by_name_[d.name] = d.id;
      rep_->added["direction"]++;
    }
    return Status::OK();
  }

  Status Tasks(const std::vector<fb::TaskT>& items) {
    for (const auto& it : items) {
      fb::TaskT t = it;
      uint64_t file_id = t.id;
      auto found = task_by_name_.find(t.name);
      if (found != task_by_name_.end()) {
        task_map_[file_id] = found->second;
        // Unite the baselines: those of (backend, arch) pairs this store has not measured.
        HTAM_ASSIGN_OR_RETURN(fb::TaskT local,
                              GetRec<fb::TaskT>(Db::kTasks, KeyU64(found->second)));
        bool changed = false;
        for (const auto& b : t.baselines) {
          bool have = false;
          for (const auto& x : local.baselines)
            have = have || (x->backend == b->backend && x->arch == b->arch);
          if (!have) {
            local.baselines.push_back(std::make_unique<fb::BaselineT>(*b));
            changed = true;
          }
        }
        if (changed) HTAM_RETURN_IF_ERROR(Put(Db::kTasks, local.id, local));
        rep_->merged["task"]++;
        continue;
      }
      HTAM_ASSIGN_OR_RETURN(t.id, NextId(Db::kTasks));
      HTAM_RETURN_IF_ERROR(Put(Db::kTasks, t.id, t));
      HTAM_RETURN_IF_ERROR(t_->Put(Db::kTaskNames, t.name, KeyU64(t.id)));
      task_map_[file_id] = task_by_name_[t.name] = t.id;
      rep_->added["task"]++;
    }
    return Status::OK();
  }

  // Session ids first (strategies' provenance and transitions refer to them); records are
  // written by FinishSessions once their transitions are in.
  Status Sessions(const std::vector<WithOrigin<fb::SessionT>>& items) {
    for (const auto& it : items) {
      fb::SessionT s = it.record;
      uint64_t file_id = s.id;
      if (!task_map_.count(s.task_id))
        return Status::InvalidArgument("session " + it.origin + " names task " +
                                       std::to_string(s.task_id) +
                                       " that the export does not hold");
      HTAM_ASSIGN_OR_RETURN(uint64_t local, Origin("session", it.origin));
      bool fresh = local == 0;
      if (fresh) {
        HTAM_ASSIGN_OR_RETURN(local, NextId(Db::kSessions));
        HTAM_RETURN_IF_ERROR(SetOrigin("session", it.origin, local));
      }
      session_map_[file_id] = local;
      pending_sessions_.push_back({std::move(s), local, fresh});
    }
    return Status::OK();
  }

  Status Strategies(const std::vector<fb::StrategyT>& items) {
    std::vector<std::pair<uint64_t, uint64_t>> merged_into;  // (local id, file target)
    for (const auto& it : items) {
      fb::StrategyT s = it;
      uint64_t file_id = s.id;
      uint64_t dir = Map(dir_map_, s.direction_id);
      if (!dir)
        return Status::InvalidArgument("strategy " + s.name + " names direction " +
                                       std::to_string(s.direction_id) +
                                       " that the export does not hold");
      if (!same_embedder_)
        s.embedding =
            builtin_ ? EmbedText(StrategyText(s), meta_.embedder_dim) : std::vector<float>();
      // A local match: same direction and name, else the most similar embedding above the
      // threshold.
      uint64_t match = 0;
      double best = -2;
      // (A strategy merged away matches only by name: it is kept for its history, not merged into.)
      for (const auto& l : local_strategies_) {
        if (l.direction != dir) continue;
        if (l.name == s.name) {
          match = l.id;
          break;
        }
        if (s.merged_into || l.merged) continue;
        double c = Cosine(l.embedding, s.embedding);
        if (c >= o_.merge_threshold && c > best) best = c, match = l.id;
      }
      if (match) {
        strategy_map_[file_id] = match;
        rep_->merged["strategy"]++;
        continue;
      }
      s.direction_id = dir;
      HTAM_ASSIGN_OR_RETURN(s.id, NextId(Db::kStrategies));
      if (!s.provenance) s.provenance = std::make_unique<fb::ProvenanceT>();
      if (s.provenance->site.empty()) s.provenance->site = site_;
      std::vector<uint64_t> tasks, sessions;
      for (uint64_t x : s.provenance->task_ids)
        if (Map(task_map_, x)) tasks.push_back(Map(task_map_, x));
      for (uint64_t x : s.provenance->session_ids)
        if (Map(session_map_, x)) sessions.push_back(Map(session_map_, x));
      s.provenance->task_ids = tasks;
      s.provenance->session_ids = sessions;
      s.stats = std::make_unique<fb::GainStats>();
      s.example_candidate.clear();  // both rebuilt from the records
      if (s.merged_into) merged_into.emplace_back(s.id, s.merged_into);
      s.merged_into = 0;
      HTAM_RETURN_IF_ERROR(Put(Db::kStrategies, s.id, s));
      strategy_map_[file_id] = s.id;
      bool merged = !merged_into.empty() && merged_into.back().first == s.id;
      local_strategies_.push_back({s.id, dir, s.name, s.embedding, merged});
      rep_->added["strategy"]++;
    }
    for (const auto& [local, target] : merged_into) {
      HTAM_ASSIGN_OR_RETURN(fb::StrategyT s, GetRec<fb::StrategyT>(Db::kStrategies, KeyU64(local)));
      s.merged_into = Map(strategy_map_, target);
      HTAM_RETURN_IF_ERROR(Put(Db::kStrategies, local, s));
    }
    return Status::OK();
  }

  Status Transitions(const std::vector<WithOrigin<fb::TransitionRecordT>>& items) {
    MemoryOptions po;  // key layout parameters (history weights) of the policy
    for (const auto& it : items) {
      fb::TransitionRecordT r = it.record;
      uint64_t file_id = r.id;
      HTAM_ASSIGN_OR_RETURN(uint64_t local, Origin("transition", it.origin));
      if (local) {
        transition_map_[file_id] = local;
        rep_->skipped["transition"]++;
        continue;
      }
      r.session_id = Map(session_map_, r.session_id);
      if (!r.session_id)
        return Status::InvalidArgument("transition " + it.origin +
                                       " names a session the export does not hold");
      r.task_id = Map(task_map_, r.task_id);
      uint64_t dir = Map(dir_map_, r.direction_id);
      if (!dir)
        return Status::InvalidArgument("transition " + it.origin + " names an unknown direction");
      bool same_history = true;
      for (auto& h : r.history) {
        uint64_t m = Map(dir_map_, h);
        same_history = same_history && m == h;
        h = m;
      }
      same_history = same_history && dir == r.direction_id;
      r.direction_id = dir;
      for (auto& s : r.strategy_ids) s = Map(strategy_map_, s);
      std::erase(r.strategy_ids, 0);
      r.learned_strategy_id = Map(strategy_map_, r.learned_strategy_id);
      if (!r.learned_strategy_id) r.learned_merged = false;
      for (auto& s : r.passed_over_ids) s = Map(strategy_map_, s);
      std::erase(r.passed_over_ids, 0);
      // The key hashes direction ids of the history: recomputed when they were remapped.
      if (r.state && (!same_history || r.state->vector.size() != kKeyDim)) {
        PolicyState ps;
        ps.category = r.state->category;
        ps.log_size = r.state->log_size;
        ps.intensity = r.state->intensity;
        ps.bottleneck = r.state->bottleneck;
        ps.speedup = r.state->speedup;
        ps.step = r.state->step;
        ps.backend = r.state->backend;
        ps.arch = r.state->arch;
        ps.history = r.history;
        r.state->vector = TransitionKey(ps, po);
      }
      HTAM_ASSIGN_OR_RETURN(r.id, NextId(Db::kTransitions));
      HTAM_RETURN_IF_ERROR(Put(Db::kTransitions, r.id, r));
      HTAM_RETURN_IF_ERROR(SetOrigin("transition", it.origin, r.id));
      transition_map_[file_id] = r.id;
      per_session_[r.session_id]++;
      rep_->added["transition"]++;
    }
    return Status::OK();
  }

  // A session takes the file's record when it is new or the file knows more of its steps.
  Status FinishSessions() {
    for (auto& p : pending_sessions_) {
      fb::SessionT& s = p.record;
      if (!p.fresh) {
        HTAM_ASSIGN_OR_RETURN(fb::SessionT local,
                              GetRec<fb::SessionT>(Db::kSessions, KeyU64(p.local)));
        if (per_session_[p.local] == 0 && local.steps >= s.steps) {
          rep_->skipped["session"]++;
          continue;
        }
      }
      s.id = p.local;
      s.task_id = Map(task_map_, s.task_id);
      for (auto& h : s.history) h = Map(dir_map_, h);
      // steps must equal the transitions the store holds for it (checked by `htam check`).
      if (held_.empty()) HTAM_RETURN_IF_ERROR(CountHeld());
      uint32_t held = held_[s.id];
      s.steps = held;
      HTAM_RETURN_IF_ERROR(PutSessionMovingSteps(*t_, s));
      rep_->added["session"] += p.fresh;
      rep_->merged["session"] += !p.fresh;
    }
    return Status::OK();
  }

  // Transitions per session in the store (once, after the new ones were written).
  Status CountHeld() {
    held_[0] = 0;
    Status inner;
    HTAM_RETURN_IF_ERROR(t_->Scan(Db::kTransitions, "", [&](std::string_view, std::string_view v) {
      fb::TransitionRecordT r;
      inner = Decode(v, &r, "transition");
      if (inner.ok()) held_[r.session_id]++;
      return inner.ok();
    }));
    return inner;
  }

  Status Candidates(const std::vector<fb::CandidateT>& items) {
    for (const auto& it : items) {
      fb::CandidateT c = it;
      std::vector<uint64_t> ids;
      for (uint64_t x : c.transition_ids)
        if (Map(transition_map_, x)) ids.push_back(Map(transition_map_, x));
      auto local = GetRec<fb::CandidateT>(Db::kCandidates, c.hash);
      if (local.ok()) {
        bool changed = false;
        for (uint64_t x : ids)
          if (std::find(local->transition_ids.begin(), local->transition_ids.end(), x) ==
              local->transition_ids.end()) {
            local->transition_ids.push_back(x);
            changed = true;
          }
        if (changed) HTAM_RETURN_IF_ERROR(t_->Put(Db::kCandidates, c.hash, Encode(*local)));
        rep_->merged["candidate"]++;
        continue;
      }
      if (!local.status().IsNotFound()) return local.status();
      if (CandidateHash(c.language, c.source) != c.hash)
        return Status::InvalidArgument("candidate " + c.hash +
                                       " does not match its source (hash differs)");
      c.transition_ids = ids;
      HTAM_RETURN_IF_ERROR(t_->Put(Db::kCandidates, c.hash, Encode(c)));
      rep_->added["candidate"]++;
    }
    return Status::OK();
  }

  struct LocalStrategy {
    uint64_t id, direction;
    std::string name;
    std::vector<float> embedding;
    bool merged;
  };
  struct PendingSession {
    fb::SessionT record;
    uint64_t local;
    bool fresh;
  };

  Txn* t_;
  const fb::StoreMetaT& meta_;
  const ImportOptions& o_;
  ImportReport* rep_;
  std::string site_;
  bool same_embedder_ = true, builtin_ = true;
  uint64_t next_[static_cast<int>(Db::kCount)] = {};
  std::map<std::string, uint64_t> dir_by_name_, task_by_name_;
  std::vector<LocalStrategy> local_strategies_;
  std::map<uint64_t, uint64_t> dir_map_, task_map_, session_map_, strategy_map_, transition_map_;
  std::map<uint64_t, uint32_t> per_session_, held_;
  std::vector<PendingSession> pending_sessions_;
};

}  // namespace

Result<ImportReport> ImportStore(const std::string& dir, ExchangeSet set, const ImportOptions& o) {
  ImportReport rep;
  std::error_code ec;
  fb::StoreMetaT meta;
  if (!fs::exists(dir + "/data.mdb", ec)) {
    if (o.dry_run) return Status::NotFound("no store at " + dir + " (a dry run creates nothing)");
    // A new store, declared with the set's embedder and without a seed: the set brings its
    // directions.
    MemoryOptions mo;
    mo.dir = dir;
    mo.seed_file = "";
    mo.snapshot_interval_s = 0;
    if (!set.meta.embedder_model.empty()) mo.embedder = set.meta.embedder_model;
    if (set.meta.embedder_dim) mo.embedder_dim = set.meta.embedder_dim;
    HTAM_ASSIGN_OR_RETURN(auto m, Memory::Open(mo));
    HTAM_ASSIGN_OR_RETURN(meta, m->GetMeta());
    rep.notes.push_back("created a new store at " + dir);
  } else {
    HTAM_ASSIGN_OR_RETURN(auto m, Memory::OpenReadOnly(dir));
    HTAM_ASSIGN_OR_RETURN(meta, m->GetMeta());
  }
  {
    // Room for the import: the current file plus generous space for the new records (the map
    // grows further if that is not enough).
    HTAM_RETURN_IF_ERROR(InspectDataFile(dir).status());
    uintmax_t have = fs::file_size(dir + "/data.mdb", ec);
    size_t incoming =
        (set.directions.size() + set.tasks.size() + set.strategies.size() + set.sessions.size() +
         set.transitions.size() + set.candidates.size() + set.edges.size()) *
        4096;
    size_t map = static_cast<size_t>(have) * 2 + incoming * 4 + (size_t{256} << 20);
    MemoryOptions defaults;
    HTAM_ASSIGN_OR_RETURN(
        auto store,
        Store::Open(dir, (map >> 20) + 1, std::max(defaults.max_map_size_mb, (map >> 20) + 1),
                    /*read_only=*/false, /*sync=*/true, /*create=*/!o.dry_run));
    ImportReport counted;
    HTAM_RETURN_IF_ERROR(store->Write(
        [&](Txn& t) {
          counted = rep;  // a rerun after the map grew counts again from the start
          Merger merger(&t, meta, set.meta, o, &counted);
          return merger.Run(set);
        },
        /*commit=*/!o.dry_run));
    rep = std::move(counted);
    if (o.dry_run) return rep;  // the transaction was aborted
  }
  // Statistics, edges, secondary and vector indexes follow from the records.
  MemoryOptions mo;
  mo.dir = dir;
  mo.seed_file = "";
  mo.snapshot_interval_s = 0;
  mo.embedder = meta.embedder_model;
  mo.embedder_dim = meta.embedder_dim;
  HTAM_ASSIGN_OR_RETURN(auto m, Memory::Open(mo));
  HTAM_RETURN_IF_ERROR(m->RebuildDerived().WithContext("rebuilding after the import"));
  HTAM_RETURN_IF_ERROR(m->SnapshotIndexes());
  return rep;
}

}  // namespace htam::memory
