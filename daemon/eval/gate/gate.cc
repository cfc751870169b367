// The verification gate and timing (gate.h): the route of one job (Gate::Impl::Run) and what is
// shared by the gate's parts (gate_impl.h names them and their files).
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <random>

#include "base/file.h"
#include "base/hash.h"
#include "base/thread_annotations.h"
#include "daemon/eval/gate/gate_impl.h"
#include "daemon/eval/gate/stats.h"
#include "daemon/eval/gate/tensor_data.h"
#include "daemon/eval/gate/timing_lock.h"
#include "daemon/eval/kernelbench/kb_candidate.h"
#include "daemon/eval/kernelbench/kernelbench.h"

namespace htam {
namespace {

using fb::OutcomeStatus;

}  // namespace

Gate::Impl::Impl(BackendInstance* backend, htam_device* device, const TaskSpec& task,
                 const GateOptions& options, const ProgressFn& progress)
    : backend_(backend),
      api_(&backend->api()),
      device_(device),
      task_(task),
      opt_(options),
      progress_(progress),
      pool_(&backend->api(), options.buffer_pool_bytes, &ops_),
      turn_(DeviceLockPathFor(options, *backend), options.timing_lock_wait_s) {
  std::mt19937_64 rng(MixSeed(options.seed_base, 0xC0FFEE));
  canary_.resize(2 * opt_.guard_bytes);
  for (auto& b : canary_) b = uint8_t(rng());
}

GateResult Gate::Impl::Run(const std::string* candidate_source) {
  GateResult res;
  turn_.Shared();
  const std::string& language =
      backend_->description().language ? backend_->description().language : "";
  // --- reference: a kernel of the task, or golden data from PyTorch (KernelBench) ---
  const bool golden = !task_.kernelbench.empty();
  std::string ref_source;
  if (golden) {
    if (!candidate_source)
      return Infra(res, "a KernelBench task has no reference kernel (its baseline is PyTorch)");
  } else {
    auto ref_path = task_.ReferencePath(backend_->description().name);
    if (!ref_path.ok()) return Infra(res, ref_path.status().message());
    if (!ReadWholeFile(*ref_path, &ref_source))
      return Infra(res, "cannot read reference " + *ref_path);
  }
  const std::string& source = candidate_source ? *candidate_source : ref_source;
  res.candidate_hash = candidate_source && !opt_.candidate_hash.empty()
                           ? opt_.candidate_hash
                           : CandidateKey(language, source);

  // The reference runs here; the candidate runs in the runner when there is one (never the
  // reference's self-evaluation: it holds no secret).
  LocalExecOptions lo{opt_.check_threads, opt_.thread_grace_ms, ""};
  std::unique_ptr<CandidateExec> ref_exec = MakeLocalExec(backend_, device_, lo);
  std::unique_ptr<CandidateExec> own_exec;
  cand_ = candidate_source && opt_.runner && !opt_.single_call ? opt_.runner : nullptr;
  if (!cand_) {
    own_exec = MakeLocalExec(backend_, device_, lo);
    cand_ = own_exec.get();
  }
  ref_ = ref_exec.get();
  sharer_ = cand_ == opt_.runner ? opt_.runner : nullptr;
  if (golden)
    reference_ = MakeGoldenReference();
  else
    reference_ = MakeKernelReference(ref_, ref_source);
  std::string diag;
  if (Verdict v = reference_->Prepare(&res); !v.ok()) return Infra(res, v.reason);
  Progress("compile candidate");
  // Compiling is host work: no turn on the device while it lasts, so that another job's timed
  // phase does not wait for this compiler.
  turn_.Release();
  Status st = Compile(cand_, source, "candidate", &diag, &res.compile_ms, &res.compile_cached);
  turn_.Shared();
  if (!st.ok()) {
    res.status = st.IsNotFound()                           ? OutcomeStatus::InfraError
                 : st.code() == Status::Code::kUnavailable ? OutcomeStatus::Crash
                                                           : OutcomeStatus::CompileError;
    res.diagnostics = diag;
    // Nothing of the candidate ran (its source only went through the compiler).
    res.runner_clean = res.status == OutcomeStatus::CompileError;
    return res;
  }
  if (Verdict v = reference_->Load(); !v.ok()) return Infra(res, v.reason);
  {
    Progress("load candidate");
    ExecOutcome o = cand_->Load();
    if (!o.ok()) {
      res.status = o.code == HTAM_ERR_DEVICE_FAULT || o.runner_died ? OutcomeStatus::Crash
                                                                    : OutcomeStatus::CompileError;
      res.diagnostics = "loading candidate: " + o.message;
      return res;
    }
  }
  if (opt_.single_call) return SingleCall(res);
  // --- verification: seen shapes, then held-out ones, several seeds each ---
  struct Case {
    const DimBinding* dims;
    bool held_out;
    size_t index;
  };
  std::vector<Case> cases;
  for (size_t i = 0; i < task_.seen_shapes.size(); ++i)
    cases.push_back({&task_.seen_shapes[i], false, i});
  for (size_t i = 0; i < task_.held_out_shapes.size(); ++i)
    cases.push_back({&task_.held_out_shapes[i], true, i});
  for (const Case& c : cases) {
    for (int s = 0; s < opt_.seeds; ++s) {
      std::string where =
          c.held_out ? " (held-out shape #" + std::to_string(c.index + 1) + ", not shown; seed " +
                           std::to_string(s) + ")"
                     : " (seen shape " + DimsText(*c.dims) + ", seed " + std::to_string(s) + ")";
      Progress("verify" + where);
      uint64_t seed = MixSeed(MixSeed(opt_.seed_base, c.held_out ? 1000 + c.index : c.index), s);
      Verdict v = VerifyCase(cand_, *c.dims, seed, size_t(s), where, c.held_out);
      if (!v.ok()) {
        res.status = v.status;
        res.diagnostics = v.reason;
        res.runner_clean = v.outputs_only;
        return res;
      }
      ++res.cases;
    }
  }
  // --- timing on the first seen shape ---
  const DimBinding& dims = task_.seen_shapes.front();
  auto f = task_.flops.Eval(dims);
  auto b = task_.bytes.Eval(dims);
  res.flops = f.ok() ? *f : 0;
  res.bytes = b.ok() ? *b : 0;
  TimingStats cand_stats, base_stats;
  Verdict v = TimeAndVerify(cand_, dims, &cand_stats, true, &res);
  if (!v.ok()) {
    res.status = v.status;
    res.diagnostics = v.reason;
    return res;
  }
  v = reference_->Baseline(dims, &base_stats, &res);
  if (!v.ok()) return Infra(res, v.reason);
  if (cand_->CanProfile()) {
    Progress("profile");
    ProfileCandidate(dims, &res);
  }
  res.median_us = cand_stats.median;
  res.spread_us = cand_stats.iqr;
  res.repetitions = cand_stats.count;
  res.baseline_us = base_stats.median;
  res.baseline_spread_us = base_stats.iqr;
  res.speedup = res.median_us > 0 && res.baseline_us > 0 ? res.baseline_us / res.median_us : 0;
  SpeedOfLight(&res);
  res.status = OutcomeStatus::Ok;
  res.runner_clean = true;
  res.diagnostics = "passed " + std::to_string(res.cases) + " verification cases";
  if (!data_note_.empty()) res.diagnostics += "; " + data_note_;
  if (!timing_note_.empty()) res.diagnostics += "; " + timing_note_;
  if (!baseline_note_.empty()) res.diagnostics += "; " + baseline_note_;
  if (!diag.empty()) res.diagnostics += "; compiler: " + diag.substr(0, 2000);
  return res;
}

void Gate::Impl::Progress(const std::string& stage) {
  StageBoundary(stage);
  if (progress_) progress_(stage);
}

void Gate::Impl::StageBoundary(const std::string& stage) {
  const auto now = std::chrono::steady_clock::now();
  if (!stage_name_.empty()) {
    double ms = std::chrono::duration<double, std::milli>(now - stage_start_).count();
    auto it = std::find_if(stage_ms_.begin(), stage_ms_.end(),
                           [&](const auto& e) { return e.name == stage_name_; });
    if (it == stage_ms_.end())
      stage_ms_.push_back(fb::MakeStageTime(stage_name_, ms));
    else
      it->ms += ms;
  }
  std::string name = stage;
  for (const char* cut : {" (", ", "}) {
    auto p = name.find(cut);
    if (p != std::string::npos) name.resize(p);
  }
  stage_name_ = name;
  stage_start_ = now;
}

void Gate::Impl::StartCompileBaseline() {
  if (reference_) reference_->AfterTiming();
}

std::vector<fb::StageTimeT> Gate::Impl::TakeOps() {
  std::vector<fb::StageTimeT> out;
  for (const auto& [name, ms] : ops_) out.push_back(fb::MakeStageTime(name, ms));
  return out;
}

std::vector<fb::StageTimeT> Gate::Impl::TakeStages() {
  StageBoundary("");
  return std::move(stage_ms_);
}

GateResult Gate::Impl::Infra(GateResult res, const std::string& why) {
  res.status = OutcomeStatus::InfraError;
  res.diagnostics = why;
  return res;
}

std::string Gate::Impl::DimsText(const DimBinding& d) {
  std::string s = "{";
  for (const auto& [k, v] : d) s += (s.size() > 1 ? ", " : "") + k + ": " + std::to_string(v);
  return s + "}";
}

Status Gate::Impl::Compile(CandidateExec* ex, const std::string& source, const char* name,
                           std::string* diag, double* ms, bool* cached) {
  CompileSettings cs;
  cs.language = backend_->description().language ? backend_->description().language : "";
  cs.arch = opt_.arch;
  cs.options = opt_.compile_options;
  cs.name = name;
  cs.timeout_s = opt_.compile_timeout_s;
  CompileOutcome c = ex->Compile(source, cs);
  *diag = c.diagnostics;
  if (c.runner_died) {
    *diag = "the runner process died while compiling: " + c.diagnostics;
    return Status::Unavailable(*diag);
  }
  if (c.code >= 0) {
    if (c.code != HTAM_ERR_COMPILE && c.code != HTAM_ERR_TIMEOUT) return Status::NotFound(*diag);
    return Status::InvalidArgument(*diag);
  }
  if (ms) *ms = c.ms;
  if (cached) *cached = c.cached;
  return Status::OK();
}

bool BaselineCache::Find(const std::string& key, double max_age_s, TimingStats* stats,
                         double* age_s) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  const double age =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.when).count();
  if (age > max_age_s) return false;
  *stats = it->second.stats;
  if (age_s) *age_s = age;
  return true;
}

void BaselineCache::Keep(const std::string& key, const TimingStats& stats) {
  MutexLock lock(&mu_);
  entries_[key] = Entry{stats, std::chrono::steady_clock::now()};
}

std::string DeviceMemoryPathFor(const GateOptions& opt, const BackendInstance& backend) {
  if (opt.device_index < 0 || opt.single_call) return std::string();
  return DeviceMemoryPath(DeviceLockDir(opt, backend),
                          backend.description().name ? backend.description().name : "",
                          opt.device_index);
}

std::string DeviceLockPathFor(const GateOptions& opt, const BackendInstance& backend) {
  if (opt.device_index < 0 || opt.single_call) return std::string();
  return DeviceLockPath(DeviceLockDir(opt, backend),
                        backend.description().name ? backend.description().name : "",
                        opt.device_index);
}

std::string GoldenCacheRoot(const GateOptions& opt, const BackendInstance& backend) {
  if (!opt.golden_cache_dir.empty()) return opt.golden_cache_dir;
  if (!backend.host().cache_dir.empty()) return backend.host().cache_dir + "/kernelbench";
  return "/tmp/htam-kernelbench-" + std::to_string(getuid());
}

std::string DeviceLockDir(const GateOptions& opt, const BackendInstance& backend) {
  return opt.device_lock_dir.empty() ? GoldenCacheRoot(opt, backend) : opt.device_lock_dir;
}

GoldenOptions MakeGoldenOptions(const GateOptions& opt, const BackendInstance& backend,
                                const std::string& device) {
  GoldenOptions go;
  go.lock_dir = DeviceLockDir(opt, backend);
  go.python = opt.golden_python;
  go.helper = opt.golden_helper;
  go.cache_dir = GoldenCacheRoot(opt, backend);
  go.device = device;
  go.timeout_s = opt.golden_timeout_s;
  go.reps = std::max(opt.repetitions, 1);
  go.warmup = opt.warmup_reps;
  if (opt.flush_bytes) go.flush_bytes = opt.flush_bytes;
  go.cache_bytes = opt.kernelbench_cache_bytes;
  return go;
}

Gate::Gate(BackendInstance* backend, htam_device* device, const TaskSpec& task, GateOptions options)
    : backend_(backend), device_(device), task_(task), options_(std::move(options)) {}

GateResult Gate::Evaluate(const std::string& source, const ProgressFn& progress) {
  GateResult r;
  if (options_.language == kKernelBenchLanguage && !options_.single_call) {
    r = EvaluateKernelBenchCandidate(backend_, task_, options_, source, progress);
  } else {
    Impl impl(backend_, device_, task_, options_, progress);
    r = impl.Run(&source);
    r.stage_ms = impl.TakeStages();
    r.op_ms = impl.TakeOps();
    impl.StartCompileBaseline();
  }
  // The runner keeps nothing of this job (module, artifact, mapped buffers) for the next one.
  if (options_.runner) {
    options_.runner->Reset();
    // What it cannot release (device memory the candidate allocated itself) retires it.
    if (std::string why = options_.runner->Retired(); !why.empty()) {
      r.runner_clean = false;
      r.diagnostics += (r.diagnostics.empty() ? "" : "\n") + std::string("note: ") + why +
                       ": the runner is replaced for the next candidate";
    }
  }
  return r;
}

GateResult Gate::EvaluateReference(const ProgressFn& progress) {
  Impl impl(backend_, device_, task_, options_, progress);
  GateResult r = impl.Run(nullptr);
  r.stage_ms = impl.TakeStages();
  r.op_ms = impl.TakeOps();
  return r;
}

}  // namespace htam
