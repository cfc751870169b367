// Export and import of the memory as JSON Lines (format in exchange.h), and `htam export|import`.
#include "tools/cli/exchange.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "daemon/memory/codec.h"
#include "daemon/memory/memory.h"
#include "daemon/memory/policy.h"
#include "daemon/memory/store.h"
#include "tools/cli/cli.h"
#include "tools/cli/lmdb_raw.h"
#include "tools/cli/lock.h"
#include "tools/cli/table.h"

namespace htam::cli {
namespace fs = std::filesystem;
using memory::Db;
using memory::DbName;
using memory::KeyU64;

namespace {

std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::string HostName() {
  char b[256] = {};
  if (::gethostname(b, sizeof b - 1) != 0 || !b[0]) return "site";
  return b;
}

// Origins DB keys: "o\0<origin>" -> local id (8 bytes BE); "r\0<kind>\0<local id BE>" -> origin.
std::string OriginKey(const std::string& kind, const std::string& origin) {
  return "o" + std::string(1, '\0') + kind + '\0' + origin;
}
std::string ReverseKey(const std::string& kind, uint64_t id) {
  return "r" + std::string(1, '\0') + kind + '\0' + KeyU64(id);
}

// Reverse origins (kind -> local id -> origin) of a store, read before the memory opens it.
Result<std::map<std::string, std::map<uint64_t, std::string>>> ReadOrigins(const std::string& dir) {
  std::map<std::string, std::map<uint64_t, std::string>> out;
  HTAM_ASSIGN_OR_RETURN(auto env, RawEnv::OpenRead(dir));
  HTAM_ASSIGN_OR_RETURN(auto t, RawTxn::Begin(env.get()));
  std::string prefix = "r" + std::string(1, '\0');
  HTAM_RETURN_IF_ERROR(t->Scan(kOriginsDb, prefix, [&](std::string_view k, std::string_view v) {
    std::string_view rest = k.substr(2);
    size_t z = rest.find('\0');
    if (z == std::string_view::npos) return true;
    out[std::string(rest.substr(0, z))][memory::DecodeU64(rest, z + 1)] = std::string(v);
    return true;
  }));
  return out;
}

void Line(std::ostream& out, const char* type, Json record, std::map<std::string, size_t>* counts,
          const std::string& origin = "") {
  Json j{{"type", type}};
  if (!origin.empty()) j["origin"] = origin;
  j["record"] = std::move(record);
  out << j.dump() << "\n";
  (*counts)[type]++;
}

}  // namespace

// ---------------------------------------------------------------- export

Status ExportStore(const std::string& dir, const ExportOptions& o, std::ostream& out,
                   std::map<std::string, size_t>* counts) {
  HTAM_ASSIGN_OR_RETURN(auto origins, ReadOrigins(dir));
  HTAM_ASSIGN_OR_RETURN(auto m, memory::Memory::OpenReadOnly(dir));
  HTAM_ASSIGN_OR_RETURN(fb::StoreMetaT meta, m->GetMeta());
  const std::string store_id = Hex(meta.created_ns);
  const std::string site = o.site.empty() ? HostName() : o.site;
  auto origin = [&](const char* kind, uint64_t id) {
    auto k = origins.find(kind);
    if (k != origins.end()) {
      auto it = k->second.find(id);
      if (it != k->second.end()) return it->second;
    }
    return store_id + "/" + std::to_string(id);
  };
  counts->clear();
  out << Json{{"format", kExportFormat},
              {"version", kExportVersion},
              {"site", site},
              {"store_id", store_id},
              {"schema_version", meta.schema_version},
              {"embedder", {{"model", meta.embedder_model}, {"dim", meta.embedder_dim}}},
              {"htam_version", HTAM_VERSION}}
             .dump()
      << "\n";
  // Each list is its own read transaction while htamd may be writing: transitions are read first,
  // so every session, strategy and candidate they name is in the later reads (records are never
  // deleted). A session may then count a step more than the file holds; import recounts them.
  HTAM_ASSIGN_OR_RETURN(auto transitions, m->ListTransitions(0, 0));
  HTAM_ASSIGN_OR_RETURN(auto sessions, m->ListSessions(0, 0));
  HTAM_ASSIGN_OR_RETURN(auto strategies, m->ListStrategies(memory::StrategyFilter{0, "", true, 0}));
  HTAM_ASSIGN_OR_RETURN(auto tasks, m->ListTasks());
  HTAM_ASSIGN_OR_RETURN(auto dirs, m->ListDirections());
  HTAM_ASSIGN_OR_RETURN(auto edges, m->ListEdges(0));
  std::sort(transitions.begin(), transitions.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  std::sort(sessions.begin(), sessions.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  for (const auto& d : dirs) Line(out, "direction", ToJson(d), counts);
  for (const auto& t : tasks) Line(out, "task", ToJson(t), counts);
  for (const auto& s : strategies)
    Line(out, "strategy", ToJson(s, /*with_embedding=*/true), counts);
  for (const auto& s : sessions) Line(out, "session", ToJson(s), counts, origin("session", s.id));
  std::set<std::string> hashes;
  for (const auto& r : transitions) {
    Line(out, "transition", ToJson(r, /*with_vector=*/true), counts, origin("transition", r.id));
    if (!r.candidate_hash.empty()) hashes.insert(r.candidate_hash);
  }
  for (const auto& s : sessions)
    if (!s.best_candidate.empty()) hashes.insert(s.best_candidate);
  for (const auto& s : strategies)
    if (!s.example_candidate.empty()) hashes.insert(s.example_candidate);
  for (const auto& h : hashes) {
    auto c = m->GetCandidate(h);
    if (c.ok())
      Line(out, "candidate", ToJson(*c), counts);
    else if (!c.status().IsNotFound())
      return c.status();
  }
  for (const auto& e : edges) Line(out, "edge", ToJson(e), counts);
  Json jc = Json::object();
  for (const auto& [k, v] : *counts) jc[k] = v;
  out << Json{{"type", "end"}, {"counts", jc}}.dump() << "\n";
  if (!out) return Status::IOError("writing the export failed");
  return Status::OK();
}

// ---------------------------------------------------------------- import: reading

namespace {

struct Item {
  std::string origin;
  Json record;
};

struct ExportFile {
  Json header;
  std::map<std::string, std::vector<Item>> items;  // by type
};

Result<ExportFile> ReadExport(std::istream& in) {
  ExportFile f;
  std::string line;
  size_t n = 0;
  bool ended = false;
  std::map<std::string, size_t> counts;
  static const std::set<std::string> kTypes = {"direction",  "task",      "strategy", "session",
                                               "transition", "candidate", "edge"};
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, false);
    std::string where = "line " + std::to_string(n);
    if (j.is_discarded() || !j.is_object())
      return Status::InvalidArgument(where + " is not a JSON object");
    if (n == 1) {
      if (j.value("format", "") != kExportFormat)
        return Status::InvalidArgument(
            "not an htam export (the first line must be the header "
            "{\"format\":\"htam-export\",...})");
      if (!j.contains("version") || !j["version"].is_number_integer())
        return Status::InvalidArgument("the export header has no version");
      int v = j["version"].get<int>();
      if (v > kExportVersion)
        return Status::FailedPrecondition("export format version " + std::to_string(v) +
                                          " is newer than this htam reads (" +
                                          std::to_string(kExportVersion) + "): upgrade htam");
      if (v < 1)
        return Status::InvalidArgument("export format version " + std::to_string(v) +
                                       " is unknown");
      f.header = j;
      continue;
    }
    if (ended) return Status::InvalidArgument(where + ": data after the end line");
    std::string type = j.value("type", "");
    if (type == "end") {
      ended = true;
      Json want = j.value("counts", Json::object());
      for (const auto& [k, v] : want.items())
        if (!v.is_number_unsigned() || counts[k] != v.get<size_t>())
          return Status::InvalidArgument("the export is inconsistent: its end line counts " +
                                         v.dump() + " " + k + " record(s), the file holds " +
                                         std::to_string(counts[k]));
      continue;
    }
    if (!kTypes.count(type))
      return Status::InvalidArgument(where + ": unknown record type \"" + type + "\"");
    if (!j.contains("record") || !j["record"].is_object())
      return Status::InvalidArgument(where + ": no record");
    Item it;
    it.origin = j.value("origin", "");
    if ((type == "session" || type == "transition") && it.origin.empty())
      return Status::InvalidArgument(where + ": a " + type + " needs an origin");
    it.record = std::move(j["record"]);
    f.items[type].push_back(std::move(it));
    counts[type]++;
  }
  if (n == 0) return Status::InvalidArgument("the export is empty");
  if (!ended) return Status::InvalidArgument("the export is truncated (no end line)");
  return f;
}

// ---------------------------------------------------------------- import: merging

// The text the memory embeds a strategy from (memory_impl.h StrategyText; not public).
std::string StrategyText(const fb::StrategyT& s) {
  return s.title + ". " + s.description + " " + s.name;
}

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
  Merger(RawTxn* t, const fb::StoreMetaT& meta, const Json& header, const ImportOptions& o,
         ImportReport* rep)
      : t_(t), meta_(meta), o_(o), rep_(rep) {
    std::string model = header.value("embedder", Json::object()).value("model", "");
    uint32_t dim = header.value("embedder", Json::object()).value("dim", 0u);
    same_embedder_ = model == meta.embedder_model && dim == meta.embedder_dim;
    builtin_ = meta.embedder_model == memory::kBuiltinEmbedder;
    if (!same_embedder_)
      rep_->notes.push_back("the export's embedder (" + model + "/" + std::to_string(dim) +
                            ") differs from this store's (" + meta.embedder_model + "/" +
                            std::to_string(meta.embedder_dim) + "): strategy embeddings " +
                            (builtin_ ? "recomputed" : "dropped"));
  }

  Status Run(ExportFile& f) {
    HTAM_RETURN_IF_ERROR(LoadLocal());
    HTAM_RETURN_IF_ERROR(Directions(f.items["direction"]));
    HTAM_RETURN_IF_ERROR(Tasks(f.items["task"]));
    HTAM_RETURN_IF_ERROR(Sessions(f.items["session"]));
    HTAM_RETURN_IF_ERROR(Strategies(f.items["strategy"]));
    HTAM_RETURN_IF_ERROR(Transitions(f.items["transition"]));
    HTAM_RETURN_IF_ERROR(FinishSessions());
    HTAM_RETURN_IF_ERROR(Candidates(f.items["candidate"]));
    rep_->skipped["edge"] = f.items["edge"].size();  // derived: recomputed from the records
    return Status::OK();
  }

 private:
  template <typename T>
  Status Put(Db db, uint64_t id, const T& rec) {
    return t_->Put(DbName(db), KeyU64(id), memory::Encode(rec));
  }
  template <typename T>
  Result<T> GetRec(Db db, std::string_view key) {
    std::string v;
    HTAM_RETURN_IF_ERROR(t_->Get(DbName(db), key, &v));
    T out;
    HTAM_RETURN_IF_ERROR(memory::Decode(v, &out, DbName(db)));
    return out;
  }
  Result<uint64_t> NextId(Db db) {
    uint64_t& next = next_[static_cast<int>(db)];
    if (next == 0) {
      std::string k;
      Status s = t_->Last(DbName(db), &k);
      if (s.IsNotFound())
        next = 1;
      else if (!s.ok())
        return s;
      else
        next = memory::DecodeU64(k) + 1;
    }
    return next++;
  }
  // The local id of a record first recorded at `origin`; 0 when this store does not hold it.
  Result<uint64_t> Origin(const std::string& kind, const std::string& origin) {
    std::string v;
    Status s = t_->Get(kOriginsDb, OriginKey(kind, origin), &v);
    if (s.ok()) return memory::DecodeU64(v);
    if (!s.IsNotFound()) return s;
    // Recorded here (this store's own export, or a copy of this store): "<our store id>/<id>".
    const std::string own = Hex(meta_.created_ns) + "/";
    if (origin.compare(0, own.size(), own) != 0) return uint64_t{0};
    std::string num = origin.substr(own.size());
    if (num.empty() || num.size() > 19 || num.find_first_not_of("0123456789") != std::string::npos)
      return uint64_t{0};
    uint64_t id = std::stoull(num);
    Status have =
        t_->Get(DbName(kind == "session" ? Db::kSessions : Db::kTransitions), KeyU64(id), &v);
    if (have.IsNotFound()) return uint64_t{0};
    HTAM_RETURN_IF_ERROR(have);
    return id;
  }
  Status SetOrigin(const std::string& kind, const std::string& origin, uint64_t id) {
    HTAM_RETURN_IF_ERROR(t_->Put(kOriginsDb, OriginKey(kind, origin), KeyU64(id)));
    return t_->Put(kOriginsDb, ReverseKey(kind, id), origin);
  }
  static uint64_t Map(const std::map<uint64_t, uint64_t>& m, uint64_t id) {
    auto it = m.find(id);
    return it == m.end() ? 0 : it->second;
  }

  // Local directions and strategies (for matching by name and embedding).
  Status LoadLocal() {
    Status inner;
    HTAM_RETURN_IF_ERROR(
        t_->Scan(DbName(Db::kDirections), "", [&](std::string_view, std::string_view v) {
          fb::DirectionT d;
          inner = memory::Decode(v, &d, "direction");
          if (inner.ok()) dir_by_name_[d.name] = d.id;
          return inner.ok();
        }));
    HTAM_RETURN_IF_ERROR(inner);
    HTAM_RETURN_IF_ERROR(
        t_->Scan(DbName(Db::kTasks), "", [&](std::string_view, std::string_view v) {
          fb::TaskT t;
          inner = memory::Decode(v, &t, "task");
          if (inner.ok()) task_by_name_[t.name] = t.id;
          return inner.ok();
        }));
    HTAM_RETURN_IF_ERROR(inner);
    HTAM_RETURN_IF_ERROR(
        t_->Scan(DbName(Db::kStrategies), "", [&](std::string_view, std::string_view v) {
          fb::StrategyT s;
          inner = memory::Decode(v, &s, "strategy");
          if (inner.ok())
            local_strategies_.push_back(
                {s.id, s.direction_id, s.name, s.embedding, s.merged_into != 0});
          return inner.ok();
        }));
    return inner;
  }

  Status Directions(std::vector<Item>& items) {
    for (auto& it : items) {
      fb::DirectionT d;
      HTAM_RETURN_IF_ERROR(FromJson(it.record, &d));
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
      HTAM_RETURN_IF_ERROR(t_->Put(DbName(Db::kDirectionNames), d.name, KeyU64(d.id)));
      dir_map_[file_id] = dir_by_name_[d.name] = d.id;
      rep_->added["direction"]++;
    }
    return Status::OK();
  }

  Status Tasks(std::vector<Item>& items) {
    for (auto& it : items) {
      fb::TaskT t;
      HTAM_RETURN_IF_ERROR(FromJson(it.record, &t));
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
      HTAM_RETURN_IF_ERROR(t_->Put(DbName(Db::kTaskNames), t.name, KeyU64(t.id)));
      task_map_[file_id] = task_by_name_[t.name] = t.id;
      rep_->added["task"]++;
    }
    return Status::OK();
  }

  // Session ids first (strategies' provenance and transitions refer to them); records are
  // written by FinishSessions once their transitions are in.
  Status Sessions(std::vector<Item>& items) {
    for (auto& it : items) {
      fb::SessionT s;
      HTAM_RETURN_IF_ERROR(FromJson(it.record, &s));
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

  Status Strategies(std::vector<Item>& items) {
    std::vector<std::pair<uint64_t, uint64_t>> merged_into;  // (local id, file target)
    for (auto& it : items) {
      fb::StrategyT s;
      HTAM_RETURN_IF_ERROR(FromJson(it.record, &s));
      uint64_t file_id = s.id;
      uint64_t dir = Map(dir_map_, s.direction_id);
      if (!dir)
        return Status::InvalidArgument("strategy " + s.name + " names direction " +
                                       std::to_string(s.direction_id) +
                                       " that the export does not hold");
      if (!same_embedder_)
        s.embedding = builtin_ ? memory::EmbedText(StrategyText(s), meta_.embedder_dim)
                               : std::vector<float>();
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

  Status Transitions(std::vector<Item>& items) {
    memory::MemoryOptions po;  // key layout parameters (history weights) of the policy
    for (auto& it : items) {
      fb::TransitionRecordT r;
      HTAM_RETURN_IF_ERROR(FromJson(it.record, &r));
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
      if (r.state && (!same_history || r.state->vector.size() != memory::kKeyDim)) {
        memory::PolicyState ps;
        ps.category = r.state->category;
        ps.log_size = r.state->log_size;
        ps.intensity = r.state->intensity;
        ps.bottleneck = r.state->bottleneck;
        ps.speedup = r.state->speedup;
        ps.step = r.state->step;
        ps.backend = r.state->backend;
        ps.arch = r.state->arch;
        ps.history = r.history;
        r.state->vector = memory::TransitionKey(ps, po);
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
      HTAM_RETURN_IF_ERROR(Put(Db::kSessions, s.id, s));
      rep_->added["session"] += p.fresh;
      rep_->merged["session"] += !p.fresh;
    }
    return Status::OK();
  }

  // Transitions per session in the store (once, after the new ones were written).
  Status CountHeld() {
    held_[0] = 0;
    Status inner;
    HTAM_RETURN_IF_ERROR(
        t_->Scan(DbName(Db::kTransitions), "", [&](std::string_view, std::string_view v) {
          fb::TransitionRecordT r;
          inner = memory::Decode(v, &r, "transition");
          if (inner.ok()) held_[r.session_id]++;
          return inner.ok();
        }));
    return inner;
  }

  Status Candidates(std::vector<Item>& items) {
    for (auto& it : items) {
      fb::CandidateT c;
      HTAM_RETURN_IF_ERROR(FromJson(it.record, &c));
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
        if (changed)
          HTAM_RETURN_IF_ERROR(t_->Put(DbName(Db::kCandidates), c.hash, memory::Encode(*local)));
        rep_->merged["candidate"]++;
        continue;
      }
      if (!local.status().IsNotFound()) return local.status();
      if (memory::CandidateHash(c.language, c.source) != c.hash)
        return Status::InvalidArgument("candidate " + c.hash +
                                       " does not match its source (hash differs)");
      c.transition_ids = ids;
      HTAM_RETURN_IF_ERROR(t_->Put(DbName(Db::kCandidates), c.hash, memory::Encode(c)));
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

  RawTxn* t_;
  const fb::StoreMetaT& meta_;
  const ImportOptions& o_;
  ImportReport* rep_;

 public:
  std::string site_;

 private:
  bool same_embedder_ = true, builtin_ = true;
  uint64_t next_[static_cast<int>(Db::kCount)] = {};
  std::map<std::string, uint64_t> dir_by_name_, task_by_name_;
  std::vector<LocalStrategy> local_strategies_;
  std::map<uint64_t, uint64_t> dir_map_, task_map_, session_map_, strategy_map_, transition_map_;
  std::map<uint64_t, uint32_t> per_session_, held_;
  std::vector<PendingSession> pending_sessions_;
};

}  // namespace

Result<ImportReport> ImportStore(const std::string& dir, std::istream& in, const ImportOptions& o) {
  HTAM_ASSIGN_OR_RETURN(ExportFile f, ReadExport(in));
  ImportReport rep;
  rep.site = f.header.value("site", "");
  std::error_code ec;
  fb::StoreMetaT meta;
  if (!fs::exists(dir + "/data.mdb", ec)) {
    if (o.dry_run) return Status::NotFound("no store at " + dir + " (a dry run creates nothing)");
    // A new store, declared with the export's embedder and without a seed: the export brings its
    // directions.
    memory::MemoryOptions mo;
    mo.dir = dir;
    mo.seed_file = "";
    mo.snapshot_interval_s = 0;
    Json e = f.header.value("embedder", Json::object());
    mo.embedder = e.value("model", std::string(memory::kBuiltinEmbedder));
    mo.embedder_dim = e.value("dim", 256u);
    HTAM_ASSIGN_OR_RETURN(auto m, memory::Memory::Open(mo));
    HTAM_ASSIGN_OR_RETURN(meta, m->GetMeta());
    rep.notes.push_back("created a new store at " + dir);
  } else {
    HTAM_ASSIGN_OR_RETURN(auto m, memory::Memory::OpenReadOnly(dir));
    HTAM_ASSIGN_OR_RETURN(meta, m->GetMeta());
  }
  {
    // Room for the import: the current file plus generous space for the new records.
    uintmax_t have = fs::file_size(dir + "/data.mdb", ec);
    size_t incoming = 0;
    for (const auto& [type, items] : f.items) incoming += items.size() * 4096;
    size_t map = static_cast<size_t>(have) * 2 + incoming * 4 + (size_t{256} << 20);
    HTAM_ASSIGN_OR_RETURN(auto env, RawEnv::OpenWrite(dir, map));
    HTAM_ASSIGN_OR_RETURN(auto txn, RawTxn::Begin(env.get()));
    Merger merger(txn.get(), meta, f.header, o, &rep);
    merger.site_ = rep.site;
    HTAM_RETURN_IF_ERROR(merger.Run(f));
    if (o.dry_run) return rep;  // the transaction aborts
    HTAM_RETURN_IF_ERROR(txn->Commit());
  }
  // Statistics, edges, secondary and vector indexes follow from the records.
  memory::MemoryOptions mo;
  mo.dir = dir;
  mo.seed_file = "";
  mo.snapshot_interval_s = 0;
  mo.embedder = meta.embedder_model;
  mo.embedder_dim = meta.embedder_dim;
  HTAM_ASSIGN_OR_RETURN(auto m, memory::Memory::Open(mo));
  HTAM_RETURN_IF_ERROR(m->RebuildDerived().WithContext("rebuilding after the import"));
  HTAM_RETURN_IF_ERROR(m->SnapshotIndexes());
  return rep;
}

// ---------------------------------------------------------------- subcommands

int CmdExport(Context& c) {
  po::options_description o("export options");
  std::string out;
  ExportOptions eo;
  o.add_options()("output,o", po::value(&out), "write to this file (default: stdout)")(
      "site", po::value(&eo.site), "name of this site in the export (default: the host name)");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "[-o FILE.jsonl] [--site NAME]", o, {}, &vm, &done);
  if (done) return rc;
  if (!c.g.connect.empty())
    return Fail(c, "export reads the store itself: use --data-dir, not --connect");
  std::string store = StoreDir(c.g.data_dir);
  std::error_code ec;
  if (!fs::exists(store + "/data.mdb", ec)) return Fail(c, "no htam store at " + store);
  std::map<std::string, size_t> counts;
  if (out.empty()) {
    Status s = ExportStore(store, eo, c.out, &counts);
    return s.ok() ? kExitOk : Fail(c, s);
  }
  std::string tmp = out + ".partial";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Fail(c, "cannot write " + tmp);
    Status s = ExportStore(store, eo, f, &counts);
    f.flush();
    if (!s.ok() || !f) {
      fs::remove(tmp, ec);
      return Fail(c, s.ok() ? Status::IOError("writing " + tmp + " failed") : s);
    }
  }
  fs::rename(tmp, out, ec);
  if (ec) return Fail(c, "cannot rename " + tmp + " to " + out + ": " + ec.message());
  if (c.g.json) {
    Json j = Json::object();
    for (const auto& [k, v] : counts) j[k] = v;
    PrintJson(c, Json{{"file", out}, {"counts", j}});
  } else {
    c.out << "exported to " << out << ":";
    for (const auto& [k, v] : counts)
      c.out << " " << v << " " << (v == 1 ? k : k == "strategy" ? "strategies" : k + "s");
    c.out << "\n";
  }
  return kExitOk;
}

int CmdImport(Context& c) {
  po::options_description o("import options");
  ImportOptions io;
  o.add_options()("merge-threshold",
                  po::value(&io.merge_threshold)->default_value(io.merge_threshold),
                  "cosine similarity above which an imported strategy merges into a local one")(
      "dry-run", po::bool_switch(&io.dry_run), "check and report what would change; write nothing");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "<file.jsonl> [--data-dir DIR] [--dry-run]", o, {{"file", 1}}, &vm, &done);
  if (done) return rc;
  if (!c.g.connect.empty())
    return Fail(c, "import writes the store itself (htamd stopped): use --data-dir, not --connect");
  std::string file = vm["file"].as<std::vector<std::string>>()[0];
  std::ifstream in(file, std::ios::binary);
  if (!in) return Fail(c, "cannot read " + file);
  auto lock = DataDirLock::Acquire(c.g.data_dir);
  if (!lock.ok()) return Fail(c, lock.status().WithContext("import needs htamd stopped"));
  auto rep = ImportStore(StoreDir(c.g.data_dir), in, io);
  if (!rep.ok()) return Fail(c, rep.status().WithContext("importing " + file));
  if (c.g.json) {
    PrintJson(c, Json{{"file", file},
                      {"site", rep->site},
                      {"dry_run", io.dry_run},
                      {"added", rep->added},
                      {"merged", rep->merged},
                      {"skipped", rep->skipped},
                      {"notes", rep->notes}});
    return kExitOk;
  }
  for (const auto& n : rep->notes) c.out << "note: " << n << "\n";
  c.out << (io.dry_run ? "would import " : "imported ") << file << " from site " << rep->site
        << "\n";
  Table t({"kind", ">added", ">merged", ">already here"});
  for (const char* k : {"direction", "task", "strategy", "session", "transition", "candidate"})
    t.Add({k, std::to_string(rep->added[k]), std::to_string(rep->merged[k]),
           std::to_string(rep->skipped[k])});
  t.Print(c.out);
  return kExitOk;
}

}  // namespace htam::cli
