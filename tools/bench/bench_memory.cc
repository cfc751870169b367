// htam-bench memory: builds synthetic stores of growing size (transition records, strategies) and
// measures, in a fresh process per size, start-up time, resident memory, decision latency
// (NextStep: attention + scoring + retrieval) and durable record throughput (each write synced).
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "base/paths.h"
#include "daemon/memory/memory.h"
#include "tools/bench/args.h"
#include "tools/bench/bench.h"

using nlohmann::json;
using namespace htam;
using namespace htam::memory;
using htam::bench::NowSeconds;
namespace po = boost::program_options;

namespace {

const char kUsage[] =
    "usage: htam-bench memory [options]\n"
    "Builds one synthetic store through the sizes and measures each in a fresh process. Prints a\n"
    "table and, last, one JSON line with every figure.";

const char* kWords[] = {"tile",     "shared",     "memory",    "vector",   "load",     "store",
                        "warp",     "shuffle",    "reduce",    "fuse",     "epilogue", "unroll",
                        "pipeline", "async",      "copy",      "register", "block",    "grid",
                        "stride",   "coalesce",   "bank",      "pad",      "swizzle",  "tensor",
                        "core",     "half",       "precision", "mask",     "branch",   "launch",
                        "graph",    "persistent", "occupancy", "prefetch", "double",   "buffer",
                        "softmax",  "norm",       "matmul",    "conv",     "scan",     "atomic"};
const char* kCategories[] = {"elementwise",   "reduction", "matmul", "convolution",
                             "normalization", "attention", "scan",   "pooling"};

std::string Words(std::mt19937_64& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += kWords[rng() % (sizeof kWords / sizeof *kWords)];
  }
  return s;
}

#define CHECK_OK(expr)                                                                            \
  do {                                                                                            \
    const auto& _s = (expr);                                                                      \
    if (!_s.ok()) {                                                                               \
      std::fprintf(stderr, "htam-bench memory: %s: %s\n", #expr, _s.status().ToString().c_str()); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

void SyncOrDie(Memory& m) {
  Status s = m.Sync();
  if (!s.ok()) {
    std::fprintf(stderr, "htam-bench memory: sync: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

// ---------------------------------------------------------------- build (parent)

struct Builder {
  std::unique_ptr<Memory> m;
  std::mt19937_64 rng{12345};
  std::vector<uint64_t> tasks;
  std::vector<fb::DirectionT> dirs;
  std::map<uint64_t, std::vector<uint64_t>> strategies_by_dir;
};

MemoryOptions BuildOptions(const std::string& dir, const std::string& seed_file) {
  MemoryOptions o;
  o.dir = dir;
  o.map_size_mb = 4096;
  o.seed_file = seed_file;
  o.snapshot_interval_s = 0;
  o.sync_commits = false;  // bulk load; synced at close
  return o;
}

void AddStrategies(Builder& b, size_t want) {
  auto existing = b.m->ListStrategies({});
  CHECK_OK(existing);
  size_t have = existing->size();
  for (const auto& s : *existing) b.strategies_by_dir[s.direction_id].push_back(s.id);
  while (have < want) {
    std::vector<fb::StrategyT> batch;
    for (size_t i = 0; i < 5000 && have + batch.size() < want; ++i) {
      fb::StrategyT s;
      s.direction_id = b.dirs[b.rng() % b.dirs.size()].id;
      s.title = Words(b.rng, 6);
      s.description = "Synthetic strategy: " + Words(b.rng, 20);
      s.code_pattern = "// " + Words(b.rng, 8);
      s.preconditions = {Words(b.rng, 4)};
      s.failure_modes = {Words(b.rng, 4)};
      s.name = "synthetic-" + std::to_string(have + i);
      batch.push_back(std::move(s));
    }
    std::vector<uint64_t> dir_of;
    for (const auto& s : batch) dir_of.push_back(s.direction_id);
    auto ids = b.m->AddStrategies(std::move(batch));
    CHECK_OK(ids);
    for (size_t i = 0; i < ids->size(); ++i) b.strategies_by_dir[dir_of[i]].push_back((*ids)[i]);
    have += ids->size();
  }
}

void AddTransitions(Builder& b, size_t want) {
  auto count_now = b.m->ListTransitions(0, 1);
  CHECK_OK(count_now);
  size_t have = count_now->empty() ? 0 : count_now->front().id;
  const char* backends[] = {"cuda", "cuda", "hip", "cpu"};
  const fb::OutcomeStatus statuses[] = {
      fb::OutcomeStatus::Ok,           fb::OutcomeStatus::Ok,        fb::OutcomeStatus::Ok,
      fb::OutcomeStatus::CompileError, fb::OutcomeStatus::Incorrect, fb::OutcomeStatus::Timeout,
      fb::OutcomeStatus::Crash};
  double last_report = NowSeconds();
  while (have < want) {
    const char* backend = backends[b.rng() % 4];
    auto s = b.m->OpenSession(b.tasks[b.rng() % b.tasks.size()], backend,
                              std::string(backend) == "hip"   ? "gfx90a"
                              : std::string(backend) == "cpu" ? "x86_64"
                                                              : "sm_90",
                              "bench", "synthetic-model", 0);
    CHECK_OK(s);
    size_t steps = std::min<size_t>(100, want - have);
    std::vector<StepInput> batch;
    double speedup = 1.0;
    for (size_t k = 0; k < steps; ++k) {
      StepInput in;
      in.session_id = s->id;
      const auto& dir = b.dirs[b.rng() % b.dirs.size()];
      in.direction_id = dir.id;
      const auto& pool = b.strategies_by_dir[dir.id];
      if (!pool.empty()) in.strategy_ids = {pool[b.rng() % pool.size()]};
      in.status = statuses[b.rng() % 7];
      // A random walk, kept under the memory's plausibility ceiling (memory.max_speedup).
      speedup = std::min(speedup * (0.9 + (b.rng() % 40) / 100.0), 500.0);
      in.speedup_after = in.status == fb::OutcomeStatus::Ok ? speedup : 0;
      in.verified = true;
      in.state = StateInput{static_cast<fb::Bottleneck>(b.rng() % 5), std::nullopt, ""};
      if (b.rng() % 100 == 0) in.summary = Words(b.rng, 7);  // some steps teach new strategies
      if (b.rng() % 5 == 0) {
        in.language = "cuda";
        in.source = "// candidate " + std::to_string(b.rng());
      }
      batch.push_back(std::move(in));
    }
    CHECK_OK(b.m->RecordSteps(batch));
    have += steps;
    if (NowSeconds() - last_report > 15) {
      std::fprintf(stderr, "  ... %zu / %zu records\n", have, want);
      last_report = NowSeconds();
    }
  }
}

// ---------------------------------------------------------------- command line

// The command line; the measuring child gets the same values (and --phase measure, --dir STORE).
struct Args {
  bench::CountList sizes;
  bench::Count strategies, decisions, durable, batch, threads, retrieval_cache, top_k;
  std::string strategy_scope, dir, seed_file, phase;
  double passed_over_weight = 0, passed_over_applied_weight = 0;
  bool keep = false;
};

void Describe(Args* a, po::options_description* shown, po::options_description* hidden) {
  const MemoryOptions d;
  auto count = [](bench::Count* c, int64_t def, const std::string& text) {
    return po::value(c)->default_value(bench::Count{def}, text)->value_name("N");
  };
  auto add = shown->add_options();
  add("sizes",
      po::value(&a->sizes)
          ->default_value(bench::CountList{{10000, 100000, 1000000}}, "10k,100k,1m")
          ->value_name("LIST"),
      "transition-record counts, cumulative");
  add("strategies", count(&a->strategies, 100000, "100k"), "strategies in the store");
  add("decisions", count(&a->decisions, 2000, "2000"), "timed NextStep calls per size");
  add("durable", count(&a->durable, 2000, "2000"), "synced records per throughput measurement");
  add("batch", count(&a->batch, 256, "256"),
      "steps per synced transaction in the batch measurement");
  add("threads", count(&a->threads, 32, "32"),
      "concurrent writers in the group-commit measurement");
  add("retrieval-cache",
      count(&a->retrieval_cache, d.retrieval_cache, std::to_string(d.retrieval_cache)),
      "memory.retrieval_cache of the measuring process (0 measures every decision's strategy "
      "search)");
  add("strategy-scope",
      po::value(&a->strategy_scope)->default_value(d.strategy_scope)->value_name("S"),
      "memory.strategy_scope of the measuring process (all | direction)");
  add("top-k", count(&a->top_k, d.top_k_strategies, std::to_string(d.top_k_strategies)),
      "memory.top_k_strategies of the measuring process");
  add("passed-over-weight",
      po::value(&a->passed_over_weight)->default_value(d.passed_over_weight)->value_name("W"),
      "memory.passed_over_weight of the measuring process");
  add("passed-over-applied-weight",
      po::value(&a->passed_over_applied_weight)
          ->default_value(d.passed_over_applied_weight)
          ->value_name("A"),
      "memory.passed_over_applied_weight of the measuring process");
  add("dir", po::value(&a->dir)->value_name("DIR"),
      "where the stores are built (default: a new directory under /tmp)");
  add("keep", po::bool_switch(&a->keep), "keep the store afterwards");
  add("seed-file",
      po::value(&a->seed_file)
          ->default_value(htam::ShippedPath("", "seed_taxonomy.json"), "the shipped one")
          ->value_name("FILE"),
      "seed taxonomy (share/htam/seed_taxonomy.json)");
  hidden->add_options()("phase", po::value(&a->phase), "internal: measure (the child process)");
}

// A double as text that reads back as the same double.
std::string Exact(double v) {
  std::ostringstream s;
  s << std::setprecision(17) << v;
  return s.str();
}

// ---------------------------------------------------------------- measure (child)

int MeasurePhase(const Args& args) {
  std::string dir = args.dir;
  int decisions = static_cast<int>(args.decisions.n);
  int durable = static_cast<int>(args.durable.n);
  int batch = static_cast<int>(args.batch.n);
  int threads = static_cast<int>(args.threads.n);
  MemoryOptions o;
  o.retrieval_cache = static_cast<int>(args.retrieval_cache.n);
  o.strategy_scope = args.strategy_scope;
  o.top_k_strategies = static_cast<int>(args.top_k.n);
  o.passed_over_weight = args.passed_over_weight;
  o.passed_over_applied_weight = args.passed_over_applied_weight;
  o.dir = dir;
  o.map_size_mb = 4096;
  o.seed_file = "";
  o.snapshot_interval_s = 0;
  double t0 = NowSeconds();
  auto opened = Memory::Open(o);
  CHECK_OK(opened);
  double startup = NowSeconds() - t0;
  Memory& m = **opened;
  std::string status_text = m.StatusText();
  uint64_t rss_open = bench::RssBytes();

  // Decisions over existing sessions (with history) in varied states.
  auto sessions = m.ListSessions(0, 512);
  CHECK_OK(sessions);
  std::mt19937_64 rng(99);
  std::vector<double> lat;
  int warm = std::min(200, decisions / 5 + 1);
  size_t strategies_returned = 0;
  for (int i = 0; i < decisions + warm; ++i) {
    uint64_t sid = (*sessions)[rng() % sessions->size()].id;
    StateInput st{static_cast<fb::Bottleneck>(rng() % 5), std::nullopt, ""};
    double a = NowSeconds();
    auto d = m.NextStep(sid, st);
    double us = (NowSeconds() - a) * 1e6;
    CHECK_OK(d);
    strategies_returned += d->strategies.size();
    if (i >= warm) lat.push_back(us);
  }
  uint64_t rss = bench::RssBytes();
  uint64_t rss_anon = bench::RssAnonBytes();  // without the LMDB pages mapped in by reads
  // Share of the decisions (warm-up included) whose strategy search the retrieval cache answered.
  auto status_number = [](const std::string& text, const std::string& key) {
    size_t at = text.find(key + ":");
    return at == std::string::npos ? 0.0 : std::atof(text.c_str() + at + key.size() + 1);
  };
  std::string after = m.StatusText();
  double cache_hits = status_number(after, "retrieval_cache_hits");
  double cache_misses = status_number(after, "retrieval_cache_misses");
  double cache_hit_rate =
      cache_hits + cache_misses > 0 ? cache_hits / (cache_hits + cache_misses) : 0.0;

  // Durable throughput: each acknowledged write synced to disk.
  auto task = m.ListTasks();
  CHECK_OK(task);
  auto dirs = m.ListDirections();
  CHECK_OK(dirs);
  auto step_for = [&](uint64_t session, uint64_t k) {
    StepInput in;
    in.session_id = session;
    in.direction_id = (*dirs)[k % dirs->size()].id;
    in.status = k % 3 ? fb::OutcomeStatus::Ok : fb::OutcomeStatus::CompileError;
    in.speedup_after = in.status == fb::OutcomeStatus::Ok ? 1.0 + (k % 50) / 100.0 : 0;
    in.verified = true;
    in.state = StateInput{fb::Bottleneck::Memory, std::nullopt, ""};
    return in;
  };
  auto new_session = [&]() {
    auto s = m.OpenSession(task->front().id, "cuda", "sm_90", "bench", "m", 0);
    CHECK_OK(s);
    return s->id;
  };
  // Sessions of bounded length keep each step's session record small.
  const uint64_t kSessionSteps = 100;
  double a = NowSeconds();
  uint64_t sess = 0;
  int singles = std::max(1, durable / 4);
  for (int k = 0; k < singles; ++k) {
    if (k % kSessionSteps == 0) sess = new_session();
    CHECK_OK(m.RecordStep(step_for(sess, k)));
  }
  double single_rps = singles / (NowSeconds() - a);

  a = NowSeconds();
  int done = 0;
  while (done < durable) {
    sess = new_session();
    for (uint64_t s = 0; s < kSessionSteps && done < durable; s += batch) {
      std::vector<StepInput> steps;
      for (int k = 0; k < batch && done + k < durable; ++k)
        steps.push_back(step_for(sess, done + k));
      CHECK_OK(m.RecordSteps(steps));
      done += static_cast<int>(steps.size());
    }
  }
  // Acknowledged means synced; the indexes take the records in the background: include the time
  // until they hold every one (Sync waits for it), so the rate is one the memory can sustain.
  double batch_acked_rps = durable / (NowSeconds() - a);
  SyncOrDie(m);
  double batch_rps = durable / (NowSeconds() - a);

  std::vector<uint64_t> tsess;
  for (int i = 0; i < threads; ++i) tsess.push_back(new_session());
  a = NowSeconds();
  std::vector<std::thread> ts;
  int per = std::max(1, durable / threads);
  for (int i = 0; i < threads; ++i)
    ts.emplace_back([&, i] {
      uint64_t s = tsess[i];
      for (int k = 0; k < per; ++k) {
        if (k && k % kSessionSteps == 0) s = new_session();
        CHECK_OK(m.RecordStep(step_for(s, k)));
      }
    });
  for (auto& t : ts) t.join();
  SyncOrDie(m);
  double group_rps = per * threads / (NowSeconds() - a);

  json r = {{"startup_s", startup},
            {"rss_after_open_mib", rss_open / 1048576.0},
            {"rss_mib", rss / 1048576.0},
            {"rss_anon_mib", rss_anon / 1048576.0},
            {"peak_rss_mib", bench::PeakRssBytes() / 1048576.0},
            {"decision_p50_us", bench::Percentile(lat, 50)},
            {"decision_p99_us", bench::Percentile(lat, 99)},
            {"decision_max_us", bench::Percentile(lat, 100)},
            {"decisions", decisions},
            {"strategies_per_decision", double(strategies_returned) / (decisions + warm)},
            {"retrieval_cache_hit_rate", cache_hit_rate},
            {"durable_single_rps", single_rps},
            {"durable_batch_rps", batch_rps},
            {"durable_batch_acked_rps", batch_acked_rps},
            {"durable_group_commit_rps", group_rps},
            {"index_source",
             status_text.substr(status_text.find("index_source:") + 13,
                                status_text.find('\n', status_text.find("index_source:")) -
                                    status_text.find("index_source:") - 13)}};
  std::printf("PHASE_RESULT %s\n", r.dump().c_str());
  std::fflush(stdout);
  // Skip the snapshot at close: the parent does not reuse this process's additions' timing.
  std::_Exit(0);
}

}  // namespace

int RunMemoryBench(int argc, char** argv) {
  Args a;
  po::options_description shown, hidden;
  Describe(&a, &shown, &hidden);
  po::variables_map vm;
  const int exit_now = bench::ParseArgs(
      "htam-bench memory", kUsage, std::vector<std::string>(argv, argv + argc), shown, hidden, &vm);
  if (exit_now >= 0) return exit_now;
  if (a.phase == "measure") return MeasurePhase(a);

  std::vector<int64_t> sizes = a.sizes.v;
  if (sizes.empty()) {
    std::fprintf(stderr, "htam-bench memory: --sizes names no size\n");
    return 2;
  }
  std::sort(sizes.begin(), sizes.end());
  size_t strategies = static_cast<size_t>(a.strategies.n);
  std::string dir = a.dir;
  bool made_dir = false;
  if (dir.empty()) {
    char tmpl[] = "/tmp/htam-bench-memory-XXXXXX";
    dir = mkdtemp(tmpl);
    made_dir = true;
  }
  std::string store = dir + "/store";
  std::printf("htam-bench memory: store %s, sizes", store.c_str());
  for (auto s : sizes) std::printf(" %lld", static_cast<long long>(s));
  std::printf(", %zu strategies, %u cpus\n", strategies, std::thread::hardware_concurrency());
  std::fflush(stdout);

  json results = json::array();
  for (int64_t size : sizes) {
    double t0 = NowSeconds();
    {
      Builder b;
      auto opened = Memory::Open(BuildOptions(store, a.seed_file));
      CHECK_OK(opened);
      b.m = std::move(opened).value();
      auto dirs = b.m->ListDirections();
      CHECK_OK(dirs);
      b.dirs = *dirs;
      auto tasks = b.m->ListTasks();
      CHECK_OK(tasks);
      for (const auto& t : *tasks) b.tasks.push_back(t.id);
      for (int i = static_cast<int>(b.tasks.size()); i < 40; ++i) {
        fb::TaskT t;
        t.name = "bench-task-" + std::to_string(i);
        t.category = kCategories[i % 8];
        t.description = "synthetic " + t.category + " task " + std::to_string(i);
        t.bytes = std::pow(10.0, 4 + i % 6);
        t.flops = t.bytes * (i % 8 == 2 ? 30 : 0.5);
        auto id = b.m->PutTask(t);
        CHECK_OK(id);
        b.tasks.push_back(*id);
      }
      AddStrategies(b, strategies);
      AddTransitions(b, static_cast<size_t>(size));
    }  // closing writes the index snapshots
    double build_s = NowSeconds() - t0;
    int status = 0;
    std::string out = bench::RunCapture({bench::SelfExe(),
                                         "memory",
                                         "--phase",
                                         "measure",
                                         "--dir",
                                         store,
                                         "--decisions",
                                         std::to_string(a.decisions.n),
                                         "--durable",
                                         std::to_string(a.durable.n),
                                         "--batch",
                                         std::to_string(a.batch.n),
                                         "--threads",
                                         std::to_string(a.threads.n),
                                         "--retrieval-cache",
                                         std::to_string(a.retrieval_cache.n),
                                         "--strategy-scope",
                                         a.strategy_scope,
                                         "--top-k",
                                         std::to_string(a.top_k.n),
                                         "--passed-over-weight",
                                         Exact(a.passed_over_weight),
                                         "--passed-over-applied-weight",
                                         Exact(a.passed_over_applied_weight)},
                                        &status);
    size_t at = out.find("PHASE_RESULT ");
    if (status != 0 || at == std::string::npos) {
      std::fprintf(stderr, "htam-bench memory: measurement of %lld records failed (status %d)\n%s",
                   static_cast<long long>(size), status, out.c_str());
      return 1;
    }
    json r = json::parse(out.substr(at + 13));
    r["records"] = size;
    r["strategies"] = strategies;
    r["build_s"] = build_s;
    r["store_mib"] = bench::DirBytes(store) / 1048576.0;
    std::printf(
        "records %8lld | build %7.1f s | start-up %6.3f s | RSS %7.1f MiB (anon %7.1f) | decision "
        "p50 %6.0f us"
        " p99 %6.0f us (retrieval cache hits %3.0f%%) | durable/s single %6.0f batch %7.0f group "
        "%6.0f | store %7.1f MiB\n",
        static_cast<long long>(size), build_s, r["startup_s"].get<double>(),
        r["rss_mib"].get<double>(), r["rss_anon_mib"].get<double>(),
        r["decision_p50_us"].get<double>(), r["decision_p99_us"].get<double>(),
        100 * r["retrieval_cache_hit_rate"].get<double>(), r["durable_single_rps"].get<double>(),
        r["durable_batch_rps"].get<double>(), r["durable_group_commit_rps"].get<double>(),
        r["store_mib"].get<double>());
    std::fflush(stdout);
    results.push_back(r);
  }
  const json& last = results.back();
  json summary = {
      {"bench", "memory"},
      {"cpus", std::thread::hardware_concurrency()},
      {"sizes", results},
      {"targets",
       {{"decision_p99_us", 1000}, {"durable_rps", 5000}, {"startup_s", 5}, {"rss_mib", 1024}}},
      {"largest_meets_targets",
       {{"decision_p99", last["decision_p99_us"].get<double>() <= 1000},
        {"durable", std::max(last["durable_batch_rps"].get<double>(),
                             last["durable_group_commit_rps"].get<double>()) >= 5000},
        {"startup", last["startup_s"].get<double>() <= 5},
        {"rss", last["rss_mib"].get<double>() <= 1024}}}};
  std::printf("%s\n", summary.dump().c_str());
  if (made_dir && !a.keep) std::filesystem::remove_all(dir);
  return 0;
}
