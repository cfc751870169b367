// htam-eval: evaluates candidate files, a task's reference or its lineage through the pipeline
// htamd uses (the Evaluator: sandboxed htam-eval-worker processes, runners, the verification
// gate, compile-ahead, the profiler behind the backend ABI) and prints one JSON line per result.
// docs/cli.md describes it; eval_args.h its command line. The profiled run is the worker's own
// one-call mode (htam-eval-worker --single-call), so this tool runs no candidate in its process.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/file.h"
#include "base/log.h"
#include "base/paths.h"
#include "daemon/config/sections.h"
#include "daemon/eval/evaluator.h"
#include "daemon/eval/gate/task_spec.h"
#include "tools/eval/eval_args.h"
#include "tools/eval/in_process.h"

namespace {

namespace fs = std::filesystem;
using htam::eval::EvalJob;
using htam::eval::EvalResult;
using htam::fb::OutcomeStatus;
using nlohmann::json;

constexpr int kExitUsage = 2, kExitNoBackend = 4;

// One candidate to evaluate, and where it came from.
struct Item {
  std::string source;       // the path printed as "source" ("reference" for the reference)
  std::string file;         // the label printed as "file" (a lineage variant's own "file")
  std::string text;         // the candidate's source text; "" for the reference
  size_t task = 0;          // index into the tasks
  json* variant = nullptr;  // its lineage.json entry (--lineage)
  EvalResult result;
};

json Rounded(const std::vector<htam::fb::StageTimeT>& ms) {
  json o = json::object();
  for (const auto& t : ms) o[t.name] = std::round(t.ms * 10) / 10;
  return o;
}

// The union of what htam-eval-cli and htam-evaluate printed, under their names.
json ToJson(const Item& it, const std::string& task_name, const std::string& task_dir,
            const std::string& backend, bool profiled) {
  const EvalResult& r = it.result;
  const htam::fb::ProfileT& p = htam::fb::ProfileOf(r);
  json roof = nullptr;
  if (r.copy_bytes_per_s > 0 || r.fp32_flops > 0)
    roof = {{"copy_gb_per_s", r.copy_bytes_per_s / 1e9},
            {"fp32_tflops", r.fp32_flops / 1e12},
            {"bf16_mma_tflops", r.tensor16_flops / 1e12}};
  json j = {
      {"source", it.source},
      {"file", it.file},
      {"task", task_name},
      {"task_dir", task_dir},
      {"backend", backend},
      {"device", r.device},
      {"arch", r.arch},
      {"status", htam::fb::EnumNameOutcomeStatus(r.status)},
      {"diagnostics", r.diagnostics},
      {"median_us", r.median_us},
      {"spread_us", r.spread_us},
      {"repetitions", r.repetitions},
      {"baseline_us", r.baseline_us},
      {"speedup", r.speedup},
      {"cases", r.cases},
      {"compile_ms", r.compile_ms},
      {"compile_cached", r.compile_cached},
      {"stage_ms", Rounded(r.stage_ms)},
      {"op_ms", Rounded(r.op_ms)},
      {"flops", r.flops},
      {"bytes", r.bytes},
      {"sol_us", r.sol_us},
      {"sol_fraction", p.sol_fraction},
      {"floor_us", r.floor_us},
      {"faster_than_sol", r.floor_us > 0 && r.median_us > 0 && r.median_us < 0.9 * r.floor_us},
      {"sm_clock_mhz", p.sm_clock_mhz},
      {"mem_clock_mhz", p.mem_clock_mhz},
      {"registers", p.registers},
      {"shared_bytes", p.shared_bytes},
      {"spill_bytes", p.spill_bytes},
      {"candidate_hash", r.candidate_hash},
      {"golden_computed", r.golden_computed},
      {"baseline_compile_us", r.baseline_compile_us},
      {"baseline_note", r.baseline_note},
      {"wall_ms", r.wall_ms},
      {"roofline", roof}};
  if (profiled && r.status == OutcomeStatus::Ok) {
    auto pct = [](float f) { return f < 0 ? -1.0 : double(f) * 100.0; };
    j["profile_note"] = r.profile_note;
    j["bottleneck"] = htam::fb::EnumNameBottleneck(r.bottleneck);
    j["dram_pct"] = pct(p.dram_throughput);
    j["sm_pct"] = pct(p.sm_throughput);
    j["occupancy_pct"] = pct(p.occupancy);
    j["profiled_kernels"] = r.profiled_kernels;
    j["profiled_us"] = r.profiled_us;
  }
  return j;
}

// Does the outcome match the lineage's "expected"?
bool AsExpected(const std::string& expected, const EvalResult& r, double parent_speedup) {
  if (expected == "ok") return r.status == OutcomeStatus::Ok;
  if (expected == "slower") return r.status == OutcomeStatus::Ok && r.speedup < parent_speedup;
  if (expected == "incorrect")
    return r.status == OutcomeStatus::Incorrect || r.status == OutcomeStatus::Nondeterministic;
  if (expected == "compile_error") return r.status == OutcomeStatus::CompileError;
  if (expected == "crash") return r.status == OutcomeStatus::Crash;
  return false;
}

json ReadJsonFile(const std::string& path, std::string* err) {
  std::string text;
  if (!htam::ReadWholeFile(path, &text)) {
    *err = "cannot read " + path;
    return nullptr;
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) *err = path + ": not a JSON object";
  return j;
}

// The backend when none is named: the candidates' extension, else the lineage's "backend"; ""
// when neither says.
std::string GuessBackend(const htam::evaltool::EvalArgs& a, const std::vector<json>& lineages) {
  for (const auto& s : a.sources) {
    const std::string ext = fs::path(s).extension().string();
    if (ext == ".cu") return "cuda";
    if (ext == ".hip") return "hip";
    if (ext == ".cpp" || ext == ".cc" || ext == ".c") return "cpu";
  }
  for (const auto& l : lineages)
    if (l.contains("backend") && l["backend"].is_string()) return l["backend"];
  return "";
}

// Reads every candidate before anything runs: files, then each task's lineage variants.
int CollectItems(const htam::evaltool::EvalArgs& a, std::vector<json>* lineages,
                 std::vector<Item>* items) {
  for (size_t t = 0; a.reference && t < a.tasks.size(); ++t)
    items->push_back({"reference", "reference", "", t, nullptr, {}});
  for (const auto& f : a.sources) {
    Item it{f, f, "", 0, nullptr, {}};
    if (!htam::ReadWholeFile(f, &it.text)) {
      std::cerr << "htam-eval: cannot read " << f << "\n";
      return kExitUsage;
    }
    items->push_back(std::move(it));
  }
  lineages->resize(a.lineage ? a.tasks.size() : 0);
  for (size_t t = 0; t < lineages->size(); ++t) {
    std::string err;
    const std::string path = a.tasks[t] + "/lineage.json";
    (*lineages)[t] = ReadJsonFile(path, &err);
    json& lj = (*lineages)[t];
    if (err.empty() && (!lj.contains("variants") || !lj["variants"].is_array()))
      err = path + ": no variants";
    if (!err.empty()) {
      std::cerr << "htam-eval: " << err << "\n";
      return kExitUsage;
    }
  }
  // Pointers into the lineages are taken once they no longer move.
  for (size_t t = 0; t < lineages->size(); ++t) {
    for (auto& v : (*lineages)[t]["variants"]) {
      const std::string file = v.value("file", "");
      Item it{a.tasks[t] + "/" + file, file, "", t, &v, {}};
      if (!htam::ReadWholeFile(it.source, &it.text)) {
        std::cerr << "htam-eval: cannot read " << it.source << "\n";
        return kExitUsage;
      }
      items->push_back(std::move(it));
    }
  }
  return 0;
}

std::string TaskName(const std::string& dir) {
  std::string err;
  json t = ReadJsonFile(dir + "/task.json", &err);
  if (err.empty() && t.contains("name") && t["name"].is_string()) return t["name"];
  return fs::path(dir).lexically_normal().filename().string();
}

// Prints each result as it is ready, in the order of the items (a lineage variant's parent comes
// before it); failed() when a reference is not Ok or a variant is not as expected.
class Reporter {
 public:
  Reporter(const htam::evaltool::EvalArgs& a, const std::string& backend)
      : a_(a), backend_(backend), speedups_(a.tasks.size(), {{"reference", 1.0}}) {}

  void Emit(Item& it) {
    const EvalResult& r = it.result;
    json out = ToJson(it, TaskName(a_.tasks[it.task]), a_.tasks[it.task], backend_, a_.profile);
    if (it.source == "reference" && r.status != OutcomeStatus::Ok) failed_ = true;
    if (it.variant) {
      json& v = *it.variant;
      std::map<std::string, double>& speedup = speedups_[it.task];
      const std::string parent = v.value("parent", "reference");
      const double ps = speedup.count(parent) ? speedup[parent] : 1.0;
      speedup[v.value("id", "")] = r.status == OutcomeStatus::Ok ? r.speedup : ps;
      const bool as_expected = AsExpected(v.value("expected", "ok"), r, ps);
      out["expected"] = v.value("expected", "ok");
      out["as_expected"] = as_expected;
      failed_ |= !as_expected;
      v["measured"] = {{"device", r.device},
                       {"sm_clock_mhz", htam::fb::ProfileOf(r).sm_clock_mhz},
                       {"mem_clock_mhz", htam::fb::ProfileOf(r).mem_clock_mhz},
                       {"median_us", r.median_us},
                       {"speedup", r.speedup},
                       {"status", htam::fb::EnumNameOutcomeStatus(r.status)}};
    }
    std::cout << out.dump() << std::endl;
  }
  bool failed() const { return failed_; }

 private:
  const htam::evaltool::EvalArgs& a_;
  const std::string backend_;
  std::vector<std::map<std::string, double>> speedups_;
  bool failed_ = false;
};

// Every item through the evaluator: one after another, or all queued at once (--queue), as a
// busy daemon queues them: later candidates wait (and compile ahead) while earlier ones run; a
// full queue waits for the oldest.
htam::Status RunAll(htam::eval::Evaluator& ev, const htam::evaltool::EvalArgs& a,
                    const std::string& backend, std::vector<Item>* items, Reporter* report) {
  uint64_t id = 1;
  auto job_of = [&](const Item& it) {
    EvalJob j;
    j.job_id = id++;
    j.task_dir = a.tasks[it.task];
    j.backend = backend;
    j.language = a.language;
    if (a.language.empty() && fs::path(it.source).extension() == ".py") j.language = "kernelbench";
    j.source = it.text;
    j.profile = a.profile;
    return j;
  };
  if (!a.queue) {
    for (auto& it : *items) {
      auto r = ev.Evaluate(job_of(it));
      if (!r.ok()) return r.status();
      it.result = std::move(*r);
      report->Emit(it);
    }
    return htam::Status::OK();
  }
  std::vector<std::future<EvalResult>> futures;
  size_t waited = 0;
  for (auto& it : *items) {
    for (;;) {
      auto promise = std::make_shared<std::promise<EvalResult>>();
      auto fut = promise->get_future();
      htam::Status st =
          ev.Submit(job_of(it), [promise](EvalResult r) { promise->set_value(std::move(r)); });
      if (st.ok()) {
        futures.push_back(std::move(fut));
        break;
      }
      if (st.code() != htam::Status::Code::kResourceExhausted || waited == futures.size())
        return st;
      futures[waited++].wait();
    }
  }
  for (size_t i = 0; i < items->size(); ++i) {
    (*items)[i].result = futures[i].get();
    report->Emit((*items)[i]);
  }
  return htam::Status::OK();
}

// --in-process (in_process.h): the items' results from the gate in this process; 0 or an exit
// status.
int InProcess(const htam::evaltool::EvalArgs& a, const htam::Config& config,
              const std::string& backend, std::vector<Item>* items, Reporter* report) {
  std::vector<htam::evaltool::InProcessJob> jobs;
  for (const auto& it : *items) {
    htam::evaltool::InProcessJob j{a.tasks[it.task], it.text, it.source == "reference", a.language};
    if (a.language.empty() && fs::path(it.source).extension() == ".py") j.language = "kernelbench";
    jobs.push_back(std::move(j));
  }
  htam::Status st = htam::evaltool::RunInProcess(config, backend, jobs, a.profile, a.single_call,
                                                 [&](size_t i, EvalResult r) {
                                                   (*items)[i].result = std::move(r);
                                                   report->Emit((*items)[i]);
                                                 });
  if (!st.ok()) {
    std::cerr << "htam-eval: " << st.message() << "\n";
    return st.code() == htam::Status::Code::kUnavailable ? kExitNoBackend : kExitUsage;
  }
  return 0;
}

// The items' results through the Evaluator htamd uses; 0 or an exit status.
int ThroughEvaluator(const htam::evaltool::EvalArgs& a, const htam::Config& config,
                     const std::string& backend, std::vector<Item>* items, Reporter* report) {
  auto ev = htam::eval::Evaluator::Start(htam::eval::EvalOptions::FromConfig(config));
  if (!ev.ok()) {
    std::cerr << "htam-eval: " << ev.status().ToString() << "\n";
    return kExitUsage;
  }
  const std::vector<std::string> served = (*ev)->Backends();
  auto serves = [&](const std::string& b) {
    return std::find(served.begin(), served.end(), b) != served.end();
  };
  int rc = 0;
  if (!serves(backend)) {
    std::cerr << "htam-eval: backend '" << backend << "' cannot run here (no plugin or no "
              << "device)\n"
              << (*ev)->StatusText();
    rc = kExitNoBackend;
  } else if (htam::Status st = RunAll(**ev, a, backend, items, report); !st.ok()) {
    std::cerr << "htam-eval: " << st.ToString() << "\n";
    rc = kExitUsage;
  }
  (*ev)->Shutdown();
  return rc;
}

// Without a compile cache named (--cache, eval.cache_dir, or a data directory whose eval-cache
// the evaluator would use), a fresh one that goes at exit: every compile is real, and nothing is
// left in the working directory.
class TempCache {
 public:
  explicit TempCache(htam::Config* c) {
    const htam::config::Eval e = htam::config::Eval::From(*c);
    if (!e.cache_dir.empty() || htam::config::General::From(*c).data_dir !=
                                    htam::config::General::From(htam::Config::Defaults()).data_dir)
      return;
    std::string scratch = e.scratch_dir;
    std::string tmpl = (scratch.empty() ? std::string("/tmp") : scratch) + "/htam-eval-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) return;
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);  // the workers' sandbox user reaches the cache through it
    (void)c->Set("eval.cache_dir", dir_ + "/cache");
  }
  ~TempCache() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

 private:
  std::string dir_;
};

}  // namespace

int main(int argc, char** argv) {
  htam::evaltool::EvalArgs args;
  htam::Config config = htam::Config::Defaults();
  bool exit_now = false;
  htam::Status st = htam::evaltool::ParseEvalArgs(argc, argv, &args, &config, std::cout, &exit_now);
  if (!st.ok()) {
    std::cerr << "htam-eval: " << st.message() << "\n(htam-eval --help for usage)\n";
    return kExitUsage;
  }
  if (exit_now) return 0;
  // The eval section as parsed: read below before eval.backends and eval.sdk_include_dir are
  // filled in.
  const htam::config::Eval parsed = htam::config::Eval::From(config);
  // The host bound on a case's size: here only for a language that has it (a .py candidate
  // without --language is a ModelNew file; each job checks its own).
  for (const auto& t : args.tasks) {  // a task that does not parse is a usage error, GPU or not
    auto task = htam::ParseTaskFile(
        t, htam::HostCaseLimit(args.language.empty() ? "kernelbench" : args.language,
                               uint64_t(parsed.max_case_mb) << 20));
    if (!task.ok()) {
      std::cerr << "htam-eval: --task " << t << ": " << task.status().message() << "\n";
      return kExitUsage;
    }
  }
  std::vector<json> lineages;
  std::vector<Item> items;
  if (int rc = CollectItems(args, &lineages, &items)) return rc;
  std::string backend = args.backend.empty() ? GuessBackend(args, lineages) : args.backend;
  // No backend named or implied: cuda where its plugin is installed, else cpu.
  if (backend.empty()) backend = htam::evaltool::PluginFound(config, "cuda") ? "cuda" : "cpu";
  if (parsed.backends.empty())
    (void)config.Set("eval.backends", backend);  // start that plugin's workers only
  // Warnings only, unless a level was asked for (--general.log_level info shows the plugin's
  // device line, e.g. the timing mode in effect).
  htam::LogLevel level = htam::LogLevel::kWarn;
  if (args.log_level_given || config.sources().count("general.log_level"))
    (void)htam::ParseLogLevel(htam::config::General::From(config).log_level, &level);
  htam::SetLogLevel(level);
  TempCache cache(&config);
  Reporter report(args, backend);
  if (int e = args.in_process ? InProcess(args, config, backend, &items, &report)
                              : ThroughEvaluator(args, config, backend, &items, &report))
    return e;
  // The profiled run (--single-call): whether the call ran.
  if (args.single_call) return items[0].result.status == OutcomeStatus::Ok ? 0 : 1;
  int rc = report.failed() ? 1 : 0;
  for (size_t t = 0; args.write && t < lineages.size(); ++t) {
    std::ofstream out(args.tasks[t] + "/lineage.json", std::ios::binary | std::ios::trunc);
    out << lineages[t].dump(2) << "\n";
    if (!out) {
      std::cerr << "htam-eval: cannot write " << args.tasks[t] << "/lineage.json\n";
      rc = kExitUsage;
    }
  }
  return rc;
}
