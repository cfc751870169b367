// KernelBench candidates: the verifier's judgement and the runner's Python harness; see
// kb_candidate.h.
#include "daemon/eval/kernelbench/kb_candidate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/hash.h"
#include "base/process.h"
#include "base/wait_report.h"
#include "daemon/eval/gate/stats.h"
#include "daemon/eval/gate/tensor_data.h"
#include "daemon/eval/gate/timing_lock.h"
#include "daemon/eval/kernelbench/kernelbench.h"
#include "daemon/eval/runner/exec.h"

namespace htam {
namespace {

// How many times the reference's call a candidate's call may take before its stage's limit,
// beyond eval.case_timeout_s (a problem sized to run for seconds is not a Timeout by
// construction; a candidate that slow is no use, but it is judged, not cut off).
constexpr double kSlowerThanReference = 4.0;
// The runner's own wall-clock bound on a call, as a multiple of the stage's limit: the
// evaluator's limits, which count only the job's own work (daemon/eval/work_clock.h), decide a
// Timeout; this bound only ends a call nobody else watches (htam-eval --in-process) and must not
// fire first on a busy host.
constexpr double kRunnerWallBackstop = 10.0;
// What kb_golden.py says when the golden data's computation ran out of memory.
constexpr const char* kGoldenOutOfMemory = "out of memory while computing the golden data";

using fb::OutcomeStatus;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Whether an evaluation ended for want of device memory, which jobs sharing the device may have
// caused together: the golden data's process said so (InfraError), or the candidate's process
// (the runner: the candidate's code or the harness's own tensors) crashed with PyTorch's
// out-of-memory error. Returns what to call it, or "" for any other ending.
std::string OutOfMemoryIn(const GateResult& res) {
  if (res.status == OutcomeStatus::InfraError &&
      res.diagnostics.find(kGoldenOutOfMemory) != std::string::npos)
    return "computing the golden data";
  if (res.status == OutcomeStatus::Crash) {
    for (const char* what : {"OutOfMemoryError", "CUDA out of memory", "HIP out of memory"})
      if (res.diagnostics.find(what) != std::string::npos) return fb::kOutOfMemoryInCandidate;
  }
  return "";
}

// ---- small helpers -------------------------------------------------------------------------

std::string ReadAll(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = bool(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string DirOf(const std::string& p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? "." : p.substr(0, s);
}

// The directory of the shipped KernelBench scripts (kb_helper.py, kb_static.py, kb_runner.py),
// links resolved: the build tree links kb_helper.py to the sources.
std::string ScriptDir(const GateOptions& o) {
  std::string helper = o.golden_helper.empty() ? DefaultKernelBenchHelper() : o.golden_helper;
  char real[PATH_MAX];
  if (realpath(helper.c_str(), real)) helper = real;
  return DirOf(helper);
}

OutcomeStatus StatusOf(const std::string& cls) {
  if (cls == "CompileError") return OutcomeStatus::CompileError;
  if (cls == "Crash") return OutcomeStatus::Crash;
  if (cls == "Timeout") return OutcomeStatus::Timeout;
  if (cls == "Incorrect") return OutcomeStatus::Incorrect;
  if (cls == "ResourceLimit") return OutcomeStatus::ResourceLimit;
  if (cls == "Nondeterministic") return OutcomeStatus::Nondeterministic;
  return OutcomeStatus::InfraError;
}

// ---- the verifier --------------------------------------------------------------------------

// A job's turn on the device (timing_lock.h DeviceLock), held for one phase that uses it and
// released after: shared while the job's untimed work runs there (golden data, trials, building
// ModelNew), exclusive while a candidate is timed. The eager baseline's helper takes its own
// around its timing loops (GoldenOptions::device_lock). Between phases (static checks, the
// candidate's import and builds, waits for memory) the job holds none, so another job's timed
// phase never waits for this one's host work.
enum TurnKind { kShared, kExclusive };
class HeldTurn {
 public:
  HeldTurn(DeviceLock* t, TurnKind kind) : t_(t) {
    if (kind == kExclusive)
      t_->Exclusive();
    else
      t_->Shared();
  }
  ~HeldTurn() { t_->Release(); }
  HeldTurn(const HeldTurn&) = delete;
  HeldTurn& operator=(const HeldTurn&) = delete;

 private:
  DeviceLock* t_;
};

class Judge {
 public:
  Judge(BackendInstance* b, const TaskSpec& t, const GateOptions& o, const ProgressFn& p)
      : backend_(b),
        task_(t),
        opt_(o),
        progress_(p),
        alone_(o.kernelbench_alone),
        turn_(DeviceLockPathFor(o, *b), o.timing_lock_wait_s) {}

  GateResult Run(const std::string& source) {
    GateResult res;
    res.candidate_hash = !opt_.candidate_hash.empty() ? opt_.candidate_hash
                                                      : CandidateKey(kKernelBenchLanguage, source);
    if (task_.kernelbench.empty())
      return Fail(res, OutcomeStatus::InfraError,
                  "language kernelbench (a ModelNew file) needs a KernelBench task (task.json "
                  "\"kernelbench\"); task '" +
                      task_.name + "' is not one");
    if (!opt_.runner)
      return Fail(res, OutcomeStatus::InfraError,
                  "kernelbench candidates run only in the runner process (eval.runner): the "
                  "verifier holds the golden outputs");
    const std::string backend = backend_->description().name ? backend_->description().name : "";
    device_ = backend == "cpu" ? "cpu" : "cuda";
    scripts_ = ScriptDir(opt_);
    problem_path_ = task_.dir + "/" + task_.kernelbench;
    bool ok = false;
    problem_ = ReadAll(problem_path_, &ok);
    if (!ok) return Fail(res, OutcomeStatus::InfraError, "cannot read " + problem_path_);
    // Static checks first: a rejected file never runs.
    Progress("static checks (kb_static)");
    std::string scratch = getenv("TMPDIR") ? std::string(getenv("TMPDIR")) : "/tmp";
    std::string dir_t = scratch + "/htam-kb-XXXXXX";
    std::vector<char> dir_buf(dir_t.begin(), dir_t.end());
    dir_buf.push_back(0);
    if (!mkdtemp(dir_buf.data()))
      return Fail(res, OutcomeStatus::InfraError, "cannot make a temp dir under " + scratch);
    work_ = dir_buf.data();
    cand_path_ = work_ + "/candidate.py";
    {
      std::ofstream f(cand_path_, std::ios::binary);
      f << source;
    }
    std::string warnings;
    std::string why = Static({}, &warnings);
    if (!why.empty()) {
      Cleanup();
      // A file that does not parse or defines no ModelNew does not build: CompileError.
      const bool infra = why.rfind("infra: ", 0) == 0;
      const bool syntax = why.find("[syntax]") != std::string::npos;
      return Fail(res,
                  infra    ? OutcomeStatus::InfraError
                  : syntax ? OutcomeStatus::CompileError
                           : OutcomeStatus::Incorrect,
                  infra ? why.substr(7) : why);
    }
    res = Evaluate(res, source, warnings);
    // The job ran out of device memory while jobs shared it: the estimate of what a job needs
    // misses a reference's temporaries and PyTorch's caching (on an H200, RMSNorm's and a
    // matrix-scalar product's golden data, and LeakyReLU's 6 GiB inputs in the runner, among
    // four full-size jobs), so it is no verdict on the candidate yet. Once more, from the start,
    // with the whole share reserved: the device's memory to itself once the other jobs have
    // ended. What runs out of memory alone too keeps its ending. The candidate's process (the
    // runner) ends with its crash: the evaluator runs that try on a fresh one (retry_alone).
    const std::string where = OutOfMemoryIn(res);
    if (!where.empty() && !alone_ && Reserving()) {
      if (where == fb::kOutOfMemoryInCandidate) {
        res.retry_alone = true;  // for the evaluator, on a fresh runner
      } else {                   // the golden data's: again here
        const std::string first = res.diagnostics;
        gold_.Stop();  // its golden data off the device before the job waits for the whole share
        memory_.reset();
        alone_ = true;
        Progress("out of device memory " + where +
                 " beside other jobs; again with the memory to itself");
        GateResult again;
        again.candidate_hash = res.candidate_hash;
        res = Evaluate(again, source, warnings);
        res.diagnostics += fb::EvaluatedTwiceNote(where, first);
      }
    }
    Cleanup();
    return res;
  }

 private:
  // The seeds of a job: golden data drawn from the pool, as the gate draws them.
  struct Seeds {
    std::vector<uint64_t> verify, timing;
  };
  // A step that ends the evaluation returns its result; one that goes on returns nothing.
  using Ended = std::optional<GateResult>;

  GateResult Evaluate(GateResult res, const std::string& source, const std::string& warnings) {
    const Seeds seeds = DrawSeeds();
    GoldenOptions go = MakeGoldenOptions(opt_, *backend_, device_);
    // The baseline's helper takes the device's turn itself, around its timing loops only (not
    // while it imports PyTorch and makes its inputs). Kept for every later verdict of the task,
    // it waits for its turn as long as a job waits for memory (eval.device_memory_wait_s), not
    // the timing's bound (eval.timing_lock_wait_s): a baseline timed beside other jobs' work
    // read 1.7x slow on an H200.
    go.device_lock = DeviceLockPathFor(opt_, *backend_);
    go.device_lock_wait_s = std::max(opt_.timing_lock_wait_s, opt_.device_memory_wait_s);
    if (Ended e = LoadGolden(&res, seeds.timing.size())) return *e;
    // PyTorch eager's baseline (baseline.json, small, kept per task in the golden cache).
    KernelBenchGolden golden(task_, go);
    // The eager baseline, timed once per task and kept, is timed as a candidate is: with the
    // device to itself (the other jobs of the host wait), not beside their verification; else
    // the load at that moment is in every later speedup of the task.
    if (!golden.HasCurrentBaseline())
      Progress("golden data: time the PyTorch baseline (the device to itself)");
    Status st = golden.PrepareBaseline(seeds.timing);
    if (!st.ok()) return Fail(res, OutcomeStatus::InfraError, st.message());
    auto base = golden.Baseline();
    if (!base.ok()) return Fail(res, OutcomeStatus::InfraError, base.status().message());
    ref_call_s_ = std::max(0.0, base->eager_us) * 1e-6;
    std::vector<int> fds;
    std::string builds;
    if (Ended e = Build(&res, source, &fds, &builds)) return *e;
    if (Ended e = Verify(&res, seeds.verify, &fds)) return *e;
    json timed;
    std::string lock_note;
    if (Ended e = TimeCandidate(&res, seeds.timing, go, &fds, &timed, &lock_note)) return *e;
    return Score(res, *base, &golden, seeds.timing, timed, lock_note, builds, warnings);
  }

  Seeds DrawSeeds() const {
    const uint64_t pool = opt_.golden_seed_pool > 0 ? uint64_t(opt_.golden_seed_pool) : 0;
    const uint64_t start = pool ? MixSeed(opt_.seed_base, 0x5EED) % pool : 0;
    auto pick = [&](uint64_t i) { return pool ? (start + i) % pool : i; };
    Seeds seeds;
    for (int s = 0; s < std::max(1, opt_.seeds); ++s) seeds.verify.push_back(pick(uint64_t(s)));
    for (int k = 0; k < std::max(1, opt_.input_sets); ++k)
      seeds.timing.push_back(1000 + pick(uint64_t(k)));
    return seeds;
  }

  // The golden data of this job: computed, kept and compared on the device by kb_golden.py,
  // this process's child (never the runner's); nothing of it is written to a file.
  Ended LoadGolden(GateResult* res, size_t input_sets) {
    Progress("golden data (PyTorch on the device)");
    auto loaded = Gold({{"op", "kb_load"},
                        {"python", opt_.golden_python},
                        {"script", scripts_ + "/kb_golden.py"},
                        {"problem_path", problem_path_},
                        {"device", device_},
                        {"timeout_s", opt_.golden_timeout_s}});
    res->golden_computed = true;
    if (!loaded.ok()) return Fail(*res, OutcomeStatus::InfraError, loaded.status().message());
    // With reservations (timing_lock.h MemoryReservation), the share of the device's memory the
    // jobs sharing it reserve together; 0 = none.
    const std::string ledger = Reserving() ? DeviceMemoryPathFor(opt_, *backend_) : std::string();
    const double share = ledger.empty() ? 0.0
                                        : std::min(1.0, opt_.kernelbench_memory_share) *
                                              loaded->value("total_bytes", 0.0);
    const double need = NeedBytes(input_sets);
    if (std::string why = FitsInMemory(*loaded, input_sets, need, share); !why.empty())
      return Fail(*res, OutcomeStatus::InfraError, why);
    // Reserved before any tensor of the job is made, so that jobs sharing the device do not run
    // it out of memory together.
    if (share > 0 && need > 0) {
      // A job evaluated again after the golden data ran out of memory reserves the whole share.
      const double reserve = alone_ ? share : need;
      Progress("device memory: reserve " + FormatGiB(reserve) + " GiB");
      // The wait is declared (not counted), the stage's wall bound a multiple of its limit.
      // No turn on the device is held while it waits: a job that holds the memory gets its
      // exclusive turn to time without waiting for this one.
      ReportStageBudget(opt_.device_memory_wait_s + double(opt_.kernelbench_call_timeout_s));
      memory_.emplace(ledger, uint64_t(reserve), uint64_t(share), opt_.device_memory_wait_s);
      if (memory_->waited_out())
        return Fail(*res, OutcomeStatus::InfraError,
                    "task '" + task_.name + "' needs about " + FormatGiB(need) +
                        " GiB of memory, but " + memory_->Note() + ": evaluate it again later");
      memory_note_ = memory_->Note();
    }
    return std::nullopt;
  }

  // Jobs sharing this device reserve its memory (eval.kernelbench_memory_share, a ledger).
  bool Reserving() const {
    return opt_.kernelbench_memory_share > 0 && !DeviceMemoryPathFor(opt_, *backend_).empty();
  }

  // Limits that scale with the problem: a call may take what the reference's call takes
  // (PyTorch eager's median), times kSlowerThanReference for a candidate that is slower, plus
  // what moving its inputs and outputs costs, which is of the same order.
  double Budget(double calls) const {
    return double(opt_.kernelbench_call_timeout_s) + calls * ref_call_s_ * kSlowerThanReference;
  }

  // What a stage may spend on `cases` cases' tensors (inputs and outputs): making them, moving
  // them between processes and the device, comparing them (eval.kernelbench_s_per_gib). A case
  // of several GiB spends seconds on that alone, whatever the kernel's time.
  double DataSeconds(double cases) const {
    const double bytes = double(task_.case_input_bytes) + double(task_.case_output_bytes);
    return std::max(0.0, opt_.kernelbench_s_per_gib) * cases * bytes / double(uint64_t(1) << 30);
  }

  // Build: the candidate's import (load_inline: host work, no turn on the device, however long
  // its builds take), then ModelNew(*get_init_inputs()) sharing the device; *builds says how
  // each extension was built.
  Ended Build(GateResult* res, const std::string& source, std::vector<int>* fds,
              std::string* builds) {
    Progress("compile kernelbench candidate (Python import, load_inline)");
    json load = {{"op", "kb_load"},
                 {"python", opt_.golden_python},
                 {"script", scripts_ + "/kb_runner.py"},
                 {"source", source},
                 {"problem", problem_},
                 {"device", device_},
                 {"build_cache", opt_.kernelbench_build_cache},
                 {"fast_path", opt_.kernelbench_fast_path},
                 {"nvcc", opt_.kernelbench_nvcc},
                 {"construct", false},
                 {"timeout_s", opt_.kernelbench_compile_timeout_s}};
    auto r = Ask(load, fds);
    if (!r.ok()) return Fail(*res, OutcomeStatus::Crash, r.status().message());
    if (!r->value("ok", false)) return FromHarness(*res, *r, "");
    {
      HeldTurn held(&turn_, kShared);
      auto init = Ask({{"op", "kb_init"}, {"timeout_s", opt_.kernelbench_compile_timeout_s}}, fds);
      if (!init.ok()) return Fail(*res, OutcomeStatus::Crash, init.status().message());
      if (!init->value("ok", false)) return FromHarness(*res, *init, "");
      res->compile_ms = (r->value("seconds", 0.0) + init->value("seconds", 0.0)) * 1000.0;
    }
    if (r->contains("builds") && (*r)["builds"].is_array() && !(*r)["builds"].empty()) {
      bool all_hit = true;
      for (const auto& b : (*r)["builds"]) {
        all_hit = all_hit && b.value("hit", false);
        *builds += BuildNote(b, builds->empty());
      }
      res->compile_cached = all_hit;
    }
    return std::nullopt;
  }

  // One extension's build as the diagnostics tell it.
  static std::string BuildNote(const json& b, bool first) {
    const bool fast = b.value("fast", false);
    std::string note = std::string(first ? "" : ", ") + b.value("via", std::string("load_inline")) +
                       ": " + b.value("name", "?") + (fast ? " (fast path, " : " (") +
                       (b.value("hit", false) ? "build cache hit, " : "built, ") +
                       FormatNumber(b.value("seconds", 0.0)) + " s";
    const std::string why = b.value("fast_failed", std::string());
    if (!why.empty()) note += "; the fast path failed: " + why;
    const std::string split = b.value("split_failed", std::string());
    if (!split.empty()) note += "; the split build failed: " + split;
    note += ")";
    return note;
  }

  // Correctness trials: fresh inputs per seed; the forward's PyTorch functions on the first.
  Ended Verify(GateResult* res, const std::vector<uint64_t>& verify, std::vector<int>* fds) {
    HeldTurn held(&turn_, kShared);  // the device with the other jobs' untimed work
    // The call, its inputs and its outputs: made, moved to the device and back.
    const double trial_s = Budget(3) + DataSeconds(2);
    const double call_timeout_s = trial_s * kRunnerWallBackstop;
    for (size_t i = 0; i < verify.size(); ++i) {
      const std::string where = " (trial " + std::to_string(i) + ")";
      Progress("verify" + where);
      ReportStageBudget(trial_s);
      auto t = Ask({{"op", "kb_trial"},
                    {"seed", verify[i]},
                    {"record_ops", i == 0},
                    {"timeout_s", call_timeout_s}},
                   fds);
      if (!t.ok()) return Fail(*res, OutcomeStatus::Crash, t.status().message());
      if (!t->value("ok", false)) return FromHarness(*res, *t, where);
      if (fds->empty()) return Fail(*res, OutcomeStatus::InfraError, "no outputs from the runner");
      Progress("golden data: compare" + where);
      ReportStageBudget(double(opt_.kernelbench_call_timeout_s) + DataSeconds(1));
      auto c = Check(verify[i], (*t)["outputs"], 0, t->value("chunk_bytes", uint64_t(0)), where,
                     fds, &*t);
      if (!c.ok()) return Fail(*res, OutcomeStatus::InfraError, c.status().message());
      std::string why = c->value("why", "");
      if ((why.empty() || c->value("stage", "") != "inputs") && t->value("threads_left", 0) > 0)
        why = "ModelNew.forward left " + std::to_string(t->value("threads_left", 0)) +
              " Python thread(s) running (work outside the call)" + where;
      if (why.rfind("infra: ", 0) == 0) return Fail(*res, OutcomeStatus::InfraError, why.substr(7));
      if (!why.empty()) return Fail(*res, OutcomeStatus::Incorrect, why);
      if (i == 0 && t->contains("ops")) {
        std::string w;
        why = Static((*t)["ops"], &w);
        if (!why.empty())
          return Fail(
              *res,
              why.rfind("infra: ", 0) == 0 ? OutcomeStatus::InfraError : OutcomeStatus::Incorrect,
              why.rfind("infra: ", 0) == 0 ? why.substr(7) : why);
        runtime_warnings_ = w;
      }
      ++res->cases;
    }
    return std::nullopt;
  }

  // Timing over rotating input sets; the outputs of the last timed call of every set checked.
  // *timed is the runner's timing answer; *lock_note what the timing waited for.
  Ended TimeCandidate(GateResult* res, const std::vector<uint64_t>& timing, const GoldenOptions& go,
                      std::vector<int>* fds, json* timed, std::string* lock_note) {
    Progress("time kernelbench candidate");
    const int reps = std::max(opt_.repetitions, int(timing.size()));
    // Warm-up, the timed calls, a staging copy of the inputs before each, the checked outputs.
    const double warmup_ms = std::max(opt_.warmup_ms, opt_.kernelbench_warmup_ms);
    // ... and every input set made and moved, its outputs moved back.
    const double time_budget = Budget(2.0 * (opt_.warmup_reps + reps + int(timing.size()))) +
                               (2 * warmup_ms + 10 * opt_.kernelbench_min_timed_ms) * 1e-3 +
                               DataSeconds(2.0 * double(timing.size()));
    ReportStageBudget(time_budget);
    json seeds = json::array();
    for (uint64_t s : timing) seeds.push_back(s);
    {
      // The input sets are made sharing the device: large ones take seconds of host work.
      HeldTurn held(&turn_, kShared);
      auto made = Ask({{"op", "kb_time_inputs"},
                       {"seeds", seeds},
                       {"timeout_s", (double(opt_.kernelbench_call_timeout_s) +
                                      DataSeconds(double(timing.size()))) *
                                         kRunnerWallBackstop}},
                      fds);
      if (!made.ok()) return Fail(*res, OutcomeStatus::Crash, made.status().message());
      if (!made->value("ok", false)) return FromHarness(*res, *made, " (during timing)");
    }
    auto ask = [&] {
      // Never while the background torch.compile measurement times on this host; the runner
      // cannot see the lock (the golden cache is hidden from it): the verifier holds it.
      SharedTimingLock lock(TimingLockPath(go.lock_dir), opt_.timing_lock_wait_s);
      *lock_note = lock.Note();
      // And with the device to itself (the other jobs of the host wait).
      HeldTurn held(&turn_, kExclusive);
      if (lock_note->empty()) *lock_note = turn_.Note();
      return Ask({{"op", "kb_time"},
                  {"seeds", seeds},
                  {"warmup_reps", opt_.warmup_reps},
                  {"warmup_ms", warmup_ms},
                  {"repetitions", reps},
                  {"min_timed_ms", opt_.kernelbench_min_timed_ms},
                  {"flush_bytes", opt_.flush_bytes},
                  {"timeout_s", time_budget * kRunnerWallBackstop}},
                 fds);
    };
    auto t = ask();
    if (!t.ok()) return Fail(*res, OutcomeStatus::Crash, t.status().message());
    if (!t->value("ok", false)) return FromHarness(*res, *t, " (during timing)");
    if (fds->empty() || !(*t)["outputs"].is_array() || (*t)["outputs"].size() != timing.size()) {
      CloseAll(fds);
      return Fail(*res, OutcomeStatus::InfraError, "the runner's timing answer is incomplete");
    }
    Progress("golden data: compare the timed outputs");
    HeldTurn held(&turn_, kShared);
    ReportStageBudget(double(opt_.kernelbench_call_timeout_s) + DataSeconds(double(timing.size())));
    uint64_t off = 0;
    for (size_t k = 0; k < timing.size(); ++k) {
      const std::string where = " (output of a timed call, input set " + std::to_string(k) + ")";
      auto c = Check(timing[k], (*t)["outputs"][k], off, t->value("chunk_bytes", uint64_t(0)),
                     where, fds, nullptr);
      if (!c.ok()) {
        CloseAll(fds);
        return Fail(*res, OutcomeStatus::InfraError, c.status().message());
      }
      const std::string why = c->value("why", "");
      if (!why.empty()) {
        CloseAll(fds);
        return Fail(*res, OutcomeStatus::Incorrect, why);
      }
      off = c->value("end", uint64_t(0));
    }
    CloseAll(fds);
    *timed = std::move(*t);
    return std::nullopt;
  }

  // The figures from the runner's timing answer `t` against PyTorch eager's baseline, and the
  // verdict's diagnostics.
  GateResult Score(GateResult res, const TorchBaseline& base, KernelBenchGolden* golden,
                   const std::vector<uint64_t>& timing, json& t, const std::string& lock_note,
                   const std::string& builds, const std::string& warnings) {
    std::vector<double> rep, wall;
    try {
      rep = t["rep_us"].get<std::vector<double>>();
      wall = t["wall_us"].get<std::vector<double>>();
    } catch (const std::exception&) {
      return Fail(res, OutcomeStatus::InfraError, "malformed timings from the runner");
    }
    if (rep.size() != wall.size() || rep.empty())
      return Fail(res, OutcomeStatus::InfraError, "the runner's timings do not pair up");
    std::string timing_note;
    TimingStats events = Summarize(rep);
    if (device_ != "cpu") {
      // CUDA events see the current stream only; the wall clock ends after a whole-device
      // synchronize (less its cost on an empty window): a call counts the longer of the two,
      // so work left on another stream is timed.
      const double sync_us = std::max(0.0, t.value("sync_us", 0.0));
      for (size_t i = 0; i < rep.size(); ++i) rep[i] = std::max(rep[i], wall[i] - sync_us);
    }
    TimingStats s = Summarize(rep);
    if (device_ != "cpu" && s.median > 1.2 * events.median + 5.0)
      timing_note = "; the wall clock counted (" + FormatNumber(s.median) + " us against " +
                    FormatNumber(events.median) +
                    " us of CUDA events: work outside the current stream)";
    res.median_us = s.median;
    res.spread_us = s.iqr;
    res.repetitions = s.count;
    res.baseline_us = base.eager_us;
    res.baseline_spread_us = base.eager_spread_us;
    res.baseline_compile_us = base.compile_us;
    res.baseline_note = "PyTorch eager on " + device_ +
                        (base.compile_us > 0 ? "; torch.compile measured" : "; " + base.note);
    // torch.compile's figure, when pending, once the candidate is timed; nobody waits for it.
    // The measurement runs the model over the timing sets after this job: it keeps the job's
    // memory reservation (on an H200 one ran the next full-size job out of device memory).
    if (base.compile_pending &&
        golden->MeasureCompileInBackground(timing, memory_ ? memory_->fd() : -1) && memory_)
      memory_->HandOver();
    res.speedup = res.median_us > 0 && res.baseline_us > 0 ? res.baseline_us / res.median_us : 0;
    res.status = OutcomeStatus::Ok;
    res.diagnostics = "ModelNew passed " + std::to_string(res.cases) +
                      " correctness trials; timed " + std::to_string(res.repetitions) +
                      " calls against PyTorch eager " + FormatNumber(res.baseline_us) + " us" +
                      timing_note + "; spread (IQR) " + FormatNumber(s.iqr) + " us, " +
                      FormatNumber(s.median > 0 ? std::round(1000 * s.iqr / s.median) / 10 : 0) +
                      " % of the median, after " + std::to_string(t.value("warmup_done", 0)) +
                      " untimed calls over " +
                      FormatNumber(std::round(t.value("warmup_s", 0.0) * 1000)) + " ms";
    // KernelBench's own measure beside htam's: CUDA events on the current stream alone, as its
    // harness and the eager baseline here time a call.
    if (device_ != "cpu" && events.median > 0)
      res.diagnostics += "; CUDA events: median " + FormatNumber(events.median) + " us (IQR " +
                         FormatNumber(events.iqr) + "), speedup " +
                         FormatNumber(res.baseline_us > 0 ? res.baseline_us / events.median : 0) +
                         " by KernelBench's measure";
    if (!lock_note.empty()) res.diagnostics += "; " + lock_note;
    if (!base.eager_note.empty()) res.diagnostics += "; PyTorch eager " + base.eager_note;
    if (!memory_note_.empty()) res.diagnostics += "; " + memory_note_;
    if (!builds.empty()) res.diagnostics += "; " + builds;
    std::string warn = warnings + runtime_warnings_;
    if (!warn.empty()) res.diagnostics += "; warnings: " + warn.substr(0, 1500);
    return res;
  }

  // One request to kb_golden.py (the golden data's process, started by its kb_load), with the
  // runner's memfds `fds`. Its failures are the infrastructure's, never the candidate's.
  Result<json> Gold(json req, const std::vector<int>& fds = {}) {
    std::vector<int> got;
    bool failed = false;
    if (!req.contains("timeout_s")) req["timeout_s"] = opt_.golden_timeout_s;
    json a = gold_.Handle(req, &got, &failed, fds);
    CloseAll(&got);
    if (!a.value("ok", false))
      return Status::Internal("the golden data (PyTorch on " + device_ +
                              ", kb_golden.py): " + a.value("message", std::string("no answer")));
    return a;
  }

  // The candidate's outputs `meta` (at `offset` in the runner's payload: memfds `fds` of
  // `chunk` bytes each) against the golden outputs of `seed`, and the runner's input digests of
  // a trial (`trial`), on the device.
  Result<json> Check(uint64_t seed, const json& meta, uint64_t offset, uint64_t chunk,
                     const std::string& where, std::vector<int>* fds, const json* trial) {
    json req = {{"op", "kb_check"},
                {"seed", seed},
                {"outputs", meta},
                {"offset", offset},
                {"atol", task_.tolerance.atol},
                {"rtol", task_.tolerance.rtol},
                {"bad_budget", task_.tolerance.bad_budget},
                {"where", where},
                {"chunk_bytes", chunk}};
    if (trial) {
      req["inputs_before"] = trial->value("inputs_before", json::array());
      req["inputs_after"] = trial->value("inputs_after", json::array());
    }
    auto r = Gold(req, *fds);
    if (trial) CloseAll(fds);
    return r;
  }

  // The memory a job asks of the device (on the CPU backend the host's): the runner holds
  // input_sets + 2 sets of inputs (rotating sets, two staging copies) and as many outputs, the
  // golden data one case and the candidate's outputs beside it; eval.kernelbench_memory_headroom
  // times that leaves room for the candidate's own work.
  double NeedBytes(size_t sets) const {
    const double in = double(task_.case_input_bytes), out = double(task_.case_output_bytes);
    double held = (double(sets) + 3) * in + (double(sets) + 4) * out;
    if (device_ == "cpu") held += 3 * out;  // the outputs' host copies (memfd, upload)
    return held * std::max(1.0, opt_.kernelbench_memory_headroom);
  }

  // "" when a job that needs `need` bytes fits in the memory kb_golden.py reports, else why it
  // is refused. With reservations (`share` > 0, LoadGolden), what other jobs hold now is theirs
  // for a while only: a job is refused when it can never fit in the share they reserve together,
  // and else waits for it; without, it must fit in what is free now.
  std::string FitsInMemory(const json& mem, size_t sets, double need, double share) {
    const double in = double(task_.case_input_bytes), out = double(task_.case_output_bytes);
    const double free_b = mem.value("free_bytes", 0.0), total = mem.value("total_bytes", 0.0);
    if (share > 0 ? need <= share : (free_b <= 0 || need <= free_b)) return "";
    return "task '" + task_.name + "' needs about " + FormatGiB(need) + " GiB of memory (inputs " +
           FormatGiB(in) + " GiB and outputs " + FormatGiB(out) +
           " GiB per case, held by the runner over " + std::to_string(sets) +
           " input sets and by the golden data, times " +
           FormatNumber(opt_.kernelbench_memory_headroom) +
           " (eval.kernelbench_memory_headroom) for the candidate) but " +
           mem.value("memory", std::string("the device's memory")) + " has " + FormatGiB(free_b) +
           " GiB free of " + FormatGiB(total) + " GiB" +
           (share > 0 ? ", and the evaluations of a device reserve at most " + FormatGiB(share) +
                            " GiB of it (eval.kernelbench_memory_share " +
                            FormatNumber(opt_.kernelbench_memory_share) + ")"
                      : std::string()) +
           ": this task cannot be evaluated on this device";
  }

  // kb_static.py on the source (ops empty) or on the PyTorch functions a forward called.
  // "" accepted; "infra: ..." when the checker itself failed; else the reasons.
  std::string Static(const json& ops, std::string* warnings) {
    std::vector<std::string> argv = {
        opt_.golden_python, scripts_ + "/kb_static.py", cand_path_, "--problem", problem_path_,
        "--task",           task_.dir + "/task.json",   "--json"};
    if (!ops.is_null() && !ops.empty()) {
      std::string p = work_ + "/ops.json";
      std::ofstream(p) << ops.dump();
      argv.insert(argv.end(), {"--runtime-ops", p});
    } else if (!ops.is_null()) {
      return "";
    }
    // Its report on stdout, its stderr where ours goes; in our process group (a kill of the
    // worker's group takes it too).
    ProcessOptions o;
    o.timeout_s = 60;
    o.stderr_to = StderrTo::kParent;
    o.own_group = false;
    auto run = RunProcess(argv, o);
    const std::string out = run.ok() ? run->output : run.status().message();
    json j = json::parse(out, nullptr, false);
    if (!run.ok() || run->timed_out || run->signaled || run->exit_code > 1 || j.is_discarded() ||
        !j.is_object())
      return "infra: the static checks (" + argv[1] + ") did not run: " + out.substr(0, 300);
    auto text = [](const json& f) {
      int line = f.value("line", 0);
      return (line ? "line " + std::to_string(line) + ": " : std::string()) + "[" +
             f.value("check", "") + "] " + f.value("message", "");
    };
    for (const auto& w : j.value("warnings", json::array()))
      *warnings += (warnings->empty() ? "" : "; ") + text(w);
    if (j.value("ok", false)) return "";
    std::string why = ops.is_null() ? "rejected by the static checks of ModelNew: "
                                    : "rejected by the task's policy at run time: ";
    bool first = true;
    for (const auto& e : j.value("errors", json::array())) {
      why += (first ? "" : "; ") + text(e);
      first = false;
    }
    return why;
  }

  Result<json> Ask(const json& req, std::vector<int>* fds) {
    CloseAll(fds);
    return opt_.runner->Forward(req, fds);
  }

  GateResult FromHarness(GateResult res, const json& r, const std::string& where) {
    return Fail(res, StatusOf(r.value("class", "InfraError")), r.value("message", "") + where);
  }

  static GateResult Fail(GateResult res, OutcomeStatus s, const std::string& why) {
    res.status = s;
    res.diagnostics = why;
    return res;
  }

  static void CloseAll(std::vector<int>* fds) {
    for (int f : *fds) close(f);
    fds->clear();
  }

  void Progress(const std::string& s) {
    if (progress_) progress_(s);
  }

  void Cleanup() {
    if (work_.empty()) return;
    for (const char* f : {"/candidate.py", "/ops.json"}) unlink((work_ + f).c_str());
    rmdir(work_.c_str());
  }

  BackendInstance* backend_;
  const TaskSpec& task_;
  const GateOptions& opt_;
  ProgressFn progress_;
  std::string device_, scripts_, problem_path_, problem_, work_, cand_path_, runtime_warnings_;
  double ref_call_s_ = 0;                    // PyTorch eager's median call, in seconds (Budget)
  std::optional<MemoryReservation> memory_;  // held from the golden data's load to the end
  std::string memory_note_;                  // the reservation's wait, for the diagnostics
  // Evaluated again with the whole share reserved: in Run, or by the evaluator
  // (GateSpec.kernelbench_alone).
  bool alone_ = false;
  DeviceLock turn_;
  KernelBenchHarness gold_;  // kb_golden.py: the golden data on the device
};

}  // namespace

GateResult EvaluateKernelBenchCandidate(BackendInstance* backend, const TaskSpec& task,
                                        const GateOptions& options, const std::string& source,
                                        const ProgressFn& progress) {
  Judge j(backend, task, options, progress);
  return j.Run(source);
}

// ---- the runner's side -------------------------------------------------------------------

std::string KernelBenchHarness::Start(const std::string& python, const std::string& script) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return std::string("socketpair: ") + strerror(errno);
  auto pid = StartWithChannel({python, script, "--fd", "3"}, sv[1], {"PYTHONDONTWRITEBYTECODE=1"},
                              "kb_runner");
  if (!pid.ok()) {
    close(sv[0]);
    close(sv[1]);
    return pid.status().message();
  }
  close(sv[1]);
  pid_ = *pid;
  sock_ = sv[0];
  return "";
}

void KernelBenchHarness::Stop() {
  if (sock_ >= 0) close(sock_);
  sock_ = -1;
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

json KernelBenchHarness::Handle(const json& req, std::vector<int>* fds, bool* failed,
                                const std::vector<int>& send_fds) {
  const std::string op = req.value("op", "");
  auto fail = [&](const std::string& cls, const std::string& msg) {
    *failed = true;
    Stop();
    return json{{"ok", false}, {"class", cls}, {"message", msg}};
  };
  if (op == "kb_load") {
    Stop();
    std::string why = Start(req.value("python", ""), req.value("script", ""));
    if (!why.empty()) return fail("InfraError", "cannot start the KernelBench harness: " + why);
  }
  if (sock_ < 0) return fail("InfraError", "no ModelNew loaded in this runner");
  json fwd = req;
  fwd.erase("python");
  fwd.erase("script");
  if (op == "kb_load") {
    char cwd[4096];
    fwd["work_dir"] = getcwd(cwd, sizeof cwd) ? cwd : ".";
  }
  const double timeout_s = req.value("timeout_s", 60.0);
  if (!SendFrameFds(sock_, fwd, send_fds).ok()) {
    int st = 0;
    waitpid(pid_, &st, WNOHANG);
    return fail("Crash", "the KernelBench harness is gone");
  }
  pollfd p{sock_, POLLIN, 0};
  auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  for (;;) {
    int ms =
        int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (ms <= 0)
      return fail("Timeout",
                  op == "kb_load"
                      ? "importing the candidate and building ModelNew ran past " +
                            FormatNumber(timeout_s) + " s"
                      : "ModelNew ran past " + FormatNumber(timeout_s) + " s (" + op + ")");
    int r = poll(&p, 1, ms);
    if (r > 0) break;
    if (r < 0 && errno != EINTR) return fail("InfraError", "poll on the harness failed");
  }
  auto ans = RecvFrameFds(sock_, fds);
  if (!ans.ok()) {
    for (int f : *fds) close(f);
    fds->clear();
    int st = 0;
    pid_t got = 0;
    for (int i = 0; i < 100 && got == 0; ++i) {
      got = waitpid(pid_, &st, WNOHANG);
      if (got == 0) usleep(10000);
    }
    std::string how = got == pid_
                          ? (WIFSIGNALED(st) ? "killed by signal " + std::to_string(WTERMSIG(st)) +
                                                   " (" + strsignal(WTERMSIG(st)) + ")"
                                             : "exit status " + std::to_string(WEXITSTATUS(st)))
                          : "no answer";
    if (got == pid_) pid_ = -1;
    if (got > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 127)
      return fail("InfraError", "the runner cannot execute " + req.value("python", std::string()) +
                                    " " + req.value("script", std::string()) +
                                    " (eval.kernelbench_python; is it in the runner's view?)");
    return fail("Crash", "the Python process running ModelNew died (" + how + ") during " + op);
  }
  if (!ans->value("ok", false)) {
    *failed = true;
    Stop();
  }
  return *ans;
}

}  // namespace htam
