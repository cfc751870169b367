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
//                 (--task repeated with --lineage or --reference: every task's, in one queue)
//   --queue                                                 submit every candidate at once (as a
//                                                           busy daemon queues them; compiles
//                                                           ahead) instead of one after another
// Any option of the configuration table may follow (--eval.repetitions 20, --config FILE).
// Exit status: 0 all as expected, 1 an expectation failed, 2 usage or infrastructure error.
#include <cmath>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <memory>
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
          {"compile_cached", r.compile_cached},
          {"stage_ms",
           [&] {
             json st = json::object();
             for (const auto& [k, v] : r.stage_ms) st[k] = std::round(v * 10) / 10;
             return st;
           }()},
          {"op_ms",
           [&] {
             json st = json::object();
             for (const auto& [k, v] : r.op_ms) st[k] = std::round(v * 10) / 10;
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
  std::vector<std::string> tasks;
  std::string backend = "cpu", language;
  bool reference = false, lineage = false, write = false, queue = false;
  std::vector<std::string> files;
  std::vector<const char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--task" && i + 1 < argc)
      tasks.push_back(argv[++i]);
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
    else if (a == "--queue")
      queue = true;
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
  if (tasks.empty() || (!reference && !lineage && files.empty()) ||
      (tasks.size() > 1 && !files.empty())) {
    std::cerr << "usage: htam-evaluate --task DIR [--backend B] (FILE... | --reference | "
                 "--lineage [--write]) [--queue] [config options]\n"
                 "       (--task DIR repeated: --reference or --lineage of every task)\n";
    return 2;
  }
  htam::SetLogLevel(htam::LogLevel::kWarn);
  auto ev = htam::eval::Evaluator::Start(htam::eval::EvalOptions::FromConfig(*cfg));
  if (!ev.ok()) {
    std::cerr << ev.status().ToString() << "\n";
    return 2;
  }
  // Every candidate first (reading all files before anything runs), then one evaluation each.
  struct Item {
    std::string label, source, file;
    size_t task = 0;          // index into tasks
    json* variant = nullptr;  // its lineage.json entry (--lineage)
    EvalResult result;
  };
  std::vector<Item> items;
  if (reference) files.clear();
  for (size_t t = 0; reference && t < tasks.size(); ++t)
    items.push_back({"reference", "", "", t, nullptr, {}});
  for (const auto& f : files) {
    bool ok = false;
    std::string src = Read(f, &ok);
    if (!ok) {
      std::cerr << "cannot read " << f << "\n";
      return 2;
    }
    items.push_back({f, src, f, 0, nullptr, {}});
  }
  int rc = 0;
  // One lineage.json per task, kept (the items point into them) until --write.
  std::vector<json> ljs(lineage ? tasks.size() : 0);
  for (size_t t = 0; t < ljs.size(); ++t) {
    const std::string& task = tasks[t];
    const std::string lineage_path = task + "/lineage.json";
    json& lj = ljs[t];
    bool ok = false;
    std::string text = Read(lineage_path, &ok);
    try {
      lj = json::parse(text);
    } catch (const std::exception& e) {
      std::cerr << lineage_path << ": " << e.what() << "\n";
      return 2;
    }
    if (!ok || !lj.contains("variants")) {
      std::cerr << lineage_path << ": no variants\n";
      return 2;
    }
    for (auto& v : lj["variants"]) {
      std::string file = task + "/" + v.value("file", "");
      std::string src = Read(file, &ok);
      if (!ok) {
        std::cerr << "cannot read " << file << "\n";
        rc = 1;
        continue;
      }
      items.push_back({v.value("file", ""), src, "", t, &v, {}});
    }
  }
  uint64_t id = 1;
  auto job_of = [&](const Item& it) {
    EvalJob j;
    j.language = language;
    if (language.empty() && it.file.size() > 3 &&
        it.file.compare(it.file.size() - 3, 3, ".py") == 0)
      j.language = "kernelbench";
    j.job_id = id++;
    j.task_dir = tasks[it.task];
    j.backend = backend;
    j.source = it.source;
    return j;
  };
  if (queue) {
    // All at once, as a busy daemon queues them: later candidates wait (and compile ahead,
    // eval.compile_ahead_backends) while earlier ones run. A full queue waits for the oldest.
    std::vector<std::future<EvalResult>> futures;
    size_t waited = 0;
    for (auto& it : items) {
      for (;;) {
        auto promise = std::make_shared<std::promise<EvalResult>>();
        auto fut = promise->get_future();
        htam::Status st = (*ev)->Submit(
            job_of(it), [promise](EvalResult r) { promise->set_value(std::move(r)); });
        if (st.ok()) {
          futures.push_back(std::move(fut));
          break;
        }
        if (st.code() != htam::Status::Code::kResourceExhausted || waited == futures.size()) {
          std::cerr << st.ToString() << "\n";
          return 2;
        }
        futures[waited++].wait();
      }
    }
    for (size_t i = 0; i < items.size(); ++i) items[i].result = futures[i].get();
  } else {
    for (auto& it : items) {
      auto r = (*ev)->Evaluate(job_of(it));
      if (!r.ok()) {
        std::cerr << r.status().ToString() << "\n";
        return 2;
      }
      it.result = *r;
    }
  }
  std::vector<std::map<std::string, double>> speedups(tasks.size(), {{"reference", 1.0}});
  for (auto& it : items) {
    const EvalResult& r = it.result;
    std::map<std::string, double>& speedup = speedups[it.task];
    if (!it.variant) {
      json out = ToJson(it.label, r);
      if (tasks.size() > 1) out["task"] = tasks[it.task];
      std::cout << out.dump() << "\n";
      if (reference) rc = r.status == htam::fb::OutcomeStatus::Ok ? 0 : 1;
      continue;
    }
    json& v = *it.variant;
    std::string parent = v.value("parent", "reference");
    double ps = speedup.count(parent) ? speedup[parent] : 1.0;
    speedup[v.value("id", "")] = r.status == htam::fb::OutcomeStatus::Ok ? r.speedup : ps;
    bool as_expected = AsExpected(v.value("expected", "ok"), r, ps);
    json out = ToJson(it.label, r);
    if (tasks.size() > 1) out["task"] = tasks[it.task];
    out["expected"] = v.value("expected", "ok");
    out["as_expected"] = as_expected;
    std::cout << out.dump() << "\n";
    if (!as_expected) rc = 1;
    v["measured"] = {{"device", r.device},
                     {"sm_clock_mhz", r.profile.sm_clock_mhz},
                     {"mem_clock_mhz", r.profile.mem_clock_mhz},
                     {"median_us", r.median_us},
                     {"speedup", r.speedup},
                     {"status", htam::fb::EnumNameOutcomeStatus(r.status)}};
  }
  for (size_t t = 0; write && t < ljs.size(); ++t) {
    std::ofstream out(tasks[t] + "/lineage.json", std::ios::binary | std::ios::trunc);
    out << ljs[t].dump(2) << "\n";
  }
  (*ev)->Shutdown();
  return rc;
}
