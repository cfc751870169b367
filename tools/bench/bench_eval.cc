// htam-bench eval: evaluation throughput and timing fidelity of a backend, through htam-eval (the
// evaluator, sandboxed workers and verification gate htamd uses). Needs a device of that backend.
//   htam-bench eval [--cli PATH] [--backend cuda] [--tasks a,b,...] [--repeat 10]
//                   [--seeds 1] [--reps 20] [--compile-threads 8] [--cache DIR]
//                   [--deadline-s S] [--json PATH] [--option k=v ...]
// Every task's reference and lineage variants (configs/tasks/<t>/variants/<backend>/) go through
// one htam-eval process per task, queued at once (--queue: later candidates compile ahead): compile
// (into a compile cache that starts EMPTY unless --cache names one, so every compile is real),
// verify, time candidate and baseline. Prints per
// task: candidates, wall seconds, candidates/min, median compile ms, statuses; the total
// candidates/min; then the reference of the first task measured --repeat times (median of medians
// and CV). Tasks that would start after --deadline-s are skipped (and listed). --json writes the
// same numbers as one JSON object.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/paths.h"
#include "tools/bench/args.h"
#include "tools/bench/bench.h"

namespace htam::bench {
namespace {

std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(j);
  }
  return out;
}

const char kUsage[] =
    "usage: htam-bench eval [options]\n"
    "Every task's reference and lineage variants through one htam-eval process per task (compile\n"
    "into an empty compile cache unless --cache names one, verify, time); then the first task's\n"
    "reference --repeat times. Needs a device of the backend.";


// The tasks of a backend under `tasks_dir`: those with a reference in its language (`suffix`),
// by name.
std::vector<std::string> TasksOf(const std::string& tasks_dir, const std::string& suffix) {
  namespace fs = std::filesystem;
  std::vector<std::string> tasks;
  for (const auto& e : fs::directory_iterator(tasks_dir)) {
    if (fs::exists(e.path() / "task.json") && fs::exists(e.path() / ("reference" + suffix)))
      tasks.push_back(e.path().filename().string());
  }
  std::sort(tasks.begin(), tasks.end());
  return tasks;
}

// The htam-eval command line for task directory `dir`: its reference and its lineage variants
// (variants/<backend>/*<suffix>) through the shared compile cache, `options` as --option.
std::vector<std::string> TaskCommand(const std::string& cli, const std::string& dir,
                                     const std::string& backend, const std::string& suffix,
                                     const std::string& seeds, const std::string& reps,
                                     const std::string& threads, const std::string& cache,
                                     const std::vector<std::string>& options) {
  namespace fs = std::filesystem;
  std::vector<std::string> args = {
      cli,   "--task", dir,  "--backend",         backend, "--reference", "--seeds",
      seeds, "--reps", reps, "--compile-threads", threads, "--cache",     cache, "--queue"};
  for (const auto& option : options) {
    args.push_back("--option");
    args.push_back(option);
  }
  fs::path vdir = fs::path(dir) / "variants" / backend;
  if (fs::exists(vdir)) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(vdir))
      if (e.path().extension() == suffix) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      args.push_back("--source");
      args.push_back(file);
    }
  }
  return args;
}

// The reference of `task` measured `repeat` times: prints the median and the coefficient of
// variation of the medians, and puts them in report["repeat"].
void MeasureFidelity(const std::string& cli, const std::string& tasks_dir, const std::string& task,
                     const std::string& backend, const std::string& cache, int repeat,
                     nlohmann::json* report) {
  std::vector<double> med;
  for (int i = 0; i < repeat; ++i) {
    int status = 0;
    auto rows = JsonLines(RunCapture({cli, "--task", tasks_dir + "/" + task, "--backend", backend,
                                      "--reference", "--seeds", "1", "--reps", "100", "--cache",
                                      cache},
                                     &status));
    if (!rows.empty() && rows[0].value("status", "") == "Ok")
      med.push_back(rows[0].value("median_us", 0.0));
  }
  if (med.size() > 1) {
    double mean = 0, var = 0;
    for (double m : med) mean += m;
    mean /= med.size();
    for (double m : med) var += (m - mean) * (m - mean);
    double cv = std::sqrt(var / (med.size() - 1)) / mean;
    printf("fidelity: %s reference, %zu measurements: median %.2f us, CV %.2f%%\n", task.c_str(),
           med.size(), Percentile(med, 50), 100 * cv);
    (*report)["repeat"] = {{"task", task},
                           {"measurements", med.size()},
                           {"median_us", Percentile(med, 50)},
                           {"cv", cv}};
  }
}

}  // namespace
}  // namespace htam::bench

int RunEvalBench(int argc, char** argv) {
  using namespace htam::bench;  // NOLINT(google-build-using-namespace)
  namespace fs = std::filesystem;
  std::string cli = htam::FindExecutable("htam-eval");  // beside this binary, or bin/
  if (cli.empty()) cli = "htam-eval";
  std::string backend = "cuda", tasks_dir = htam::ShippedPath("", "tasks"), tasks_list, cache,
              json_path;
  Count repeat_n{10}, seeds_n{1}, reps_n{20}, threads_n{8}, deadline_n{0};
  std::vector<std::string> options;
  po::options_description d;
  auto add = d.add_options();
  add("cli",
      po::value(&cli)
          ->default_value(cli, "htam-eval beside this binary, or ../eval/")
          ->value_name("PATH"),
      "the htam-eval binary");
  add("backend", po::value(&backend)->default_value(backend)->value_name("B"), "cuda, hip or cpu");
  add("tasks", po::value(&tasks_list)->value_name("LIST"),
      "comma-separated task names (default: every task with a reference for the backend)");
  add("tasks-dir",
      po::value(&tasks_dir)->default_value(tasks_dir, "the shipped one")->value_name("DIR"),
      "the task suite (share/htam/tasks)");
  add("repeat", po::value(&repeat_n)->default_value(repeat_n, "10")->value_name("N"),
      "measurements of the first task's reference (0 or 1: none)");
  add("seeds", po::value(&seeds_n)->default_value(seeds_n, "1")->value_name("N"),
      "seeds per shape in the gate (htam-eval --seeds)");
  add("reps", po::value(&reps_n)->default_value(reps_n, "20")->value_name("N"),
      "timed repetitions (htam-eval --reps)");
  add("compile-threads", po::value(&threads_n)->default_value(threads_n, "8")->value_name("N"),
      "compiles ahead (htam-eval --compile-threads)");
  add("cache", po::value(&cache)->value_name("DIR"),
      "compile cache to use (default: a new, empty one, removed at the end)");
  add("deadline-s", po::value(&deadline_n)->default_value(deadline_n, "0")->value_name("S"),
      "tasks that would start after S seconds are skipped and listed (0: no deadline)");
  add("json", po::value(&json_path)->value_name("PATH"),
      "also write the numbers as one JSON object (after every task)");
  add("option", po::value(&options)->composing()->value_name("K=V"),
      "passed to htam-eval as --option K=V; repeatable");
  po::variables_map vm;
  const int exit_now =
      ParseArgs("htam-bench eval", kUsage, std::vector<std::string>(argv, argv + argc), d,
                po::options_description(), &vm);
  if (exit_now >= 0) return exit_now;
  int repeat = static_cast<int>(repeat_n.n);
  std::string seeds = std::to_string(seeds_n.n);
  std::string reps = std::to_string(reps_n.n);
  std::string threads = std::to_string(threads_n.n);
  double deadline = static_cast<double>(deadline_n.n);
  bool own_cache = cache.empty();
  if (own_cache) {
    char tmpl[] = "/tmp/htam-bench-eval-XXXXXX";
    if (!mkdtemp(tmpl)) {
      fprintf(stderr, "htam-bench eval: cannot create a temp directory\n");
      return 1;
    }
    cache = tmpl;
  }
  std::string suffix = backend == "cuda" ? ".cu" : backend == "hip" ? ".hip" : ".cpp";
  std::vector<std::string> tasks = SplitList(tasks_list);
  if (tasks.empty()) tasks = TasksOf(tasks_dir, suffix);
  printf("%-16s %6s %8s %10s %12s  %s\n", "task", "cands", "wall_s", "cands/min", "compile_ms",
         "statuses");
  nlohmann::json report = {{"backend", backend},
                           {"seeds", std::stoi(seeds)},
                           {"reps", std::stoi(reps)},
                           {"compile_threads", std::stoi(threads)},
                           {"fresh_compile_cache", own_cache},
                           {"tasks", nlohmann::json::array()},
                           {"skipped", nlohmann::json::array()}};
  // Written after every task too, so that a run cut short by its caller still leaves its numbers.
  auto write_json = [&]() {
    if (json_path.empty()) return true;
    std::ofstream out(json_path);
    out << report.dump(2) << "\n";
    return bool(out);
  };
  int total = 0, total_ok = 0;
  double total_wall = 0;
  std::vector<double> all_compile;
  const double start = NowSeconds();
  for (const auto& t : tasks) {
    if (deadline > 0 && NowSeconds() - start > deadline) {
      report["skipped"].push_back(t);
      printf("%-16s skipped (deadline)\n", t.c_str());
      continue;
    }
    std::string dir = tasks_dir + "/" + t;
    std::vector<std::string> args =
        TaskCommand(cli, dir, backend, suffix, seeds, reps, threads, cache, options);
    int status = 0;
    double t0 = NowSeconds();
    std::vector<nlohmann::json> rows = JsonLines(RunCapture(args, &status));
    double wall = NowSeconds() - t0;
    if (rows.empty()) {
      printf("%-16s no results (exit %d)\n", t.c_str(), status);
      report["tasks"].push_back({{"task", t}, {"candidates", 0}, {"exit", status}});
      continue;
    }
    std::map<std::string, int> statuses;
    std::vector<double> compile;
    for (const auto& r : rows) {
      statuses[r.value("status", "?")]++;
      if (!r.value("compile_cached", false)) compile.push_back(r.value("compile_ms", 0.0));
    }
    all_compile.insert(all_compile.end(), compile.begin(), compile.end());
    std::string st;
    for (const auto& [k, v] : statuses) st += k + ":" + std::to_string(v) + " ";
    printf("%-16s %6zu %8.1f %10.1f %12.0f  %s\n", t.c_str(), rows.size(), wall,
           60.0 * rows.size() / wall, Percentile(compile, 50), st.c_str());
    fflush(stdout);
    report["tasks"].push_back({{"task", t},
                               {"candidates", rows.size()},
                               {"wall_s", wall},
                               {"candidates_per_min", 60.0 * rows.size() / wall},
                               {"compile_ms_median", Percentile(compile, 50)},
                               {"statuses", statuses},
                               {"exit", status}});
    total += static_cast<int>(rows.size());
    total_ok += statuses["Ok"];
    total_wall += wall;
    report["candidates"] = total;
    report["ok"] = total_ok;
    report["wall_s"] = total_wall;
    report["candidates_per_min"] = 60.0 * total / total_wall;
    write_json();
  }
  if (total_wall > 0) {
    printf("all: %d candidates (%d Ok) in %.1f s = %.1f candidates/min (compile + verify + time)\n",
           total, total_ok, total_wall, 60.0 * total / total_wall);
    report["candidates"] = total;
    report["ok"] = total_ok;
    report["wall_s"] = total_wall;
    report["candidates_per_min"] = 60.0 * total / total_wall;
    report["compile_ms_median"] = Percentile(all_compile, 50);
  }
  if (!tasks.empty() && repeat > 1 && !(deadline > 0 && NowSeconds() - start > deadline))
    MeasureFidelity(cli, tasks_dir, tasks[0], backend, cache, repeat, &report);
  if (own_cache) {
    std::error_code ec;
    fs::remove_all(cache, ec);
  }
  if (!write_json()) {
    fprintf(stderr, "htam-bench eval: cannot write %s\n", json_path.c_str());
    return 1;
  }
  return 0;
}
