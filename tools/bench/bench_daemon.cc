// htam-bench daemon: round trips to a real htamd over loopback TCP with the C++ SDK. Fills a
// store with synthetic transition records (memory library), starts htamd on it, then measures
// next-step and record latency (p50, p99) and throughput with 1, 8 and 32 concurrent clients.
// Prints one JSON line at the end (docs/benchmarks.md, section "daemon").
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/memory/memory.h"
#include "htam/client.h"
#include "tools/bench/args.h"
#include "tools/bench/bench.h"

namespace {

using htam::bench::NowSeconds;
using htam::bench::Percentile;
namespace fs = std::filesystem;
namespace po = boost::program_options;

const char kUsage[] =
    "usage: htam-bench daemon [options]\n"
    "Fills a store, starts htamd on it over loopback TCP, and measures next-step and record\n"
    "round trips with each client count. Prints one JSON line at the end.";

#define CHECK_OK(expr)                                                                            \
  do {                                                                                            \
    auto&& _r = (expr);                                                                           \
    if (!_r.ok()) {                                                                               \
      std::fprintf(stderr, "htam-bench daemon: %s: %s\n", #expr, _r.status().ToString().c_str()); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

template <typename T>
const htam::Status& StatusOf(const htam::Result<T>& r) {
  return r.status();
}

// Fills the store through the memory library (the daemon is not running yet).
void Populate(const htam::Config& config, size_t want) {
  htam::memory::MemoryOptions o = htam::memory::MemoryOptions::FromConfig(config);
  o.sync_commits = false;  // bulk load; synced at close (the daemon then syncs every commit)
  auto opened = htam::memory::Memory::Open(o);
  CHECK_OK(opened);
  htam::memory::Memory& m = **opened;
  auto existing = m.ListTransitions(0, 1);
  CHECK_OK(existing);
  size_t have = existing->empty() ? 0 : existing->front().id;
  if (have >= want) {
    std::fprintf(stderr, "store already holds %zu records\n", have);
    return;
  }
  htam::fb::TaskT task;
  task.name = "bench_relu";
  task.category = "elementwise";
  task.description = "synthetic task of the daemon benchmark";
  task.flops = 1 << 20;
  task.bytes = 8 << 20;
  auto task_id = m.PutTask(task);
  CHECK_OK(task_id);
  auto dirs = m.ListDirections();
  CHECK_OK(dirs);
  std::mt19937_64 rng(7);
  const htam::fb::OutcomeStatus statuses[] = {
      htam::fb::OutcomeStatus::Ok, htam::fb::OutcomeStatus::Ok, htam::fb::OutcomeStatus::Ok,
      htam::fb::OutcomeStatus::CompileError, htam::fb::OutcomeStatus::Incorrect};
  double t0 = NowSeconds(), last = t0;
  while (have < want) {
    auto s = m.OpenSession(*task_id, "cuda", "sm_90", "bench", "synthetic", 0);
    CHECK_OK(s);
    std::vector<htam::memory::StepInput> batch;
    double speedup = 1;
    for (size_t k = 0; k < 100 && have + k < want; ++k) {
      htam::memory::StepInput in;
      in.session_id = s->id;
      in.direction_id = (*dirs)[rng() % dirs->size()].id;
      in.status = statuses[rng() % 5];
      speedup *= 0.9 + static_cast<double>(rng() % 40) / 100.0;
      in.speedup_after = in.status == htam::fb::OutcomeStatus::Ok ? speedup : 0;
      in.verified = true;
      in.state =
          htam::memory::StateInput{static_cast<htam::fb::Bottleneck>(rng() % 5), std::nullopt, ""};
      batch.push_back(std::move(in));
    }
    CHECK_OK(m.RecordSteps(batch));
    have += batch.size();
    if (NowSeconds() - last > 15) {
      std::fprintf(stderr, "  ... %zu / %zu records (%.0f s)\n", have, want, NowSeconds() - t0);
      last = NowSeconds();
    }
  }
  CHECK_OK(m.ListTransitions(0, 1));
  auto snap = m.SnapshotIndexes();
  if (!snap.ok()) std::fprintf(stderr, "snapshot: %s\n", snap.ToString().c_str());
  std::fprintf(stderr, "store filled: %zu records in %.1f s\n", have, NowSeconds() - t0);
}

struct PhaseResult {
  std::string op;
  int clients = 0;
  size_t requests = 0;
  double seconds = 0;
  double p50_ms = 0, p99_ms = 0, mean_ms = 0;
  double rps() const { return seconds > 0 ? requests / seconds : 0; }
};

PhaseResult RunPhase(const std::string& endpoint, const std::string& op, int clients,
                     double seconds) {
  std::vector<std::unique_ptr<htam::Client>> conns;
  std::vector<uint64_t> sessions, directions;
  for (int i = 0; i < clients; ++i) {
    htam::ClientOptions o;
    o.endpoint = endpoint;
    o.client_name = "bench-" + std::to_string(i);
    auto c = htam::Client::Connect(o);
    CHECK_OK(c);
    htam::OpenSessionArgs open;
    open.task = "bench_relu";
    open.backend = "cuda";
    auto s = (*c)->OpenSession(open);
    CHECK_OK(s);
    sessions.push_back(s->session->id);
    auto step = (*c)->NextStep(s->session->id);  // a direction for Record, and a warm-up
    CHECK_OK(step);
    directions.push_back(step->direction->id);
    conns.push_back(std::move(*c));
  }
  std::atomic<bool> go{false}, stop{false};
  std::mutex mu;
  std::vector<double> all;
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      std::vector<double> lat;
      lat.reserve(100000);
      while (!go) std::this_thread::yield();
      uint64_t k = 0;
      while (!stop) {
        double a = NowSeconds();
        if (op == "next_step") {
          CHECK_OK(conns[i]->NextStep(sessions[i]));
        } else if (op == "hello") {
          CHECK_OK(conns[i]->Hello());
        } else {
          htam::RecordArgs r;
          r.session_id = sessions[i];
          r.direction_id = directions[i];
          r.summary = "";
          r.status = htam::fb::OutcomeStatus::Ok;
          r.speedup_after = 1.0f + static_cast<float>(k++ % 10) / 10.0f;
          CHECK_OK(conns[i]->Record(r));
        }
        lat.push_back((NowSeconds() - a) * 1e3);
      }
      std::lock_guard<std::mutex> lock(mu);
      all.insert(all.end(), lat.begin(), lat.end());
    });
  }
  // Warm-up outside the window is done by the Connect/OpenSession round trips above.
  double t0 = NowSeconds();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  PhaseResult r;
  r.op = op;
  r.clients = clients;
  r.seconds = NowSeconds() - t0;
  r.requests = all.size();
  double sum = 0;
  for (double v : all) sum += v;
  r.mean_ms = all.empty() ? 0 : sum / all.size();
  r.p50_ms = Percentile(all, 50);
  r.p99_ms = Percentile(all, 99);
  for (size_t i = 0; i < conns.size(); ++i) {
    (void)conns[i]->CloseSession(sessions[i]);
  }
  return r;
}

}  // namespace

int RunDaemonBench(int argc, char** argv) {
  using htam::bench::Count;
  using htam::bench::CountList;
  Count records_n{100000}, seconds_n{5}, port_n{17800 + getpid() % 100}, read_threads_n;
  CountList clients_n{{1, 8, 32}};
  std::string htamd = (fs::path(htam::bench::SelfExe()).parent_path() / "../../daemon/htamd")
                          .lexically_normal()
                          .string();
  std::string dir, ops_list = "next_step,record";
  po::options_description d;
  auto add = d.add_options();
  add("records", po::value(&records_n)->default_value(records_n, "100000")->value_name("N"),
      "transition records in the store before measuring");
  add("clients", po::value(&clients_n)->default_value(clients_n, "1,8,32")->value_name("LIST"),
      "concurrent clients, one phase each");
  add("seconds", po::value(&seconds_n)->default_value(seconds_n, "5")->value_name("S"),
      "measuring time per phase and client count");
  add("port", po::value(&port_n)->default_value(port_n, "17800 + pid % 100")->value_name("P"),
      "loopback TCP port for htamd");
  add("dir", po::value(&dir)->value_name("DIR"),
      "data directory to use (default: a temp dir, removed at the end; an existing store there "
      "is reused when it already holds enough records)");
  add("htamd",
      po::value(&htamd)
          ->default_value(htamd, "../../daemon/htamd from this binary")
          ->value_name("PATH"),
      "the daemon binary");
  add("read-threads", po::value(&read_threads_n)->value_name("N"),
      "htamd's server.read_threads (default: the daemon's default)");
  add("ops", po::value(&ops_list)->default_value(ops_list)->value_name("LIST"),
      "phases among hello,next_step,record; hello measures the protocol round trip alone (no "
      "memory work)");
  po::variables_map vm;
  const int exit_now = htam::bench::ParseArgs("htam-bench daemon", kUsage,
                                              std::vector<std::string>(argv, argv + argc), d,
                                              po::options_description(), &vm);
  if (exit_now >= 0) return exit_now;
  const size_t records = static_cast<size_t>(records_n.n);
  const std::vector<int64_t> clients = clients_n.v;
  const double seconds = static_cast<double>(seconds_n.n);
  const int port = static_cast<int>(port_n.n);
  bool temp = !vm.count("dir");
  if (temp) {
    char tmpl[] = "/tmp/htam-bench-daemon-XXXXXX";
    dir = mkdtemp(tmpl);
  }
  fs::create_directories(dir);
  chmod(dir.c_str(), 0755);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  const std::string read_threads =
      vm.count("read-threads") ? std::to_string(read_threads_n.n) : std::string();
  const std::vector<std::string> ops = htam::bench::SplitList(ops_list);

  htam::Config config = htam::Config::Defaults();
  (void)config.Set("general.data_dir", dir);
  std::fprintf(stderr, "filling the store in %s with %zu records...\n", dir.c_str(), records);
  Populate(config, records);

  // The daemon, on loopback TCP, without evaluation workers' output in our way.
  pid_t pid = fork();
  if (pid == 0) {
    std::string log = dir + "/htamd.log";
    FILE* lf = fopen(log.c_str(), "a");
    if (lf) {
      dup2(fileno(lf), 1);
      dup2(fileno(lf), 2);
    }
    std::vector<std::string> args = {htamd,    "--general.data_dir",  dir,   "--server.bind",
                                     endpoint, "--general.log_level", "warn"};
    if (!read_threads.empty()) {
      args.push_back("--server.read_threads");
      args.push_back(read_threads);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  bool ready = false;
  for (int i = 0; i < 600 && !ready; ++i) {
    htam::ClientOptions o;
    o.endpoint = endpoint;
    o.connect_timeout = std::chrono::milliseconds(500);
    ready = htam::Client::Connect(o).ok();
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;
  }
  if (!ready) {
    std::fprintf(stderr, "htam-bench daemon: htamd (%s) did not start; see %s/htamd.log\n",
                 htamd.c_str(), dir.c_str());
    kill(pid, SIGKILL);
    return 1;
  }

  nlohmann::json out;
  out["bench"] = "daemon";
  out["records"] = records;
  out["transport"] = "tcp loopback";
  out["seconds_per_phase"] = seconds;
  out["hardware_threads"] = std::thread::hardware_concurrency();
  nlohmann::json phases = nlohmann::json::array();
  out["read_threads"] = read_threads.empty() ? "default" : read_threads;
  for (const std::string& op : ops) {
    for (int64_t c : clients) {
      PhaseResult r = RunPhase(endpoint, op, static_cast<int>(c), seconds);
      std::fprintf(stderr, "%-9s clients=%-3d requests=%-7zu rps=%-8.0f p50=%.3f ms p99=%.3f ms\n",
                   op.c_str(), r.clients, r.requests, r.rps(), r.p50_ms, r.p99_ms);
      phases.push_back({{"op", op},
                        {"clients", r.clients},
                        {"requests", r.requests},
                        {"rps", r.rps()},
                        {"p50_ms", r.p50_ms},
                        {"p99_ms", r.p99_ms},
                        {"mean_ms", r.mean_ms}});
      out[op + "_c" + std::to_string(c) + "_p50_ms"] = r.p50_ms;
      out[op + "_c" + std::to_string(c) + "_p99_ms"] = r.p99_ms;
      out[op + "_c" + std::to_string(c) + "_rps"] = r.rps();
    }
  }
  out["phases"] = phases;
  kill(pid, SIGTERM);
  int st = 0;
  waitpid(pid, &st, 0);
  out["daemon_exit"] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (temp) fs::remove_all(dir);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
