// htam-evaluate: evaluates candidate files (or a task's lineage) through the same Evaluator,
// sandboxed workers and verification gate that htamd uses, and prints one JSON line per result.
//
//   htam-evaluate --task DIR [--backend cpu] FILE...        evaluate candidate sources
//                 [--language L]                          their language: default the
//                                                         backend's; *.py files on a KernelBench
//                                                         task are "kernelbench" (ModelNew)
//   htam-evaluate --task DIR --reference                    the reference against itself
//   htam-evaluate --task DIR --lineage [--write]            every variant of lineage.json; checks
//                                                           "expected"; --write fills "measured"
// Any option of the configuration table may follow (--eval.repetitions 20, --config FILE).
// Exit status: 0 all as expected, 1 an expectation failed, 2 usage or infrastructure error.
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/log.h"
#include "daemon/config/config.h"
#include "daemon/eval/evaluator.h"

namespace {

using htam::eval::EvalJob;
using htam::eval::EvalResult;
using nlohmann::json;

std::string Read(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = bool(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json ToJson(const std::string& label, const EvalResult& r) {
  return {{"file", label},
          {"status", htam::fb::EnumNameOutcomeStatus(r.status)},
          {"median_us", r.median_us},
          {"spread_us", r.spread_us},
          {"repetitions", r.repetitions},
          {"baseline_us", r.baseline_us},
          {"speedup", r.speedup},
          {"device", r.device},
          {"wall_ms", r.wall_ms},
          {"stage_ms", [&] {
             json st = json::object();
             for (const auto& [k, v] : r.stage_ms) st[k] = std::round(v * 10) / 10;
             return st;
           }()},
          {"candidate_hash", r.candidate_hash},
          {"diagnostics", r.diagnostics.substr(0, 600)}};
}

// Does the outcome match the lineage's "expected"?
bool AsExpected(const std::string& expected, const EvalResult& r, double parent_speedup) {
  using htam::fb::OutcomeStatus;
  if (expected == "ok") return r.status == OutcomeStatus::Ok;
  if (expected == "slower") return r.status == OutcomeStatus::Ok && r.speedup < parent_speedup;
  if (expected == "incorrect")
    return r.status == OutcomeStatus::Incorrect || r.status == OutcomeStatus::Nondeterministic;
  if (expected == "compile_error") return r.status == OutcomeStatus::CompileError;
  if (expected == "crash") return r.status == OutcomeStatus::Crash;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string task, backend = "cpu", language;
  bool reference = false, lineage = false, write = false;
  std::vector<std::string> files;
  std::vector<const char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--task" && i + 1 < argc)
      task = argv[++i];
    else if (a == "--backend" && i + 1 < argc)
      backend = argv[++i];
    else if (a == "--language" && i + 1 < argc)
      language = argv[++i];
    else if (a == "--reference")
      reference = true;
    else if (a == "--lineage")
      lineage = true;
    else if (a == "--write")
      write = true;
    else if (a.rfind("--", 0) == 0) {
      rest.push_back(argv[i]);
      if (a.find('=') == std::string::npos && i + 1 < argc && a != "--help" && a != "--version")
        rest.push_back(argv[++i]);
    } else {
      files.push_back(a);
    }
  }
  bool exit_now = false;
  auto cfg = htam::Config::Parse(int(rest.size()), rest.data(),
                                 {"htam-evaluate", "evaluate candidate kernels", HTAM_VERSION},
                                 std::cout, &exit_now);
  if (!cfg.ok()) {
    std::cerr << cfg.status().ToString() << "\n";
    return 2;
  }
  if (exit_now) return 0;
  if (task.empty() || (!reference && !lineage && files.empty())) {
    std::cerr << "usage: htam-evaluate --task DIR [--backend B] (FILE... | --reference | "
                 "--lineage [--write]) [config options]\n";
    return 2;
  }
  htam::SetLogLevel(htam::LogLevel::kWarn);
  auto ev = htam::eval::Evaluator::Start(htam::eval::EvalOptions::FromConfig(*cfg));
  if (!ev.ok()) {
    std::cerr << ev.status().ToString() << "\n";
    return 2;
  }
  uint64_t id = 1;
  auto run = [&](const std::string& source,
                 const std::string& file = "") -> htam::Result<EvalResult> {
    EvalJob j;
    j.language = language;
    if (language.empty() && file.size() > 3 && file.compare(file.size() - 3, 3, ".py") == 0)
      j.language = "kernelbench";
    j.job_id = id++;
    j.task_dir = task;
    j.backend = backend;
    j.source = source;
    return (*ev)->Evaluate(j);
  };
  int rc = 0;
  if (reference) files.clear();
  if (reference) {
    auto r = run("");
    if (!r.ok()) {
      std::cerr << r.status().ToString() << "\n";
      return 2;
    }
    std::cout << ToJson("reference", *r).dump() << "\n";
    rc = r->status == htam::fb::OutcomeStatus::Ok ? 0 : 1;
  }
  for (const auto& f : files) {
    bool ok = false;
    std::string src = Read(f, &ok);
    if (!ok) {
      std::cerr << "cannot read " << f << "\n";
      return 2;
    }
    auto r = run(src, f);
    if (!r.ok()) {
      std::cerr << r.status().ToString() << "\n";
      return 2;
    }
    std::cout << ToJson(f, *r).dump() << "\n";
  }
  if (lineage) {
    bool ok = false;
    std::string path = task + "/lineage.json";
    std::string text = Read(path, &ok);
    json lj;
    try {
      lj = json::parse(text);
    } catch (const std::exception& e) {
      std::cerr << path << ": " << e.what() << "\n";
      return 2;
    }
    if (!ok || !lj.contains("variants")) {
      std::cerr << path << ": no variants\n";
      return 2;
    }
    std::map<std::string, double> speedup{{"reference", 1.0}};
    for (auto& v : lj["variants"]) {
      std::string file = task + "/" + v.value("file", "");
      std::string src = Read(file, &ok);
      if (!ok) {
        std::cerr << "cannot read " << file << "\n";
        rc = 1;
        continue;
      }
      auto r = run(src);
      if (!r.ok()) {
        std::cerr << r.status().ToString() << "\n";
        return 2;
      }
      std::string parent = v.value("parent", "reference");
      double ps = speedup.count(parent) ? speedup[parent] : 1.0;
      speedup[v.value("id", "")] = r->status == htam::fb::OutcomeStatus::Ok ? r->speedup : ps;
      bool as_expected = AsExpected(v.value("expected", "ok"), *r, ps);
      json out = ToJson(v.value("file", ""), *r);
      out["expected"] = v.value("expected", "ok");
      out["as_expected"] = as_expected;
      std::cout << out.dump() << "\n";
      if (!as_expected) rc = 1;
      v["measured"] = {{"device", r->device},
                       {"sm_clock_mhz", r->profile.sm_clock_mhz},
                       {"mem_clock_mhz", r->profile.mem_clock_mhz},
                       {"median_us", r->median_us},
                       {"speedup", r->speedup},
                       {"status", htam::fb::EnumNameOutcomeStatus(r->status)}};
    }
    if (write) {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << lj.dump(2) << "\n";
    }
  }
  (*ev)->Shutdown();
  return rc;
}
