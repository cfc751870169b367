// htam-bench workers: evaluation throughput of htamd with 1 vs N remote htam-worker processes on
// the task suite, side by side in one run. htamd evaluates nothing itself (worker.local = false);
// each worker serves the devices it sees (--gpu-per-worker pins worker i to GPU i). Every job is
// the task's reference with a unique comment, so each one is compiled, verified and timed.
// Prints a table and one JSON line (docs/benchmarks.md, section "workers").
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/file.h"
#include "base/paths.h"
#include "htam/client.h"
#include "tools/bench/args.h"
#include "tools/bench/bench.h"

namespace {

using htam::ReadFileOrEmpty;
using htam::bench::NowSeconds;
namespace fs = std::filesystem;
namespace po = boost::program_options;

const char kUsage[] =
    "usage: htam-bench workers [options]\n"
    "Evaluation throughput of htamd with 1 vs N remote htam-worker processes, one phase per "
    "worker\n"
    "count (a fresh daemon and workers each). Prints a table and one JSON line.";

// The command line.
struct Args {
  std::string backend = "cpu", tasks, tasks_dir, htamd, worker, worker_args;
  htam::bench::CountList workers{{1, 2}};
  htam::bench::Count jobs{24}, rounds{1}, timeout_s{1800}, device_ms{0};
  bool gpu_per_worker = false;
};

po::options_description Describe(Args* a) {
  const std::string self = fs::path(htam::bench::SelfExe()).parent_path().string();
  a->tasks_dir = htam::ShippedPath("", "tasks");
  a->htamd = self + "/../../daemon/htamd";
  a->worker = self + "/../../daemon/eval/worker/htam-worker";
  po::options_description d;
  auto add = d.add_options();
  add("backend", po::value(&a->backend)->default_value(a->backend)->value_name("B"),
      "cpu, cuda or hip");
  add("workers", po::value(&a->workers)->default_value(a->workers, "1,2")->value_name("LIST"),
      "worker counts to compare");
  add("jobs", po::value(&a->jobs)->default_value(a->jobs, "24")->value_name("N"),
      "candidates per phase");
  add("rounds", po::value(&a->rounds)->default_value(a->rounds, "1")->value_name("R"),
      "phases per worker count; the median throughput is reported");
  add("tasks", po::value(&a->tasks)->value_name("LIST"),
      "comma-separated task names (default: every suite task with a reference for B)");
  add("tasks-dir",
      po::value(&a->tasks_dir)->default_value(a->tasks_dir, "the shipped one")->value_name("DIR"),
      "the task suite (share/htam/tasks)");
  add("gpu-per-worker", po::bool_switch(&a->gpu_per_worker),
      "worker i sees only GPU i (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES)");
  add("htamd",
      po::value(&a->htamd)
          ->default_value(a->htamd, "../../daemon/htamd from this binary")
          ->value_name("PATH"),
      "the daemon binary");
  add("worker",
      po::value(&a->worker)
          ->default_value(a->worker, "../../daemon/eval/worker/htam-worker from this binary")
          ->value_name("PATH"),
      "the worker binary");
  add("worker-args", po::value(&a->worker_args)->value_name("\"A\""),
      "extra options for every worker, space-separated (--worker-args=\"--eval.repetitions 20\")");
  add("timeout-s", po::value(&a->timeout_s)->default_value(a->timeout_s, "1800")->value_name("S"),
      "per phase");
  add("device-ms", po::value(&a->device_ms)->value_name("N"),
      "cpu only: every call of a candidate also sleeps N ms, standing in for device time during "
      "which the host CPU idles (as it does while a GPU runs a kernel); shows the scheduler's "
      "parallelism where the host's cores are the limit");
  return d;
}

// The reference, renamed, behind an entry point that first sleeps (see --device-ms).
std::string WithDeviceTime(const std::string& reference, int64_t ms) {
  return "#include <chrono>\n#include <thread>\n#define htam_kernel htam_bench_reference\n" +
         reference +
         "\n#undef htam_kernel\n"
         "HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, "
         "int nout, htam_stream stream) {\n"
         "  std::this_thread::sleep_for(std::chrono::milliseconds(" +
         std::to_string(ms) +
         "));\n"
         "  return htam_bench_reference(in, nin, out, nout, stream);\n}\n";
}

pid_t Spawn(const std::vector<std::string>& args, const std::string& log,
            const std::vector<std::string>& env = {}) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = fopen(log.c_str(), "a");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

void Stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

std::string StatusValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ": ", 0) == 0) return line.substr(key.size() + 2);
  return "";
}

struct Phase {
  int workers = 0;
  int ok = 0, failed = 0;
  double seconds = 0;
  double per_min = 0;
};

// One phase: a fresh daemon, `n` workers, `jobs` candidates over `tasks`; wall time to the last
// result.
Phase RunPhase(const Args& opt, int n, int jobs, const std::vector<std::string>& tasks,
               const std::map<std::string, std::string>& sources) {
  Phase p;
  p.workers = n;
  char tmpl[] = "/tmp/htam-bench-workers-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  chmod(dir.c_str(), 0755);
  const std::string& htamd = opt.htamd;
  const std::string& worker = opt.worker;
  const std::string& backend = opt.backend;
  const std::string front = "ipc://" + dir + "/htamd.sock", back = "ipc://" + dir + "/w.sock";
  pid_t d = Spawn(
      {htamd, "--general.data_dir", dir, "--server.bind", front, "--server.tasks_dir",
       opt.tasks_dir, "--worker.endpoint", back, "--worker.local", "false",
       "--worker.queue_per_device", std::to_string(jobs + 1), "--server.max_wait_ms", "3600000"},
      dir + "/htamd.log");
  std::vector<pid_t> ws;
  for (int i = 0; i < n; ++i) {
    std::string wdir = dir + "/w" + std::to_string(i);
    fs::create_directories(wdir);
    chmod(wdir.c_str(), 0755);
    std::vector<std::string> args = {worker,
                                     "--general.data_dir",
                                     wdir,
                                     "--worker.connect",
                                     back,
                                     "--worker.name",
                                     "w" + std::to_string(i),
                                     "--eval.backends",
                                     backend};
    for (const auto& w : htam::bench::SplitList(opt.worker_args, ' ')) args.push_back(w);
    std::vector<std::string> env;
    if (opt.gpu_per_worker)
      env = {"CUDA_VISIBLE_DEVICES=" + std::to_string(i),
             "HIP_VISIBLE_DEVICES=" + std::to_string(i)};
    ws.push_back(Spawn(args, wdir + "/worker.log", env));
  }
  htam::ClientOptions o;
  o.endpoint = front;
  o.timeout = std::chrono::seconds(30);
  o.retries = 20;
  auto c = htam::Client::Connect(o);
  if (!c.ok()) {
    std::fprintf(stderr, "htam-bench workers: htamd did not start: %s\n%s\n",
                 c.status().ToString().c_str(), ReadFileOrEmpty(dir + "/htamd.log").c_str());
    std::exit(1);
  }
  const double limit = NowSeconds() + double(opt.timeout_s.n);
  for (;;) {  // every worker registered
    auto st = (*c)->ServerStatus("workers");
    if (st.ok() && StatusValue(*st, "workers") == std::to_string(n)) break;
    if (NowSeconds() > limit) {
      std::fprintf(stderr, "htam-bench workers: %d worker(s) did not register\n", n);
      std::exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::map<std::string, uint64_t> session;
  for (const auto& t : tasks) {
    htam::OpenSessionArgs a;
    a.task = t;
    a.backend = backend;
    auto s = (*c)->OpenSession(a);
    if (!s.ok()) {
      std::fprintf(stderr, "htam-bench workers: session for %s: %s\n", t.c_str(),
                   s.status().ToString().c_str());
      std::exit(1);
    }
    session[t] = s->session->id;
  }
  const double t0 = NowSeconds();
  std::vector<uint64_t> ids;
  for (int i = 0; i < jobs; ++i) {
    const std::string& t = tasks[size_t(i) % tasks.size()];
    auto step = (*c)->NextStep(session[t]);
    htam::SubmitArgs s;
    s.session_id = session[t];
    if (step.ok() && step->direction) s.direction_id = step->direction->id;
    s.source = sources.at(t) + "\n// bench job " + std::to_string(i) + " " + dir + "\n";
    s.summary = "bench job " + std::to_string(i);
    auto ack = (*c)->Submit(s);
    if (!ack.ok()) {
      std::fprintf(stderr, "htam-bench workers: submit: %s\n", ack.status().ToString().c_str());
      std::exit(1);
    }
    ids.push_back(ack->job_id);
  }
  for (uint64_t id : ids) {
    auto r = (*c)->Poll(id, std::chrono::milliseconds(int64_t((limit - NowSeconds()) * 1000)));
    if (r.ok() && r->done && r->status == htam::fb::OutcomeStatus::Ok) {
      p.ok++;
      continue;
    }
    // The first failures of a phase, so a broken setup says why (a result, or no result).
    if (p.failed++ < 2) {
      std::string why = !r.ok()     ? r.status().ToString()
                        : !r->done ? std::string("no result before the phase's time limit")
                                   : std::string(htam::fb::EnumNameOutcomeStatus(r->status)) +
                                         ": " + r->diagnostics.substr(0, 600);
      std::fprintf(stderr, "htam-bench workers: job %llu failed: %s\n",
                   static_cast<unsigned long long>(id), why.c_str());
    }
  }
  p.seconds = NowSeconds() - t0;
  p.per_min = 60.0 * jobs / p.seconds;
  c->reset();
  for (pid_t w : ws) Stop(w);
  Stop(d);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return p;
}

}  // namespace

int RunWorkersBench(int argc, char** argv) {
  Args a;
  po::variables_map vm;
  const int exit_now = htam::bench::ParseArgs("htam-bench workers", kUsage,
                                              std::vector<std::string>(argv, argv + argc),
                                              Describe(&a), po::options_description(), &vm);
  if (exit_now >= 0) return exit_now;
  const std::string& backend = a.backend;
  const std::string& tasks_dir = a.tasks_dir;
  std::vector<std::string> tasks = htam::bench::SplitList(a.tasks);
  std::map<std::string, std::string> sources;
  if (tasks.empty())
    for (const auto& e : fs::directory_iterator(tasks_dir))
      if (e.is_directory()) tasks.push_back(e.path().filename().string());
  std::sort(tasks.begin(), tasks.end());
  std::vector<std::string> usable;
  for (const auto& t : tasks) {
    auto j =
        nlohmann::json::parse(ReadFileOrEmpty(tasks_dir + "/" + t + "/task.json"), nullptr, false);
    if (!j.is_object() || !j.contains("references") || !j["references"].contains(backend)) continue;
    sources[t] =
        ReadFileOrEmpty(tasks_dir + "/" + t + "/" + j["references"][backend].get<std::string>());
    if (a.device_ms.n > 0) sources[t] = WithDeviceTime(sources[t], a.device_ms.n);
    usable.push_back(t);
  }
  if (usable.empty()) {
    std::fprintf(stderr, "htam-bench workers: no task in %s has a %s reference\n",
                 tasks_dir.c_str(), backend.c_str());
    return 1;
  }
  const int jobs = int(a.jobs.n), rounds = int(std::max<int64_t>(1, a.rounds.n));
  std::vector<Phase> medians;
  for (int64_t n : a.workers.v) {
    std::vector<Phase> runs;
    for (int r = 0; r < rounds; ++r) {
      runs.push_back(RunPhase(a, int(n), jobs, usable, sources));
      std::fprintf(stderr, "workers=%d round %d: %d ok, %d failed, %.1f s, %.1f jobs/min\n", int(n),
                   r + 1, runs.back().ok, runs.back().failed, runs.back().seconds,
                   runs.back().per_min);
    }
    std::sort(runs.begin(), runs.end(),
              [](const Phase& a, const Phase& b) { return a.per_min < b.per_min; });
    medians.push_back(runs[runs.size() / 2]);
  }
  std::printf("backend %s, %d jobs over %zu task(s) per phase, median of %d round(s)%s\n",
              backend.c_str(), jobs, usable.size(), rounds,
              vm.count("device-ms")
                  ? (", device time " + std::to_string(a.device_ms.n) + " ms per call").c_str()
                  : "");
  std::printf("%-8s %8s %8s %10s %12s %10s\n", "workers", "ok", "failed", "wall_s", "jobs/min",
              "vs_first");
  nlohmann::json out = {{"bench", "workers"}, {"backend", backend},
                        {"jobs", jobs},       {"rounds", rounds},
                        {"tasks", usable},    {"phases", nlohmann::json::array()}};
  for (const auto& p : medians) {
    double ratio = p.per_min / medians.front().per_min;
    std::printf("%-8d %8d %8d %10.1f %12.1f %9.2fx\n", p.workers, p.ok, p.failed, p.seconds,
                p.per_min, ratio);
    out["phases"].push_back({{"workers", p.workers},
                             {"ok", p.ok},
                             {"failed", p.failed},
                             {"seconds", p.seconds},
                             {"jobs_per_min", p.per_min},
                             {"ratio", ratio}});
  }
  std::printf("%s\n", out.dump().c_str());
  for (const auto& p : medians)
    if (p.failed) return 1;
  return 0;
}
