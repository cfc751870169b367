// Unit tests of the htam CLI, run in process against stores written through the memory library:
// golden tables, JSON, export/import round trips and merges, backup/restore/check/rebuild, damaged
// stores, pictures. Golden files: tools/cli/testdata/golden/ (HTAM_UPDATE_GOLDEN=1 rewrites them).
#include "tools/cli/cli.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "base/file.h"
#include "daemon/memory/codec.h"
#include "daemon/memory/memory.h"
#include "daemon/memory/store.h"
#include "tools/cli/exchange.h"
#include "tools/cli/lock.h"
#include "tools/cli/test_store.h"

namespace htam::cli {
namespace {
namespace fs = std::filesystem;

struct CliRun {
  int rc;
  std::string out, err;
};

CliRun Cli(std::vector<std::string> args) {
  std::ostringstream out, err;
  int rc = RunCli(args, out, err);
  return {rc, out.str(), err.str()};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("htam-cli-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    data_ = (dir_ / "data").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Build(const testing::TestStoreOptions& o = {}) {
    ASSERT_TRUE(testing::BuildTestStore(data_, o).ok());
  }
  // Compares with tools/cli/testdata/golden/<name>; HTAM_UPDATE_GOLDEN=1 writes it instead.
  void Golden(const std::string& name, const std::string& text) {
    std::string path = "tools/cli/testdata/golden/" + name;
    if (std::getenv("HTAM_UPDATE_GOLDEN")) {
      fs::create_directories("tools/cli/testdata/golden");
      std::ofstream(path, std::ios::binary) << text;
      return;
    }
    ASSERT_TRUE(fs::exists(path)) << path << " missing (run with HTAM_UPDATE_GOLDEN=1)";
    EXPECT_EQ(text, htam::ReadFileOrEmpty(path)) << "output differs from " << path;
  }
  fs::path dir_;
  std::string data_;
};

TEST_F(CliTest, StatusCountsRecords) {
  Build();
  CliRun r = Cli({"--data-dir", data_, "status", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["records"]["transitions"], 30);
  EXPECT_EQ(j["records"]["directions"], 13);
  EXPECT_EQ(j["records"]["sessions"], 6);
  EXPECT_EQ(j["store"]["schema_version"], 4);
  EXPECT_EQ(j["store"]["daemon_running"], "no");
  EXPECT_EQ(j["indexes"]["transitions_snapshot"], "fresh");
  CliRun t = Cli({"status", "--data-dir", data_});  // globals after the command work too
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("transitions: 30"), std::string::npos) << t.out;
}

TEST_F(CliTest, GoldenTables) {
  Build();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"directions.txt", {"directions"}},
      {"strategies_effect.txt", {"strategies", "--sort", "effect"}},
      {"strategies_fusion.txt", {"strategies", "--direction", "fusion", "--sort", "uses"}},
      {"sessions.txt", {"sessions"}},
      {"trajectory_2.txt", {"trajectory", "2"}},
      {"top.txt", {"top", "--limit", "2"}},
      {"graph.dot", {"graph", "--expand", "reductions-scans"}},
  };
  for (const auto& [name, args] : cases) {
    std::vector<std::string> a = {"-d", data_};
    a.insert(a.end(), args.begin(), args.end());
    CliRun r = Cli(a);
    ASSERT_EQ(r.rc, 0) << name << ": " << r.err;
    Golden(name, r.out);
  }
}

TEST_F(CliTest, JsonOutputsParse) {
  Build();
  for (std::vector<std::string> args : {std::vector<std::string>{"directions"},
                                        {"strategies"},
                                        {"sessions"},
                                        {"trajectory", "1"},
                                        {"top"},
                                        {"show", "strategy:1"},
                                        {"explain", "2"},
                                        {"graph"},
                                        {"check"}}) {
    std::vector<std::string> a = {"-d", data_, "--json"};
    a.insert(a.end(), args.begin(), args.end());
    CliRun r = Cli(a);
    ASSERT_EQ(r.rc, 0) << args[0] << ": " << r.err;
    Json j = Json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << args[0] << " printed no JSON: " << r.out;
  }
  Json dirs = Json::parse(Cli({"-d", data_, "--json", "directions"}).out);
  ASSERT_EQ(dirs.size(), 14u);  // start + 13 directions
  size_t edges = 0;
  for (const auto& d : dirs) edges += d["next"].size();
  EXPECT_EQ(
      edges,
      Json::parse(Cli({"-d", data_, "status", "--json"}).out)["records"]["edges"].get<size_t>() > 0
          ? edges
          : 0);
  EXPECT_GT(edges, 5u);
}

TEST_F(CliTest, StrategyFilters) {
  Build();
  Json all = Json::parse(Cli({"-d", data_, "--json", "strategies"}).out);
  Json cuda = Json::parse(Cli({"-d", data_, "--json", "strategies", "--backend", "cpu"}).out);
  EXPECT_LT(cuda.size(), all.size());  // async-copy-sm80 is CUDA only
  Json sm70 = Json::parse(Cli({"-d", data_, "--json", "strategies", "--arch", "sm_70"}).out);
  Json sm90 = Json::parse(Cli({"-d", data_, "--json", "strategies", "--arch", "sm_90"}).out);
  EXPECT_EQ(sm90.size(), sm70.size() + 1);
  Json matmul = Json::parse(Cli({"-d", data_, "--json", "strategies", "--category", "matmul"}).out);
  EXPECT_GT(matmul.size(), 0u);
  EXPECT_LT(matmul.size(), all.size());
  Json effect = Json::parse(Cli({"-d", data_, "--json", "strategies", "--sort", "effect"}).out);
  for (size_t i = 1; i < effect.size(); ++i) {
    auto g = [](const Json& s) {
      double u = s["stats"]["uses"];
      return u ? s["stats"]["sum_gain"].get<double>() / u : 0.0;
    };
    EXPECT_GE(g(effect[i - 1]), g(effect[i]));
  }
  CliRun bad = Cli({"-d", data_, "strategies", "--direction", "no-such"});
  EXPECT_EQ(bad.rc, kExitFail);
  EXPECT_NE(bad.err.find("no direction 'no-such'"), std::string::npos) << bad.err;
  EXPECT_EQ(Cli({"-d", data_, "strategies", "--sort", "nonsense"}).rc, kExitUsage);
}

TEST_F(CliTest, ShowFindsEveryKind) {
  Build();
  Json one = Json::parse(Cli({"-d", data_, "--json", "show", "session:2"}).out);
  EXPECT_EQ(one["kind"], "session");
  EXPECT_EQ(one["record"]["id"], 2);
  Json many = Json::parse(Cli({"-d", data_, "--json", "show", "3"}).out);
  ASSERT_TRUE(many.is_array());
  EXPECT_GE(many.size(), 4u);  // direction, strategy, transition, session, task 3
  Json byname = Json::parse(Cli({"-d", data_, "--json", "show", "fusion"}).out);
  EXPECT_EQ(byname["kind"], "direction");
  std::string hash = Json::parse(
      Cli({"-d", data_, "--json", "show", "transition:1"}).out)["record"]["candidate_hash"];
  CliRun c = Cli({"-d", data_, "show", hash});
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("HTAM_KERNEL_ENTRY"), std::string::npos);
  CliRun missing = Cli({"-d", data_, "show", "strategy:999"});
  EXPECT_EQ(missing.rc, kExitFail);
  EXPECT_NE(missing.err.find("no such strategy 999"), std::string::npos) << missing.err;
  EXPECT_EQ(Cli({"-d", data_, "show"}).rc, kExitUsage);
}

TEST_F(CliTest, ExplainReplaysAStep) {
  Build();
  CliRun r = Cli({"-d", data_, "--json", "explain", "2", "--step", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["scores"].size(), 13u);
  EXPECT_EQ(j["experience"], 8);  // transitions recorded before this step
  EXPECT_FALSE(j["chosen"].get<std::string>().empty());
  EXPECT_EQ(j["actual"], "fusion");
  EXPECT_FALSE(j["evidence"].empty());
  CliRun next = Cli({"-d", data_, "explain", "6"});
  ASSERT_EQ(next.rc, 0) << next.err;
  EXPECT_NE(next.out.find("policy chooses:"), std::string::npos);
  EXPECT_EQ(Cli({"-d", data_, "explain", "2", "--step", "9"}).rc, kExitFail);
}

// With memory.scorer on (and a store past scorer_min_records), explain shows the learned
// scorer's prediction for the chosen direction and its largest feature contributions.
TEST_F(CliTest, ExplainShowsTheLearnedScorer) {
  Build();
  std::string conf = (dir_ / "scorer.conf").string();
  std::ofstream(conf) << "[memory]\nscorer = true\nscorer_min_records = 1\n";
  CliRun on = Cli({"-d", data_, "explain", "6", "--config", conf});
  ASSERT_EQ(on.rc, 0) << on.err;
  EXPECT_NE(on.out.find("Learned scorer blended into"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("top contributions:"), std::string::npos) << on.out;
  CliRun off = Cli({"-d", data_, "explain", "6"});
  ASSERT_EQ(off.rc, 0) << off.err;
  EXPECT_EQ(off.out.find("Learned scorer"), std::string::npos) << off.out;
}

TEST_F(CliTest, TrajectoryPlotIsAnSvgWithEveryStep) {
  Build();
  std::string svg = (dir_ / "t.svg").string();
  CliRun r = Cli({"-d", data_, "trajectory", "2", "--plot", svg});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::string text = htam::ReadFileOrEmpty(svg);
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
  size_t circles = 0;
  for (size_t p = text.find("<circle"); p != std::string::npos; p = text.find("<circle", p + 1))
    ++circles;
  EXPECT_EQ(circles, 5u + 4u);  // five steps, four legend marks
  Golden("trajectory_2.svg", text);
}

TEST_F(CliTest, GraphFormats) {
  Build();
  Json g = Json::parse(Cli({"-d", data_, "graph", "--format", "json", "--expand", "fusion"}).out);
  size_t strategies = 0;
  for (const auto& n : g["nodes"]) strategies += n["kind"] == "strategy";
  EXPECT_EQ(strategies, 2u);
  auto count_nodes = [](const std::string& ml) {
    size_t nodes = 0;
    for (size_t p = ml.find("<node "); p != std::string::npos; p = ml.find("<node ", p + 1))
      ++nodes;
    return nodes;
  };
  // --all: every direction (13) and the start node; by default only the directions that edges
  // taken at least twice join.
  std::string ml = Cli({"-d", data_, "graph", "--format", "graphml", "--all"}).out;
  EXPECT_NE(ml.find("<graphml"), std::string::npos);
  EXPECT_NE(ml.find("</graphml>"), std::string::npos);
  EXPECT_EQ(count_nodes(ml), 14u);
  Json all = Json::parse(Cli({"-d", data_, "graph", "--format", "json", "--all"}).out);
  Json def = Json::parse(Cli({"-d", data_, "graph", "--format", "json"}).out);
  EXPECT_LT(def["nodes"].size(), all["nodes"].size());
  EXPECT_LT(def["edges"].size(), all["edges"].size());
  for (const auto& e : def["edges"])
    if (e.value("kind", "") != "contains") EXPECT_GE(e["stats"]["uses"].get<int>(), 2) << e;
  EXPECT_EQ(count_nodes(Cli({"-d", data_, "graph", "--format", "graphml", "--min-count", "1",
                             "--connected-only"})
                            .out),
            count_nodes(Cli({"-d", data_, "graph", "--format", "graphml", "--all",
                             "--connected-only"})
                            .out));
  if (::system("command -v dot >/dev/null 2>&1") == 0) {
    std::string png = (dir_ / "g.png").string();
    CliRun r = Cli({"-d", data_, "graph", "--render", "png", "-o", png});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(htam::ReadFileOrEmpty(png).substr(1, 3), "PNG");
  }
  EXPECT_EQ(Cli({"-d", data_, "graph", "--render", "png"}).rc, kExitUsage);
}

// Every record and statistic survives export -> import into an empty store.
TEST_F(CliTest, ExportImportRoundTrip) {
  Build();
  std::string file = (dir_ / "a.jsonl").string(), file2 = (dir_ / "b.jsonl").string();
  std::string other = (dir_ / "other").string();
  ASSERT_EQ(Cli({"-d", data_, "export", "-o", file, "--site", "a"}).rc, 0);
  CliRun imp = Cli({"-d", other, "import", file});
  ASSERT_EQ(imp.rc, 0) << imp.err;
  ASSERT_EQ(Cli({"-d", other, "check"}).rc, 0);
  ASSERT_EQ(Cli({"-d", other, "export", "-o", file2, "--site", "a"}).rc, 0);
  std::ifstream fa(file), fb(file2);
  std::string la, lb;
  size_t lines = 0, passed_over = 0;
  while (std::getline(fa, la)) {
    ASSERT_TRUE(static_cast<bool>(std::getline(fb, lb)));
    Json a = Json::parse(la), b = Json::parse(lb);
    if (lines++ == 0) continue;  // headers name different stores
    if (a.value("type", "") == "transition" && !a["record"]["passed_over_ids"].empty())
      ++passed_over;
    if (a.value("type", "") == "strategy") {
      a["record"]["provenance"]["site"] = b["record"]["provenance"]["site"];  // stamped on import
      EXPECT_EQ(b["record"]["provenance"]["site"], "a");
    }
    EXPECT_EQ(a, b) << "line " << lines;
  }
  EXPECT_FALSE(std::getline(fb, lb));
  EXPECT_GT(lines, 100u);
  EXPECT_GT(passed_over, 0u) << "steps that passed advice over carry it through the exchange";
  // Importing again changes nothing.
  ASSERT_EQ(Cli({"-d", other, "import", file}).rc, 0);
  std::string file3 = (dir_ / "c.jsonl").string();
  ASSERT_EQ(Cli({"-d", other, "export", "-o", file3, "--site", "a"}).rc, 0);
  EXPECT_EQ(htam::ReadFileOrEmpty(file2), htam::ReadFileOrEmpty(file3));
}

// An export written by the earlier hand-written mapper (testdata/export_v1_legacy.jsonl: a test
// store of 2 sessions of 3 steps) imports, and exporting it again gives the same lines, byte for
// byte; the only addition is the sessions' path_steps, which that mapper left out.
TEST_F(CliTest, LegacyExportImportsAndExportsTheSame) {
  const std::string legacy = "tools/cli/testdata/export_v1_legacy.jsonl";
  const std::string file = (dir_ / "again.jsonl").string();
  CliRun imp = Cli({"-d", data_, "import", legacy});
  ASSERT_EQ(imp.rc, 0) << imp.err;
  ASSERT_EQ(Cli({"-d", data_, "check"}).rc, 0);
  ASSERT_EQ(Cli({"-d", data_, "export", "-o", file, "--site", "legacy"}).rc, 0);
  std::ifstream fa(legacy), fb(file);
  std::string la, lb;
  size_t lines = 0, sessions = 0;
  while (std::getline(fa, la)) {
    ASSERT_TRUE(static_cast<bool>(std::getline(fb, lb)));
    if (lines++ == 0) continue;  // headers name different stores
    Json a = Json::parse(la), b = Json::parse(lb);
    if (a.value("type", "") == "strategy")  // stamped on import
      a["record"]["provenance"]["site"] = b["record"]["provenance"]["site"];
    // Fields appended since the legacy export (store schema 3): absent there, derived or
    // defaulted here.
    if (a.contains("record") && a["record"].is_object() && b.contains("record") &&
        b["record"].is_object())
      for (const char* f : {"verified_stats", "no_change", "vouched", "best_verified"}) {
        EXPECT_FALSE(a["record"].contains(f)) << f;
        b["record"].erase(f);
      }
    if (a.value("type", "") == "session") {
      ++sessions;
      EXPECT_FALSE(a["record"].contains("path_steps"));
      ASSERT_TRUE(b["record"].contains("path_steps")) << lb;
      b["record"].erase("path_steps");
    }
    EXPECT_EQ(a.dump(), b.dump()) << "line " << lines;
  }
  EXPECT_FALSE(std::getline(fb, lb));
  EXPECT_GT(lines, 50u);
  EXPECT_EQ(sessions, 2u);
}

// A session's measured class travels with it; a session without one exports as before.
TEST(RecordsJson, SessionMeasuredBottleneckIsWrittenOnlyWhenKnown) {
  fb::SessionT s;
  s.id = 7;
  s.task_name = "relu";
  Json plain = ToJson(s);
  EXPECT_FALSE(plain.contains("measured_bottleneck")) << plain.dump();
  s.measured_bottleneck = fb::Bottleneck::Memory;
  Json measured = ToJson(s);
  EXPECT_EQ(measured.value("measured_bottleneck", ""), "Memory") << measured.dump();
  fb::SessionT back;
  ASSERT_TRUE(FromJson(measured, &back).ok());
  EXPECT_EQ(back.measured_bottleneck, fb::Bottleneck::Memory);
  fb::SessionT old;
  ASSERT_TRUE(FromJson(plain, &old).ok());
  EXPECT_EQ(old.measured_bottleneck, fb::Bottleneck::Unknown);
}

TEST_F(CliTest, TwoSitesMergeOnceAndOnlyOnce) {
  Build();
  std::string site2 = (dir_ / "site2").string();
  testing::TestStoreOptions o;
  o.sessions = 4;
  o.salt = 1;
  ASSERT_TRUE(testing::BuildTestStore(site2, o).ok());
  std::string f1 = (dir_ / "1.jsonl").string(), f2 = (dir_ / "2.jsonl").string();
  ASSERT_EQ(Cli({"-d", data_, "export", "-o", f1}).rc, 0);
  ASSERT_EQ(Cli({"-d", site2, "export", "-o", f2, "--site", "two"}).rc, 0);
  CliRun r = Cli({"-d", data_, "--json", "import", f2});
  ASSERT_EQ(r.rc, 0) << r.err;
  Json rep = Json::parse(r.out);
  EXPECT_EQ(rep["merged"]["direction"], 13);
  EXPECT_EQ(rep["added"]["session"], 4);
  EXPECT_EQ(rep["added"]["transition"], 20);
  ASSERT_EQ(Cli({"-d", data_, "check"}).rc, 0);
  Json st = Json::parse(Cli({"-d", data_, "--json", "status"}).out);
  EXPECT_EQ(st["records"]["transitions"], 50);
  EXPECT_EQ(st["records"]["directions"], 13);
  // Statistics: a direction's uses are the sum of both sites'.
  auto uses = [&](const std::string& d, const std::string& name) {
    for (const auto& x : Json::parse(Cli({"-d", d, "--json", "directions"}).out))
      if (x["name"] == name) return x["stats"]["uses"].get<int>();
    return -1;
  };
  std::string fresh1 = (dir_ / "fresh1").string(), fresh2 = (dir_ / "fresh2").string();
  ASSERT_TRUE(testing::BuildTestStore(fresh1).ok());
  ASSERT_TRUE(testing::BuildTestStore(fresh2, o).ok());
  EXPECT_EQ(uses(data_, "global-memory-access"),
            uses(fresh1, "global-memory-access") + uses(fresh2, "global-memory-access"));
  // Its own export, site two's again, and a re-export of the merged store: nothing changes.
  std::string before = (dir_ / "before.jsonl").string(), after = (dir_ / "after.jsonl").string();
  ASSERT_EQ(Cli({"-d", data_, "export", "-o", before, "--site", "m"}).rc, 0);
  ASSERT_EQ(Cli({"-d", data_, "import", f1}).rc, 0);
  ASSERT_EQ(Cli({"-d", data_, "import", f2}).rc, 0);
  std::string third = (dir_ / "third").string();
  ASSERT_EQ(Cli({"-d", third, "import", before}).rc, 0);  // a third site gets the merged memory
  std::string t1 = (dir_ / "t1.jsonl").string();
  ASSERT_EQ(Cli({"-d", third, "export", "-o", t1}).rc, 0);
  ASSERT_EQ(Cli({"-d", data_, "import", t1}).rc, 0);  // ... and sends it back
  ASSERT_EQ(Cli({"-d", data_, "export", "-o", after, "--site", "m"}).rc, 0);
  EXPECT_EQ(htam::ReadFileOrEmpty(before), htam::ReadFileOrEmpty(after));
}

TEST_F(CliTest, ImportRejectsBadFiles) {
  Build();
  auto write = [&](const std::string& name, const std::string& text) {
    std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  };
  std::string good = (dir_ / "g.jsonl").string();
  ASSERT_EQ(Cli({"-d", data_, "export", "-o", good}).rc, 0);
  std::string text = htam::ReadFileOrEmpty(good);
  struct Case {
    std::string file, message;
  };
  std::vector<Case> cases = {
      {write("empty.jsonl", ""), "empty"},
      {write("nohdr.jsonl", "{\"type\":\"direction\"}\n"), "not an htam export"},
      {write("newer.jsonl", "{\"format\":\"htam-export\",\"version\":99}\n"), "newer"},
      {write("trunc.jsonl", text.substr(0, text.size() / 2)), ""},
      {write("noend.jsonl", text.substr(0, text.rfind("{\"type\":\"end\""))), "truncated"},
      {write("junk.jsonl", text.substr(0, text.find('\n') + 1) + "not json\n"),
       "not a JSON object"},
  };
  std::string before = Cli({"-d", data_, "--json", "status"}).out;
  for (const auto& c : cases) {
    CliRun r = Cli({"-d", data_, "import", c.file});
    EXPECT_EQ(r.rc, kExitFail) << c.file;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  }
  Json a = Json::parse(before), b = Json::parse(Cli({"-d", data_, "--json", "status"}).out);
  EXPECT_EQ(a["records"], b["records"]);  // nothing was written
}

TEST_F(CliTest, BackupRestoreCheck) {
  Build();
  std::string bk = (dir_ / "bk").string(), target = (dir_ / "target").string();
  CliRun b = Cli({"-d", data_, "backup", bk});
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_TRUE(fs::exists(bk + "/store/data.mdb"));
  EXPECT_TRUE(fs::exists(bk + "/MANIFEST.json"));
  EXPECT_EQ(Json::parse(htam::ReadFileOrEmpty(bk + "/MANIFEST.json"))["records"]["transitions"],
            30);
  EXPECT_EQ(Cli({"-d", data_, "backup", bk}).rc, kExitFail);  // not over a non-empty target
  CliRun r = Cli({"-d", target, "restore", bk});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Cli({"-d", target, "check"}).rc, 0);
  CliRun again = Cli({"-d", target, "restore", bk});
  EXPECT_EQ(again.rc, kExitFail);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  {
    auto lock = DataDirLock::Acquire(target);  // as a running htamd would
    ASSERT_TRUE(lock.ok());
    CliRun live = Cli({"-d", target, "restore", bk, "--force"});
    EXPECT_EQ(live.rc, kExitFail);
    EXPECT_NE(live.err.find("running"), std::string::npos) << live.err;
    EXPECT_EQ(Cli({"-d", target, "rebuild"}).rc, kExitFail);
    EXPECT_EQ(Cli({"-d", target, "import", bk + "/MANIFEST.json"}).rc, kExitFail);
    EXPECT_EQ(Json::parse(Cli({"-d", target, "--json", "status"}).out)["store"]["daemon_running"]
                  .get<std::string>()
                  .substr(0, 3),
              "yes");
  }
  EXPECT_EQ(Cli({"-d", target, "restore", bk, "--force"}).rc, 0);
  EXPECT_EQ(Cli({"-d", target, "sessions"}).out, Cli({"-d", data_, "sessions"}).out);
}

// Statistics tampered with behind the memory's back: check reports it, rebuild repairs it.
TEST_F(CliTest, CheckFindsAndRebuildRepairs) {
  Build();
  std::string store = data_ + "/store";
  {
    // The store layer itself, not the memory: nothing of the memory's would write such stats.
    auto st = memory::Store::Open(store, 256, 256, /*read_only=*/false);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    Status w = (*st)->Write([](memory::Txn& t) {
      std::string key = memory::KeyU64(1);  // direction 1
      std::string_view v;
      HTAM_RETURN_IF_ERROR(t.Get(memory::Db::kDirections, key, &v));
      fb::DirectionT d;
      HTAM_RETURN_IF_ERROR(memory::Decode(v, &d, "direction"));
      d.stats = std::make_unique<fb::GainStats>(999, 0, 0, 0, 0, 0, 0, 0);
      return t.Put(memory::Db::kDirections, key, memory::Encode(d));
    });
    ASSERT_TRUE(w.ok()) << w.ToString();
  }
  CliRun c = Cli({"-d", data_, "check"});
  EXPECT_EQ(c.rc, kExitFail);
  EXPECT_NE(c.out.find("direction 1 statistics differ"), std::string::npos) << c.out;
  CliRun r = Cli({"-d", data_, "rebuild"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(Cli({"-d", data_, "check"}).rc, 0);
}

TEST_F(CliTest, DamagedStoresGiveOneClearLine) {
  Build();
  std::string data = data_ + "/store/data.mdb";
  uintmax_t size = fs::file_size(data);
  std::string copy = (dir_ / "copy").string();
  fs::copy(data_, copy, fs::copy_options::recursive);
  fs::resize_file(data, size / 3);
  CliRun c = Cli({"-d", data_, "check"});
  EXPECT_EQ(c.rc, kExitFail);
  EXPECT_NE(c.out.find("truncated"), std::string::npos) << c.out;
  CliRun s = Cli({"-d", data_, "directions"});
  EXPECT_EQ(s.rc, kExitFail);
  EXPECT_NE(s.err.find("truncated"), std::string::npos) << s.err;
  EXPECT_EQ(Cli({"-d", data_, "backup", (dir_ / "bk").string()}).rc, kExitFail);
  EXPECT_FALSE(fs::exists(dir_ / "bk"));
  // Garbage over every page past the meta pages: reported (never a crash of the test process).
  {
    std::fstream f(copy + "/store/data.mdb", std::ios::in | std::ios::out | std::ios::binary);
    std::mt19937 rng(7);
    for (uintmax_t off = 2 * 4096; off + 64 < size; off += 4096) {
      f.seekp(static_cast<std::streamoff>(off + 16));
      for (int i = 0; i < 64; ++i) f.put(static_cast<char>(rng()));
    }
  }
  CliRun g = Cli({"-d", copy, "check"});
  EXPECT_EQ(g.rc, kExitFail);
  EXPECT_FALSE(g.out.empty());
  CliRun bg = Cli({"-d", copy, "backup", (dir_ / "bk2").string()});
  EXPECT_EQ(bg.rc, kExitFail);
  EXPECT_EQ(std::count(bg.err.begin(), bg.err.end(), '\n'), 1) << bg.err;
}

TEST_F(CliTest, UsageErrors) {
  EXPECT_EQ(Cli({}).rc, kExitUsage);
  EXPECT_EQ(Cli({"--help"}).rc, kExitOk);
  EXPECT_EQ(Cli({"frobnicate"}).rc, kExitUsage);
  EXPECT_EQ(Cli({"trajectory"}).rc, kExitUsage);
  EXPECT_EQ(Cli({"sessions", "--bogus"}).rc, kExitUsage);
  for (const char* cmd :
       {"status", "directions", "strategies", "show", "sessions", "trajectory", "explain", "top",
        "graph", "backup", "restore", "check", "rebuild", "export", "import"}) {
    CliRun h = Cli({cmd, "--help"});
    EXPECT_EQ(h.rc, 0) << cmd;
    EXPECT_NE(h.out.find("usage: htam " + std::string(cmd)), std::string::npos) << cmd;
  }
  CliRun none = Cli({"-d", (dir_ / "nothing").string(), "sessions"});
  EXPECT_EQ(none.rc, kExitFail);
  EXPECT_NE(none.err.find("no htam store at"), std::string::npos);
  CliRun remote_only = Cli({"-c", "ipc:///nonexistent", "backup", "x"});
  EXPECT_EQ(remote_only.rc, kExitFail);
}

// A store written before htamd checked every field at the door may hold invalid UTF-8 in a
// summary or a source: the JSON outputs replace those bytes (U+FFFD) and never abort.
TEST_F(CliTest, InvalidUtf8FromAnOlderStorePrintsReplacedNotAborted) {
  Build();
  uint64_t transition = 0, session = 0;
  {
    memory::MemoryOptions o;
    o.dir = data_ + "/store";
    o.snapshot_interval_s = 0;
    o.snapshot_every_records = 0;
    auto m = memory::Memory::Open(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto dirs = (*m)->ListDirections();
    ASSERT_TRUE(dirs.ok() && !dirs->empty());
    auto open = (*m)->OpenSession(2, "cuda", "sm_90", "older htam", "model-a", 0);
    ASSERT_TRUE(open.ok()) << open.status().ToString();
    session = open->id;
    memory::StepInput in;
    in.session_id = session;
    in.direction_id = (*dirs)[0].id;
    in.status = fb::OutcomeStatus::Ok;
    in.speedup_after = 1.0;
    in.summary = "fast \xFF\xFE";
    in.language = "cpp";
    in.source = "int k; // \xC3\x28";
    in.candidate_hash = memory::CandidateHash(in.language, in.source);
    auto rec = (*m)->RecordStep(in);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    transition = rec->transition_id;
  }
  const std::string replacement = "\xEF\xBF\xBD";
  for (std::vector<std::string> args :
       {std::vector<std::string>{"-d", data_, "--json", "trajectory", std::to_string(session)},
        std::vector<std::string>{"-d", data_, "--json", "show",
                                 "transition:" + std::to_string(transition)},
        std::vector<std::string>{"-d", data_, "export"}}) {
    CliRun r = Cli(args);
    EXPECT_EQ(r.rc, 0) << args[3] << ": " << r.err;
    EXPECT_EQ(r.err.find("damaged"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find(replacement), std::string::npos) << args[3];
  }
}

}  // namespace
}  // namespace htam::cli
