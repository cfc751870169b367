// Read-only subcommands: status, directions, strategies, show, sessions, trajectory, top.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tools/cli/cli.h"
#include "tools/cli/inspect_util.h"
#include "tools/cli/plot.h"
#include "tools/cli/table.h"

namespace htam::cli {

// ---------------------------------------------------------------- status

int CmdStatus(Context& c) {
  po::options_description o("status options");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "[--data-dir DIR | --connect ENDPOINT] [--json]", o, {}, &vm, &done);
  if (done) return rc;
  Json j;
  std::string text;
  if (!c.g.connect.empty()) {
    auto src = OpenSource(c);
    if (!src.ok()) return Fail(c, src.status());
    auto t = (*src)->StatusText();
    if (!t.ok()) return Fail(c, t.status());
    text = *t;
    j = ParseInfo(text);
  } else {
    auto info = LocalStatus(c.g.data_dir);
    if (!info.ok()) return Fail(c, info.status());
    j = std::move(*info);
    text = FormatInfo(j);
  }
  if (c.g.json)
    PrintJson(c, j);
  else
    c.out << text;
  return kExitOk;
}

// ---------------------------------------------------------------- directions

int CmdDirections(Context& c) {
  po::options_description o("directions options");
  bool by_cluster = false;
  o.add_options()("by-cluster", po::bool_switch(&by_cluster),
                  "split edges by state cluster (bottleneck)");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "[--by-cluster] [--json]", o, {}, &vm, &done);
  if (done) return rc;
  auto src = OpenSource(c);
  if (!src.ok()) return Fail(c, src.status());
  auto dirs = (*src)->Directions();
  if (!dirs.ok()) return Fail(c, dirs.status());
  auto edges = (*src)->Edges();
  if (!edges.ok()) return Fail(c, edges.status());
  auto strategies = (*src)->Strategies(0, "", false);
  if (!strategies.ok()) return Fail(c, strategies.status());
  std::map<uint64_t, int> nstrat;
  for (const auto& s : *strategies) nstrat[s.direction_id]++;
  std::vector<EdgeSummary> sum = SummarizeEdges(*edges, by_cluster);

  if (c.g.json) {
    Json out = Json::array();
    std::vector<uint64_t> ids = {0};
    for (const auto& d : *dirs) ids.push_back(d.id);
    for (uint64_t id : ids) {
      Json jd;
      if (id == 0) {
        jd = Json{{"id", 0}, {"name", "start"}};
      } else {
        const fb::DirectionT* d = nullptr;
        for (const auto& x : *dirs)
          if (x.id == id) d = &x;
        jd = ToJson(*d);
        jd["strategies"] = nstrat[id];
      }
      Json next = Json::array();
      for (const auto& e : sum)
        if (e.from == id) next.push_back(EdgeJson(e, *dirs));
      jd["next"] = next;
      if (id != 0 || !next.empty()) out.push_back(jd);
    }
    PrintJson(c, out);
    return kExitOk;
  }
  Table t({">id", "name", ">strategies", ">uses", ">success", ">mean gain", ">prior", "targets"});
  for (const auto& d : *dirs) {
    fb::GainStats s = d.stats ? *d.stats : fb::GainStats();
    std::string targets;
    for (auto b : d.targets) targets += (targets.empty() ? "" : ",") + BottleneckName(b);
    t.Add({std::to_string(d.id), d.name, std::to_string(nstrat[d.id]), std::to_string(s.uses()),
           s.uses() ? Fixed(100 * SuccessRate(s), 0) + "%" : "-",
           s.uses() ? GainFactor(MeanGain(s)) : "-", Fixed(d.prior, 2),
           targets.empty() ? "any" : targets});
  }
  t.Print(c.out);
  c.out << "\nWhat tends to come next (transition edges, by experience):\n";
  if (sum.empty()) {
    c.out << "  (no transitions recorded yet)\n";
    return kExitOk;
  }
  std::vector<std::string> cols = {"from", "to"};
  if (by_cluster) cols.push_back("cluster");
  for (const char* x : {">count", ">success", ">mean gain", ">best"}) cols.push_back(x);
  Table e(cols);
  for (const auto& s : sum) {
    std::vector<std::string> row = {DirName(*dirs, s.from), DirName(*dirs, s.to)};
    if (by_cluster) row.push_back(BottleneckName(static_cast<fb::Bottleneck>(s.cluster)));
    row.push_back(std::to_string(s.stats.uses()));
    row.push_back(Fixed(100 * SuccessRate(s.stats), 0) + "%");
    row.push_back(GainFactor(MeanGain(s.stats)));
    row.push_back(s.stats.successes() ? GainFactor(s.stats.max_gain()) : "-");
    e.Add(row);
  }
  e.Print(c.out);
  return kExitOk;
}

// ---------------------------------------------------------------- strategies

int CmdStrategies(Context& c) {
  po::options_description o("strategies options");
  std::string direction, backend, arch, category, sort = "id";
  bool all = false;
  size_t limit = 0;
  o.add_options()("direction", po::value(&direction), "only this direction (name or id)")(
      "backend", po::value(&backend),
      "only strategies applicable to this backend (cuda, hip, cpu)")(
      "arch", po::value(&arch),
      "only strategies applicable to this architecture (sm_80, gfx90a...)")(
      "category", po::value(&category), "only strategies used on tasks of this category")(
      "sort", po::value(&sort)->default_value("id"), "id | effect (mean gain) | uses")(
      "all", po::bool_switch(&all), "include strategies merged into others")(
      "limit", po::value(&limit), "at most this many rows");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "[--direction D] [--backend B] [--arch A] [--category C] [--sort effect|uses]",
                 o, {}, &vm, &done);
  if (done) return rc;
  if (sort != "id" && sort != "effect" && sort != "uses") {
    c.err << "htam strategies: --sort must be id, effect or uses\n";
    return kExitUsage;
  }
  auto src = OpenSource(c);
  if (!src.ok()) return Fail(c, src.status());
  auto dirs = (*src)->Directions();
  if (!dirs.ok()) return Fail(c, dirs.status());
  uint64_t dir_id = 0;
  if (!direction.empty()) {
    auto d = ResolveDirection(*dirs, direction);
    if (!d.ok()) return Fail(c, d.status());
    dir_id = *d;
  }
  auto list = (*src)->Strategies(dir_id, backend, all);
  if (!list.ok()) return Fail(c, list.status());
  std::vector<fb::StrategyT> v = std::move(*list);
  if (!arch.empty())
    std::erase_if(v, [&](const fb::StrategyT& s) { return !ArchApplies(arch, s.min_arch); });
  if (!category.empty()) {
    auto used = StrategiesOfCategory(**src, category);
    if (!used.ok()) return Fail(c, used.status());
    std::erase_if(v, [&](const fb::StrategyT& s) { return !used->count(s.id); });
  }
  SortStrategies(&v, sort);
  if (limit && v.size() > limit) v.resize(limit);
  if (c.g.json) {
    Json out = Json::array();
    for (const auto& s : v) {
      Json js = ToJson(s);
      js["direction"] = DirName(*dirs, s.direction_id);
      out.push_back(js);
    }
    PrintJson(c, out);
    return kExitOk;
  }
  Table t({">id", "direction", "name", ">uses", ">success", ">mean gain", ">cfail", ">incorrect",
           "source"});
  for (const auto& s : v) {
    fb::GainStats st = s.stats ? *s.stats : fb::GainStats();
    std::string source = s.provenance ? s.provenance->source : "";
    if (s.provenance && !s.provenance->site.empty()) source += "@" + s.provenance->site;
    if (s.merged_into) source += " (merged into " + std::to_string(s.merged_into) + ")";
    t.Add({std::to_string(s.id), DirName(*dirs, s.direction_id), s.name, std::to_string(st.uses()),
           st.uses() ? Fixed(100 * SuccessRate(st), 0) + "%" : "-",
           st.uses() ? GainFactor(MeanGain(st)) : "-", std::to_string(st.compile_failures()),
           std::to_string(st.incorrect()), source});
  }
  t.Print(c.out);
  c.out << v.size() << " strateg" << (v.size() == 1 ? "y" : "ies") << "\n";
  return kExitOk;
}

// ---------------------------------------------------------------- show

int CmdShow(Context& c) {
  po::options_description o("show options");
  po::variables_map vm;
  bool done;
  int rc = Parse(c,
                 "<kind:id | id | name | candidate-hash>   (kinds: direction strategy transition "
                 "session task candidate)",
                 o, {{"what", 1}}, &vm, &done);
  if (done) return rc;
  std::string what = vm["what"].as<std::vector<std::string>>()[0];
  auto src = OpenSource(c);
  if (!src.ok()) return Fail(c, src.status());
  auto found = FindRecords(**src, what);
  if (!found.ok()) return Fail(c, found.status());
  if (c.g.json) {
    PrintJson(c, found->size() == 1 ? (*found)[0] : Json(*found));
    return kExitOk;
  }
  bool first = true;
  for (const auto& rec : *found) {
    if (!first) c.out << "\n";
    first = false;
    PrintRecord(c.out, rec);
  }
  return kExitOk;
}

// ---------------------------------------------------------------- sessions

int CmdSessions(Context& c) {
  po::options_description o("sessions options");
  std::string task, backend;
  size_t limit = 0;
  o.add_options()("task", po::value(&task), "only sessions of this task")(
      "backend", po::value(&backend), "only sessions on this backend")(
      "limit", po::value(&limit), "at most this many (newest first)");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "[--task NAME] [--backend B] [--limit N]", o, {}, &vm, &done);
  if (done) return rc;
  auto src = OpenSource(c);
  if (!src.ok()) return Fail(c, src.status());
  auto list = (*src)->Sessions();
  if (!list.ok()) return Fail(c, list.status());
  std::vector<fb::SessionT> v = std::move(*list);
  std::erase_if(v, [&](const fb::SessionT& s) {
    return (!task.empty() && s.task_name != task) || (!backend.empty() && s.backend != backend);
  });
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
  if (limit && v.size() > limit) v.resize(limit);
  if (c.g.json) {
    Json out = Json::array();
    for (const auto& s : v) out.push_back(ToJson(s));
    PrintJson(c, out);
    return kExitOk;
  }
  Table t({">id", "task", "backend", "arch", "model", ">steps", ">best", "state", "client"});
  for (const auto& s : v)
    t.Add({std::to_string(s.id), s.task_name, s.backend, s.arch, s.model, std::to_string(s.steps),
           Speedup(s.best_speedup), s.state == fb::SessionState::Closed ? "closed" : "open",
           s.client});
  t.Print(c.out);
  return kExitOk;
}

// ---------------------------------------------------------------- trajectory

int CmdTrajectory(Context& c) {
  po::options_description o("trajectory options");
  std::string plot;
  o.add_options()("plot", po::value(&plot), "also draw the speedup per step as an SVG file");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "<session> [--plot out.svg] [--json]", o, {{"session", 1}}, &vm, &done);
  if (done) return rc;
  auto id = ParseId(vm["session"].as<std::vector<std::string>>()[0], "session");
  if (!id.ok()) return Fail(c, id.status());
  auto src = OpenSource(c);
  if (!src.ok()) return Fail(c, src.status());
  auto traj = LoadTrajectory(**src, *id);
  if (!traj.ok()) return Fail(c, traj.status());
  const Trajectory& tr = *traj;
  if (!plot.empty()) {
    Status s = WriteTextFile(plot, SpeedupSvg(tr));
    if (!s.ok()) return Fail(c, s);
  }
  if (c.g.json) {
    PrintJson(c, TrajectoryJson(tr));
    return kExitOk;
  }
  c.out << "session " << tr.session.id << ": task " << tr.session.task_name << " on "
        << tr.session.backend << (tr.session.arch.empty() ? "" : " " + tr.session.arch) << ", "
        << tr.steps.size() << " steps, best " << Speedup(tr.session.best_speedup)
        << (tr.session.model.empty() ? "" : ", model " + tr.session.model) << "\n\n";
  Table t({">step", "direction", "strategies", "status", ">before", ">after", ">best", "curve",
           "summary"},
          40);
  double top = 1;
  for (const auto& s : tr.steps) top = std::max(top, s.best);
  for (const auto& s : tr.steps)
    t.Add({std::to_string(s.step), s.direction, s.strategies, s.status, Speedup(s.before),
           Speedup(s.after), Speedup(s.best), Bar(s.best, top, 20), s.summary});
  t.Print(c.out);
  if (!plot.empty()) c.out << "\nplot written to " << plot << "\n";
  return kExitOk;
}

// ---------------------------------------------------------------- top

int CmdTop(Context& c) {
  po::options_description o("top options");
  size_t per_group = 3;
  uint32_t min_uses = 1;
  std::string category, backend;
  o.add_options()("limit", po::value(&per_group)->default_value(3),
                  "strategies per (category, backend)")(
      "min-uses", po::value(&min_uses)->default_value(1), "ignore strategies used fewer times")(
      "category", po::value(&category), "only this task category")("backend", po::value(&backend),
                                                                   "only this backend");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "[--limit N] [--min-uses N] [--category C] [--backend B]", o, {}, &vm, &done);
  if (done) return rc;
  auto src = OpenSource(c);
  if (!src.ok()) return Fail(c, src.status());
  auto rows = TopStrategies(**src, per_group, min_uses);
  if (!rows.ok()) return Fail(c, rows.status());
  std::erase_if(*rows, [&](const TopRow& r) {
    return (!category.empty() && r.category != category) ||
           (!backend.empty() && r.backend != backend);
  });
  if (c.g.json) {
    Json out = Json::array();
    for (const auto& r : *rows)
      out.push_back(Json{{"category", r.category},
                         {"backend", r.backend},
                         {"rank", r.rank},
                         {"strategy_id", r.strategy_id},
                         {"strategy", r.strategy},
                         {"direction", r.direction},
                         {"stats", ToJson(r.stats)},
                         {"mean_gain", MeanGain(r.stats)},
                         {"success_rate", SuccessRate(r.stats)},
                         {"best_speedup", r.best_speedup}});
    PrintJson(c, out);
    return kExitOk;
  }
  if (rows->empty()) {
    c.out << "no recorded steps credit a strategy yet\n";
    return kExitOk;
  }
  Table t({"category", "backend", ">rank", "strategy", "direction", ">uses", ">success",
           ">mean gain", ">best speedup"});
  for (const auto& r : *rows)
    t.Add({r.category, r.backend, std::to_string(r.rank), r.strategy, r.direction,
           std::to_string(r.stats.uses()), Fixed(100 * SuccessRate(r.stats), 0) + "%",
           GainFactor(MeanGain(r.stats)), Speedup(r.best_speedup)});
  t.Print(c.out);
  return kExitOk;
}

}  // namespace htam::cli
