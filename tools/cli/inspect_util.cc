// Building blocks of the read-only subcommands (see inspect_util.h).
#include "tools/cli/inspect_util.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "tools/cli/cli.h"
#include "tools/cli/lock.h"
#include "tools/cli/table.h"

namespace htam::cli {

double StepGain(fb::OutcomeStatus status, double before, double after) {
  if (status != fb::OutcomeStatus::Ok || before <= 0 || after <= 0) return 0.0;
  return std::log(after / before);
}

// ---------------------------------------------------------------- status

namespace {
Json Scalar(const std::string& v) {
  if (v.empty()) return v;
  char* end = nullptr;
  long long i = std::strtoll(v.c_str(), &end, 10);
  if (end && *end == '\0') return i;
  double d = std::strtod(v.c_str(), &end);
  if (end && *end == '\0') return d;
  return v;
}

// Header of a FAISS snapshot file (daemon/memory/vector_index.h): magic "HTAMIDX1", u32 format,
// u32 dim, u64 store tag, u64 covered id. Returns false when absent or not a snapshot.
bool SnapshotCoverage(const std::string& path, uint64_t* covered, uint64_t* tag, int64_t* age_s) {
  std::ifstream f(path, std::ios::binary);
  char h[32];
  if (!f.read(h, sizeof h) || std::memcmp(h, "HTAMIDX1", 8) != 0) return false;
  std::memcpy(tag, h + 16, 8);
  std::memcpy(covered, h + 24, 8);
  struct stat st;
  *age_s =
      ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(::time(nullptr) - st.st_mtime) : -1;
  return true;
}
}  // namespace

Json ParseInfo(const std::string& text) {
  Json out = Json::object();
  std::string section = "info", line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '#') {
      section = line.substr(line.find_first_not_of("# ") == std::string::npos
                                ? line.size()
                                : line.find_first_not_of("# "));
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    while (!v.empty() && v[0] == ' ') v.erase(0, 1);
    out[section][line.substr(0, colon)] = Scalar(v);
  }
  return out;
}

std::string FormatInfo(const Json& sections) {
  std::ostringstream o;
  bool first = true;
  for (const auto& [name, kv] : sections.items()) {
    if (!first) o << "\n";
    first = false;
    o << "# " << name << "\n";
    for (const auto& [k, v] : kv.items())
      o << k << ": "
        << (v.is_string() ? v.get<std::string>()
                          : v.dump(-1, ' ', false, Json::error_handler_t::replace))
        << "\n";
  }
  return o.str();
}

Result<Json> LocalStatus(const std::string& data_dir) {
  auto src = OpenLocal(data_dir);
  if (!src.ok()) return src.status();
  memory::Memory* m = (*src)->local();
  Json mem = ParseInfo(m->StatusText())["memory"];
  auto meta = m->GetMeta();
  if (!meta.ok()) return meta.status();
  std::string pid;
  bool running = DaemonRunning(data_dir, &pid);
  Json store = Json::object();
  store["data_dir"] = data_dir;
  store["store_dir"] = StoreDir(data_dir);
  store["schema_version"] = meta->schema_version;
  store["supported_schema_version"] = memory::kStoreSchemaVersion;
  store["writer_version"] = meta->writer_version;
  store["embedder"] = meta->embedder_model;
  store["embedder_dim"] = meta->embedder_dim;
  store["file_bytes"] = mem.value("store_file_bytes", Json(0));
  store["daemon_running"] =
      running ? "yes" + (pid.empty() ? std::string() : " (pid " + pid + ")") : "no";

  Json records = Json::object();
  for (const char* k :
       {"directions", "strategies", "transitions", "edges", "tasks", "sessions", "candidates"})
    records[k] = mem.value(k, Json(0));
  auto strategies = m->ListStrategies(memory::StrategyFilter{0, "", true, 0});
  if (!strategies.ok()) return strategies.status();
  uint64_t max_strategy = 0, merged = 0;
  for (const auto& s : *strategies) {
    max_strategy = std::max(max_strategy, s.id);
    merged += s.merged_into != 0;
  }
  records["strategies_merged"] = merged;
  auto sessions = m->ListSessions(0, 0);
  if (!sessions.ok()) return sessions.status();
  size_t open = 0;
  for (const auto& s : *sessions) open += s.state == fb::SessionState::Open;
  records["sessions_open"] = open;

  auto last = m->ListTransitions(0, 1);
  if (!last.ok()) return last.status();
  uint64_t max_transition = last->empty() ? 0 : (*last)[0].id;
  Json idx = Json::object();
  for (auto [kind, newest] : {std::pair<const char*, uint64_t>{"transitions", max_transition},
                              std::pair<const char*, uint64_t>{"strategies", max_strategy}}) {
    uint64_t covered = 0, tag = 0;
    int64_t age = -1;
    std::string path = StoreDir(data_dir) + "/" + kind + ".idx";
    std::string k = std::string(kind) + "_snapshot";
    if (!SnapshotCoverage(path, &covered, &tag, &age)) {
      idx[k] = "none (rebuilt from records on open)";
    } else if (tag != meta->created_ns) {
      idx[k] = "belongs to another store (rebuilt on open)";
    } else {
      idx[k] = covered >= newest ? "fresh" : std::to_string(newest - covered) + " id(s) behind";
      idx[k + "_covered_id"] = covered;
      idx[k + "_age_s"] = age;
    }
    idx[std::string("newest_") + (kind == std::string("transitions") ? "transition" : "strategy") +
        "_id"] = newest;
  }
  return Json{{"store", store}, {"records", records}, {"indexes", idx}};
}

// ---------------------------------------------------------------- edges

fb::GainStats AddStats(const fb::GainStats& a, const fb::GainStats& b) {
  return fb::GainStats(a.uses() + b.uses(), a.successes() + b.successes(),
                       a.compile_failures() + b.compile_failures(), a.incorrect() + b.incorrect(),
                       a.other_failures() + b.other_failures(), a.sum_gain() + b.sum_gain(),
                       a.sum_gain_sq() + b.sum_gain_sq(),
                       a.uses() == 0   ? b.max_gain()
                       : b.uses() == 0 ? a.max_gain()
                                       : std::max(a.max_gain(), b.max_gain()));
}

std::vector<EdgeSummary> SummarizeEdges(const std::vector<fb::TransitionEdgeT>& edges,
                                        bool by_cluster) {
  std::map<std::tuple<uint64_t, uint64_t, uint32_t>, fb::GainStats> acc;
  for (const auto& e : edges) {
    auto k = std::make_tuple(e.from_direction, e.to_direction, by_cluster ? e.cluster : 0u);
    acc[k] = AddStats(acc[k], e.stats ? *e.stats : fb::GainStats());
  }
  std::vector<EdgeSummary> out;
  for (const auto& [k, s] : acc) out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), s});
  std::stable_sort(out.begin(), out.end(), [](const EdgeSummary& a, const EdgeSummary& b) {
    if (a.from != b.from) return a.from < b.from;
    if (a.stats.uses() != b.stats.uses()) return a.stats.uses() > b.stats.uses();
    if (a.to != b.to) return a.to < b.to;
    return a.cluster < b.cluster;
  });
  return out;
}

Json EdgeJson(const EdgeSummary& e, const std::vector<fb::DirectionT>& dirs) {
  return Json{{"from", e.from},
              {"from_name", DirName(dirs, e.from)},
              {"to", e.to},
              {"to_name", DirName(dirs, e.to)},
              {"cluster", BottleneckName(static_cast<fb::Bottleneck>(e.cluster))},
              {"count", e.stats.uses()},
              {"successes", e.stats.successes()},
              {"success_rate", SuccessRate(e.stats)},
              {"mean_gain", MeanGain(e.stats)},
              {"stats", ToJson(e.stats)}};
}

// ---------------------------------------------------------------- strategies

Result<uint64_t> ParseId(const std::string& text, const char* what) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    return Status::InvalidArgument(std::string("'") + text + "' is not a " + what +
                                   " id (a positive number)");
  uint64_t v = std::stoull(text);
  if (v == 0) return Status::InvalidArgument(std::string(what) + " ids start at 1");
  return v;
}

Result<uint64_t> ResolveDirection(const std::vector<fb::DirectionT>& dirs, const std::string& s) {
  for (const auto& d : dirs)
    if (d.name == s || std::to_string(d.id) == s) return d.id;
  std::string names;
  for (const auto& d : dirs) names += (names.empty() ? "" : ", ") + d.name;
  return Status::NotFound("no direction '" + s + "' (known: " + names + ")");
}

bool ArchApplies(const std::string& arch, const std::string& min_arch) {
  if (min_arch.empty()) return true;
  auto split = [](const std::string& a, std::string* fam, long* num) {
    size_t i = a.find_first_of("0123456789");
    *fam = a.substr(0, i);
    *num = i == std::string::npos ? -1 : std::strtol(a.c_str() + i, nullptr, 10);
  };
  std::string fa, fm;
  long na, nm;
  split(arch, &fa, &na);
  split(min_arch, &fm, &nm);
  if (fa != fm) return false;
  if (fa == "sm_" || fa == "sm") return na >= nm;
  return arch == min_arch;  // gfx targets: exact
}

Result<std::set<uint64_t>> StrategiesOfCategory(Source& src, const std::string& category) {
  HTAM_ASSIGN_OR_RETURN(auto tasks, src.Tasks());
  std::set<uint64_t> task_ids;
  for (const auto& t : tasks)
    if (t.category == category) task_ids.insert(t.id);
  std::set<uint64_t> out;
  HTAM_ASSIGN_OR_RETURN(auto sessions, src.Sessions());
  for (const auto& s : sessions) {
    if (!task_ids.count(s.task_id)) continue;
    HTAM_ASSIGN_OR_RETURN(auto steps, src.Transitions(s.id));
    for (const auto& r : steps) {
      out.insert(r.strategy_ids.begin(), r.strategy_ids.end());
      if (r.learned_strategy_id) out.insert(r.learned_strategy_id);
    }
  }
  HTAM_ASSIGN_OR_RETURN(auto all, src.Strategies(0, "", true));
  for (const auto& s : all)
    if (s.provenance)
      for (uint64_t t : s.provenance->task_ids)
        if (task_ids.count(t)) out.insert(s.id);
  return out;
}

void SortStrategies(std::vector<fb::StrategyT>* v, const std::string& by) {
  auto stats = [](const fb::StrategyT& s) { return s.stats ? *s.stats : fb::GainStats(); };
  std::stable_sort(v->begin(), v->end(), [&](const fb::StrategyT& a, const fb::StrategyT& b) {
    fb::GainStats x = stats(a), y = stats(b);
    if (by == "effect" && MeanGain(x) != MeanGain(y)) return MeanGain(x) > MeanGain(y);
    if (by == "uses" && x.uses() != y.uses()) return x.uses() > y.uses();
    return a.id < b.id;
  });
}

// ---------------------------------------------------------------- records

namespace {
const char* const kKinds[] = {"direction", "strategy", "transition",
                              "session",   "task",     "candidate"};

Result<Json> GetOne(Source& src, const std::string& kind, const std::string& key) {
  auto wrap = [&](Json rec) { return Json{{"kind", kind}, {"record", std::move(rec)}}; };
  if (kind == "candidate") {
    HTAM_ASSIGN_OR_RETURN(auto c, src.Candidate(key));
    return wrap(ToJson(c));
  }
  HTAM_ASSIGN_OR_RETURN(uint64_t id, ParseId(key, kind.c_str()));
  if (kind == "direction") {
    HTAM_ASSIGN_OR_RETURN(auto d, src.Direction(id));
    return wrap(ToJson(d));
  }
  if (kind == "strategy") {
    HTAM_ASSIGN_OR_RETURN(auto s, src.Strategy(id));
    return wrap(ToJson(s));
  }
  if (kind == "transition") {
    HTAM_ASSIGN_OR_RETURN(auto r, src.Transition(id));
    return wrap(ToJson(r));
  }
  if (kind == "session") {
    HTAM_ASSIGN_OR_RETURN(auto s, src.Session(id));
    return wrap(ToJson(s));
  }
  HTAM_ASSIGN_OR_RETURN(auto t, src.Task(id));
  return wrap(ToJson(t));
}
}  // namespace

Result<std::vector<Json>> FindRecords(Source& src, const std::string& what) {
  std::vector<Json> out;
  size_t colon = what.find(':');
  if (colon != std::string::npos) {
    std::string kind = what.substr(0, colon), key = what.substr(colon + 1);
    if (std::find(std::begin(kKinds), std::end(kKinds), kind) == std::end(kKinds))
      return Status::InvalidArgument(
          "unknown record kind '" + kind +
          "' (direction, strategy, transition, session, task, candidate)");
    HTAM_ASSIGN_OR_RETURN(Json j, GetOne(src, kind, key));
    out.push_back(std::move(j));
    return out;
  }
  bool numeric = !what.empty() && what.size() <= 19 &&
                 what.find_first_not_of("0123456789") == std::string::npos;
  if (numeric) {
    for (const char* kind : kKinds) {
      if (std::string(kind) == "candidate") continue;
      auto j = GetOne(src, kind, what);
      if (j.ok())
        out.push_back(std::move(*j));
      else if (!j.status().IsNotFound())
        return j.status();
    }
    if (out.empty()) return Status::NotFound("no record has id " + what);
    return out;
  }
  // A name (direction or task) or a candidate hash.
  HTAM_ASSIGN_OR_RETURN(auto dirs, src.Directions());
  for (const auto& d : dirs)
    if (d.name == what) out.push_back(Json{{"kind", "direction"}, {"record", ToJson(d)}});
  HTAM_ASSIGN_OR_RETURN(auto tasks, src.Tasks());
  for (const auto& t : tasks)
    if (t.name == what) out.push_back(Json{{"kind", "task"}, {"record", ToJson(t)}});
  if (out.empty() && what.find_first_not_of("0123456789abcdef") == std::string::npos) {
    auto c = src.Candidate(what);
    if (c.ok())
      out.push_back(Json{{"kind", "candidate"}, {"record", ToJson(*c)}});
    else if (!c.status().IsNotFound())
      return c.status();
  }
  if (out.empty())
    return Status::NotFound("nothing named '" + what + "' (try kind:id, e.g. strategy:12)");
  return out;
}

void PrintRecord(std::ostream& out, const Json& rec) {
  const Json& r = rec["record"];
  std::string kind = rec["kind"];
  out << kind << " " << (kind == "candidate" ? r["hash"].get<std::string>() : r["id"].dump())
      << "\n";
  std::string source;
  for (const auto& [k, v] : r.items()) {
    if (k == "source" && kind == "candidate") {
      source = v.get<std::string>();
      continue;
    }
    std::string text =
        v.is_string() ? v.get<std::string>() : v.dump(-1, ' ', false, Json::error_handler_t::replace);
    out << "  " << k << ": " << text << "\n";
  }
  if (!source.empty()) out << "  source:\n" << source << (source.back() == '\n' ? "" : "\n");
}

// ---------------------------------------------------------------- trajectories

Result<Trajectory> LoadTrajectory(Source& src, uint64_t session_id) {
  Trajectory t;
  HTAM_ASSIGN_OR_RETURN(t.session, src.Session(session_id));
  HTAM_ASSIGN_OR_RETURN(auto dirs, src.Directions());
  HTAM_ASSIGN_OR_RETURN(auto steps, src.Transitions(session_id));
  std::map<uint64_t, std::string> names;
  double best = 1;
  for (const auto& r : steps) {
    TrajectoryStep s;
    s.step = r.step;
    s.transition_id = r.id;
    s.direction = DirName(dirs, r.direction_id);
    for (uint64_t id : r.strategy_ids) {
      if (!names.count(id)) {
        auto st = src.Strategy(id);
        names[id] = st.ok() ? st->name : "#" + std::to_string(id);
      }
      s.strategies += (s.strategies.empty() ? "" : ",") + names[id];
    }
    s.status = StatusName(r.status);
    s.summary = r.summary;
    s.before = r.speedup_before;
    s.after = r.speedup_after;
    if (r.status == fb::OutcomeStatus::Ok || r.status == fb::OutcomeStatus::Unverified)
      best = std::max(best, static_cast<double>(r.speedup_after));
    s.best = best;
    s.verified = r.verified;
    t.steps.push_back(std::move(s));
  }
  std::sort(t.steps.begin(), t.steps.end(), [](const auto& a, const auto& b) {
    return a.step != b.step ? a.step < b.step : a.transition_id < b.transition_id;
  });
  return t;
}

Json TrajectoryJson(const Trajectory& t) {
  Json steps = Json::array();
  for (const auto& s : t.steps)
    steps.push_back(Json{{"step", s.step},
                         {"transition_id", s.transition_id},
                         {"direction", s.direction},
                         {"strategies", s.strategies},
                         {"status", s.status},
                         {"speedup_before", s.before},
                         {"speedup_after", s.after},
                         {"best_speedup", s.best},
                         {"verified", s.verified},
                         {"summary", s.summary}});
  return Json{{"session", ToJson(t.session)}, {"steps", steps}};
}

std::string Bar(double value, double top, int width) {
  if (top <= 0) return "";
  int n = static_cast<int>(std::lround(width * std::clamp(value / top, 0.0, 1.0)));
  std::string s;
  for (int i = 0; i < n; ++i) s += "#";
  return s;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
  f << text;
  f.flush();
  if (!f) return Status::IOError("writing " + path + " failed");
  return Status::OK();
}

// ---------------------------------------------------------------- top

Result<std::vector<TopRow>> TopStrategies(Source& src, size_t per_group, uint32_t min_uses) {
  HTAM_ASSIGN_OR_RETURN(auto dirs, src.Directions());
  HTAM_ASSIGN_OR_RETURN(auto tasks, src.Tasks());
  std::map<uint64_t, std::string> category;
  for (const auto& t : tasks) category[t.id] = t.category;
  HTAM_ASSIGN_OR_RETURN(auto strategies, src.Strategies(0, "", true));
  std::map<uint64_t, const fb::StrategyT*> by_id;
  for (const auto& s : strategies) by_id[s.id] = &s;
  struct Acc {
    fb::GainStats stats;  // verified (or vouched) steps
    double best = 0;
    uint32_t unverified = 0;  // client-reported steps, kept apart
    double best_unverified = 0;
  };
  std::map<std::tuple<std::string, std::string, uint64_t>, Acc> acc;
  HTAM_ASSIGN_OR_RETURN(auto sessions, src.Sessions());
  for (const auto& sess : sessions) {
    HTAM_ASSIGN_OR_RETURN(auto steps, src.Transitions(sess.id));
    for (const auto& r : steps) {
      if (r.status == fb::OutcomeStatus::InfraError) continue;
      std::string cat =
          category.count(r.task_id) ? category[r.task_id] : (r.state ? r.state->category : "");
      std::set<uint64_t> credited(r.strategy_ids.begin(), r.strategy_ids.end());
      if (r.learned_strategy_id) credited.insert(r.learned_strategy_id);
      double gain = r.no_change ? 0.0 : StepGain(r.status, r.speedup_before, r.speedup_after);
      const bool trusted = r.verified || r.vouched;
      bool success = r.status == fb::OutcomeStatus::Ok && gain > 1e-9;
      fb::GainStats one(1, success, r.status == fb::OutcomeStatus::CompileError,
                        r.status == fb::OutcomeStatus::Incorrect ||
                            r.status == fb::OutcomeStatus::Nondeterministic,
                        r.status == fb::OutcomeStatus::Crash ||
                            r.status == fb::OutcomeStatus::Timeout ||
                            r.status == fb::OutcomeStatus::ResourceLimit,
                        gain, gain * gain, gain);
      for (uint64_t id : credited) {
        Acc& a = acc[{cat, r.backend, id}];
        if (!trusted) {
          a.unverified++;
          if (r.status == fb::OutcomeStatus::Ok)
            a.best_unverified = std::max(a.best_unverified, static_cast<double>(r.speedup_after));
          continue;
        }
        a.stats = AddStats(a.stats, one);
        if (r.status == fb::OutcomeStatus::Ok)
          a.best = std::max(a.best, static_cast<double>(r.speedup_after));
      }
    }
  }
  std::map<std::pair<std::string, std::string>, std::vector<TopRow>> groups;
  for (const auto& [k, a] : acc) {
    if (a.stats.uses() < min_uses && a.unverified < min_uses) continue;
    TopRow row;
    std::tie(row.category, row.backend, row.strategy_id) = k;
    auto it = by_id.find(row.strategy_id);
    row.strategy = it == by_id.end() ? "#" + std::to_string(row.strategy_id) : it->second->name;
    row.direction = it == by_id.end() ? "" : DirName(dirs, it->second->direction_id);
    row.stats = a.stats;
    row.best_speedup = a.best;
    row.unverified_uses = a.unverified;
    row.best_unverified = a.best_unverified;
    groups[{row.category, row.backend}].push_back(row);
  }
  std::vector<TopRow> out;
  for (auto& [g, rows] : groups) {
    std::stable_sort(rows.begin(), rows.end(), [](const TopRow& a, const TopRow& b) {
      if (MeanGain(a.stats) != MeanGain(b.stats)) return MeanGain(a.stats) > MeanGain(b.stats);
      if (a.stats.uses() != b.stats.uses()) return a.stats.uses() > b.stats.uses();
      return a.strategy_id < b.strategy_id;
    });
    for (size_t i = 0; i < rows.size() && (per_group == 0 || i < per_group); ++i) {
      rows[i].rank = static_cast<int>(i + 1);
      out.push_back(rows[i]);
    }
  }
  return out;
}

}  // namespace htam::cli
