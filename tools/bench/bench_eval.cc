// htam-bench eval: evaluation throughput and timing fidelity of a backend, through htam-eval-cli
// (the plugin + verification gate the daemon's workers use). Needs a device of that backend.
//   htam-bench eval [--cli PATH] [--backend cuda] [--tasks a,b,...] [--repeat 10]
// Prints per task: candidates, wall seconds, candidates/min, median compile ms, statuses; then the
// reference of the first task measured --repeat times (median of medians and CV).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

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

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace
}  // namespace htam::bench

int RunEvalBench(int argc, char** argv) {
  using namespace htam::bench;  // NOLINT(google-build-using-namespace)
  Flags f(argc, argv);
  std::string unknown = f.Unknown({"cli", "backend", "tasks", "repeat", "tasks-dir"});
  if (!unknown.empty()) {
    fprintf(stderr, "htam-bench eval: unknown flag %s\n", unknown.c_str());
    return 2;
  }
  namespace fs = std::filesystem;
  std::string self_dir = fs::path(SelfExe()).parent_path().string();
  std::string cli = f.Get("cli", self_dir + "/../../backends/cuda/htam-eval-cli");
  std::string backend = f.Get("backend", "cuda");
  std::string tasks_dir = f.Get("tasks-dir", "configs/tasks");
  int repeat = static_cast<int>(f.GetInt("repeat", 10));
  std::vector<std::string> tasks = Split(f.Get("tasks", ""));
  if (tasks.empty()) {
    for (const auto& e : fs::directory_iterator(tasks_dir)) {
      if (fs::exists(e.path() / "task.json")) tasks.push_back(e.path().filename().string());
    }
    std::sort(tasks.begin(), tasks.end());
  }
  std::string suffix = backend == "cuda" ? ".cu" : backend == "hip" ? ".hip" : ".cpp";
  printf("%-16s %6s %8s %10s %12s  %s\n", "task", "cands", "wall_s", "cands/min", "compile_ms",
         "statuses");
  int total = 0;
  double total_wall = 0;
  for (const auto& t : tasks) {
    std::string dir = tasks_dir + "/" + t;
    std::vector<std::string> args = {
        cli, "--task", dir,  "--backend",         backend, "--reference", "--seeds",
        "1", "--reps", "20", "--compile-threads", "8"};
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
    int status = 0;
    double t0 = NowSeconds();
    std::vector<nlohmann::json> rows = JsonLines(RunCapture(args, &status));
    double wall = NowSeconds() - t0;
    if (rows.empty()) {
      printf("%-16s no results (exit %d)\n", t.c_str(), status);
      continue;
    }
    std::map<std::string, int> statuses;
    std::vector<double> compile;
    for (const auto& r : rows) {
      statuses[r.value("status", "?")]++;
      if (!r.value("compile_cached", false)) compile.push_back(r.value("compile_ms", 0.0));
    }
    std::string st;
    for (const auto& [k, v] : statuses) st += k + ":" + std::to_string(v) + " ";
    printf("%-16s %6zu %8.1f %10.1f %12.0f  %s\n", t.c_str(), rows.size(), wall,
           60.0 * rows.size() / wall, Percentile(compile, 50), st.c_str());
    total += static_cast<int>(rows.size());
    total_wall += wall;
  }
  if (total_wall > 0)
    printf("all: %d candidates in %.1f s = %.1f candidates/min\n", total, total_wall,
           60.0 * total / total_wall);
  if (!tasks.empty() && repeat > 1) {
    std::vector<double> med;
    for (int i = 0; i < repeat; ++i) {
      int status = 0;
      auto rows = JsonLines(RunCapture({cli, "--task", tasks_dir + "/" + tasks[0], "--backend",
                                        backend, "--reference", "--seeds", "1", "--reps", "100"},
                                       &status));
      if (!rows.empty() && rows[0].value("status", "") == "Ok")
        med.push_back(rows[0].value("median_us", 0.0));
    }
    if (med.size() > 1) {
      double mean = 0, var = 0;
      for (double m : med) mean += m;
      mean /= med.size();
      for (double m : med) var += (m - mean) * (m - mean);
      printf("fidelity: %s reference, %zu measurements: median %.2f us, CV %.2f%%\n",
             tasks[0].c_str(), med.size(), Percentile(med, 50),
             100 * std::sqrt(var / (med.size() - 1)) / mean);
    }
  }
  return 0;
}
