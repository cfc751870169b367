// The verification gate and timing; see gate.h. Each check says which hack it stops.
#include "daemon/eval/gate/gate.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "base/file.h"
#include "base/hash.h"
#include "base/thread_annotations.h"
#include "daemon/eval/gate/compare.h"
#include "daemon/eval/gate/device_buffers.h"
#include "daemon/eval/gate/stats.h"
#include "daemon/eval/gate/tensor_data.h"
#include "daemon/eval/gate/timing_lock.h"
#include "daemon/eval/kernelbench/kb_candidate.h"
#include "daemon/eval/kernelbench/kernelbench.h"
#include "daemon/eval/runner/exec.h"

namespace htam {
namespace {

using fb::OutcomeStatus;
using gate_detail::At;
using gate_detail::BufferPool;
using gate_detail::CheckOutput;
using gate_detail::CheckSame;
using gate_detail::DeviceTensor;
using gate_detail::g_keep_everything;
using gate_detail::Inputs;
using gate_detail::IsPoison;
using gate_detail::kPoisonByte;
using gate_detail::OpTimer;
using gate_detail::OpTimes;
using gate_detail::TensorSet;

// A failure of the candidate (status + reason) or of the infrastructure.
struct Verdict {
  OutcomeStatus status = OutcomeStatus::Ok;
  std::string reason;
  // The failure is in the values the candidate computed (a comparison with the reference), not in
  // how it ran: its runner may serve the next job (GateResult::runner_clean).
  bool outputs_only = false;
  bool ok() const { return status == OutcomeStatus::Ok; }
  static Verdict Fail(OutcomeStatus s, std::string r) { return Verdict{s, std::move(r)}; }
  static Verdict WrongOutput(OutcomeStatus s, std::string r) {
    return Verdict{s, std::move(r), true};
  }
};

}  // namespace

class Gate::Impl {
 public:
  Impl(BackendInstance* backend, htam_device* device, const TaskSpec& task,
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

  GateResult Run(const std::string* candidate_source) {
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
    res.candidate_hash = CandidateKey(language, source);

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
      reference_ = std::make_unique<GoldenReference>(this);
    else
      reference_ = std::make_unique<KernelReference>(this, ref_, ref_source);
    std::string diag;
    if (Verdict v = reference_->Prepare(&res); !v.ok()) return Infra(res, v.reason);
    Progress("compile candidate");
    Status st = Compile(cand_, source, "candidate", &diag, &res.compile_ms, &res.compile_cached);
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

 private:
  void Progress(const std::string& stage) {
    StageBoundary(stage);
    if (progress_) progress_(stage);
  }
  // Closes the running stage and opens `stage` ("" = none); details after " (" or ", " and the
  // words "candidate"/"reference"/"baseline" inside parentheses are dropped from the name.
  void StageBoundary(const std::string& stage) {
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

 public:
  // KernelBench: torch.compile's figure, when still pending, in a detached process started once
  // the candidate is timed (never overlapping its timing; no verdict waits for it).
  void StartCompileBaseline() {
    if (reference_) reference_->AfterTiming();
  }

  std::vector<fb::StageTimeT> TakeOps() {
    std::vector<fb::StageTimeT> out;
    for (const auto& [name, ms] : ops_) out.push_back(fb::MakeStageTime(name, ms));
    return out;
  }
  std::vector<fb::StageTimeT> TakeStages() {
    StageBoundary("");
    return std::move(stage_ms_);
  }

 private:
  static GateResult Infra(GateResult res, const std::string& why) {
    res.status = OutcomeStatus::InfraError;
    res.diagnostics = why;
    return res;
  }
  static std::string DimsText(const DimBinding& d) {
    std::string s = "{";
    for (const auto& [k, v] : d) s += (s.size() > 1 ? ", " : "") + k + ": " + std::to_string(v);
    return s + "}";
  }

  // NotFound: infrastructure (compiler missing...); Unavailable: the runner died; InvalidArgument:
  // the source's fault (diagnostics in *diag).
  Status Compile(CandidateExec* ex, const std::string& source, const char* name, std::string* diag,
                 double* ms, bool* cached) {
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

  // Inputs generated from the task's distributions (on the device where the plugin can, else on
  // the host), or `given` ones (golden data). `local`: in the verifier's own memory, never shared
  // with a runner (MakeOutputs).
  Status MakeInputs(const DimBinding& dims, uint64_t seed, Inputs* inputs, TensorSet* dev,
                    const std::vector<HostTensor>* given = nullptr, bool local = false) {
    const bool on_device = !given && DeviceData();
    for (size_t i = 0; i < task_.inputs.size(); ++i) {
      const TensorSpec& ts = task_.inputs[i];
      const uint64_t s = MixSeed(seed, i);
      auto t = std::make_unique<DeviceTensor>(api_, local ? nullptr : sharer_, &pool_);
      if (on_device) {
        HTAM_RETURN_IF_ERROR(t->Create(device_, Shaped(ts, dims), opt_.guard_bytes, &canary_));
        auto keep = std::make_unique<DeviceTensor>(api_, nullptr, &pool_);
        HTAM_RETURN_IF_ERROR(keep->Create(device_, Shaped(ts, dims), 0, &canary_));
        Result<bool> filled = FillOnDevice(ts, s, t.get());
        if (!filled.ok() && i == 0) {
          // The plugin cannot (its kernels do not build here): the host generates, from now on.
          device_data_failed_ = true;
          data_note_ = "test data generated on the host: " + filled.status().message();
          return MakeInputs(dims, seed, inputs, dev, given, local);
        }
        if (!filled.ok()) return filled.status();
        if (*filled) {
          HTAM_RETURN_IF_ERROR(keep->CopyFrom(*t));
        } else {  // all zeros from these parameters: the host's generator (never all zeros)
          OpTimer g(&ops_, "generate on the host");
          HostTensor h = GenerateInput(ts, task_.Shape(ts, dims), s);
          HTAM_RETURN_IF_ERROR(t->Upload(h));
          HTAM_RETURN_IF_ERROR(keep->Upload(h));
        }
        inputs->pristine.push_back(std::move(keep));
      } else {
        {
          OpTimer g(&ops_, "generate on the host");
          inputs->host.push_back(given ? (*given)[i] : GenerateInput(ts, task_.Shape(ts, dims), s));
        }
        HTAM_RETURN_IF_ERROR(t->Create(device_, inputs->host.back(), opt_.guard_bytes, &canary_));
        HTAM_RETURN_IF_ERROR(t->Upload(inputs->host.back()));
      }
      dev->push_back(std::move(t));
    }
    return Status::OK();
  }
  // A host tensor of the right shape with no data (what DeviceTensor::Create needs).
  HostTensor Shaped(const TensorSpec& ts, const DimBinding& dims) const {
    HostTensor h;
    h.name = ts.name;
    h.dtype = ts.dtype;
    h.shape = task_.Shape(ts, dims);
    return h;
  }
  // Whether test data is generated and compared on the device (the plugin's buffer_fill and
  // buffer_compare, GateOptions::device_data).
  bool DeviceData() const {
    return opt_.device_data && api_->buffer_fill && api_->buffer_compare && api_->buffer_copy &&
           !device_data_failed_;
  }
  // Fills `t` on the device; false when the values came out all zero (the caller generates them
  // on the host instead, whose generator never hands out only zeros).
  Result<bool> FillOnDevice(const TensorSpec& ts, uint64_t seed, DeviceTensor* t) {
    htam_fill_request q{};
    q.struct_size = sizeof q;
    q.dtype = ts.dtype;
    q.count = uint64_t(t->numel());
    q.dist = ts.init.dist == InitSpec::Dist::kNormal    ? 0
             : ts.init.dist == InitSpec::Dist::kUniform ? 1
                                                        : 2;
    const bool is_float = ts.dtype == HTAM_F32 || ts.dtype == HTAM_F16 || ts.dtype == HTAM_BF16 ||
                          ts.dtype == HTAM_F64;
    q.round = !is_float || ts.init.dist == InitSpec::Dist::kRandint;
    q.a = ts.init.a;
    q.b = ts.init.b;
    q.seed = seed * 0x9E3779B97F4A7C15ull + 0x5bd1e995;
    q.num_special = int32_t(std::min<size_t>(ts.init.special.size(), 8));
    q.fraction = ts.init.special_fraction;
    for (int k = 0; k < q.num_special; ++k) q.special[k] = ts.init.special[size_t(k)];
    HTAM_RETURN_IF_ERROR(t->Fill(q));
    auto c = CompareOnDevice(*t, *t, 2);
    if (!c.ok()) return c.status();
    return !c->a_all_zero || q.count == 0;
  }
  Result<htam_compare_result> CompareOnDevice(const DeviceTensor& a, const DeviceTensor& b,
                                              int mode) {
    OpTimer t(&ops_, "compare");
    htam_compare_request q{};
    q.struct_size = sizeof q;
    q.dtype = a.dtype();
    q.count = uint64_t(a.numel());
    q.a = a.buffer();
    q.a_offset = a.guard();
    q.b = b.buffer();
    q.b_offset = b.guard();
    q.mode = mode;
    q.atol = task_.tolerance.atol;
    q.rtol = task_.tolerance.rtol;
    htam_compare_result r{};
    r.struct_size = sizeof r;
    r.first_mismatch = r.first_nonfinite = -1;
    HTAM_RETURN_IF_ERROR(
        ConsumeError(api_->buffer_compare(device_, &q, &r), "comparing on the device"));
    return r;
  }
  // CheckOutput (above) for tensors on the device: the same verdicts and the same words, from a
  // comparison that leaves the device only as counters and the elements a message names.
  Result<std::string> CheckOutputOnDevice(const DeviceTensor& c, const DeviceTensor& r,
                                          const std::string& where, bool hide = false) {
    HTAM_ASSIGN_OR_RETURN(htam_compare_result res, CompareOnDevice(c, r, 0));
    const Tolerance& tol = task_.tolerance;
    const int64_t n = c.numel();
    if (res.first_nonfinite >= 0) {
      const int64_t i = res.first_nonfinite;
      HTAM_ASSIGN_OR_RETURN(HostTensor ce, c.Element(i));
      HTAM_ASSIGN_OR_RETURN(HostTensor re, r.Element(i));
      const double cv = ce.At(0), rv = re.At(0);
      if (c.is_float() && IsPoison(ce, 0))
        return "output '" + c.name() + "' not written" + At(i, hide) + " (poison left)" + where;
      return "output '" + c.name() + "' has " + (std::isnan(cv) ? "NaN" : "Inf") + At(i, hide) +
             " where the reference has " + FormatNumber(rv) + where;
    }
    if (res.a_all_zero && res.b_any_nonzero)
      return "output '" + c.name() + "' is all zeros where the reference is not" + where;
    if (double(res.mismatches) > tol.bad_budget * double(n)) {
      const int64_t i = res.first_mismatch;
      HTAM_ASSIGN_OR_RETURN(HostTensor ce, c.Element(i));
      HTAM_ASSIGN_OR_RETURN(HostTensor re, r.Element(i));
      std::string count =
          hide ? FormatNumber(100.0 * double(res.mismatches) / double(n)) + "% of the elements"
               : std::to_string(res.mismatches) + " of " + std::to_string(n) + " elements";
      return count + " of '" + c.name() + "' outside tolerance (rtol " + FormatNumber(tol.rtol) +
             ", atol " + FormatNumber(tol.atol) + "); first" +
             (hide ? std::string() : " at element " + std::to_string(i)) + ": got " +
             FormatNumber(ce.At(0)) + ", expected " + FormatNumber(re.At(0)) + where;
    }
    return std::string();
  }
  // CheckSame (above) on the device.
  Result<std::string> CheckSameOnDevice(const DeviceTensor& a, const DeviceTensor& b, bool hide) {
    HTAM_ASSIGN_OR_RETURN(htam_compare_result res, CompareOnDevice(a, b, 1));
    if (res.mismatches == 0) return std::string();
    const int64_t i = res.first_mismatch;
    HTAM_ASSIGN_OR_RETURN(HostTensor x, a.Element(i));
    HTAM_ASSIGN_OR_RETURN(HostTensor y, b.Element(i));
    return "two calls with the same inputs disagree on '" + a.name() + "'" + At(i, hide) + ": " +
           FormatNumber(x.At(0)) + " vs " + FormatNumber(y.At(0));
  }
  // `local`: in the verifier's own memory, never shared with a runner (copies it keeps).
  Status MakeOutputs(const DimBinding& dims, TensorSet* dev, bool local = false) {
    for (const TensorSpec& ts : task_.outputs) {
      auto t = std::make_unique<DeviceTensor>(api_, local ? nullptr : sharer_, &pool_);
      HTAM_RETURN_IF_ERROR(t->Create(device_, Shaped(ts, dims), opt_.guard_bytes, &canary_));
      HTAM_RETURN_IF_ERROR(t->Poison());
      dev->push_back(std::move(t));
    }
    return Status::OK();
  }
  static std::vector<htam_tensor> Descs(const TensorSet& s) {
    std::vector<htam_tensor> d;
    for (const auto& t : s) d.push_back(t->desc());
    return d;
  }

  static std::vector<BoundTensor> Bound(const TensorSet& s) {
    std::vector<BoundTensor> d;
    for (const auto& t : s) d.push_back(t->Bound());
    return d;
  }

  // Classifies a failed stage of candidate (or reference) code. "" `extra` = during a call.
  Verdict Classify(const ExecOutcome& o, const std::string& where, const std::string& extra) {
    if (o.runner_died) return Verdict::Fail(OutcomeStatus::Crash, o.message + extra + where);
    if (o.code >= 0) {
      OutcomeStatus cls = o.code == HTAM_ERR_OUT_OF_MEMORY ? OutcomeStatus::ResourceLimit
                          : o.code == HTAM_ERR_TIMEOUT     ? OutcomeStatus::Timeout
                                                           : OutcomeStatus::Crash;
      std::string why = o.message + extra;
      if (o.code == HTAM_ERR_KERNEL_FAILED && o.kernel_rc != 0 && extra.empty())
        why = "htam_kernel returned " + std::to_string(o.kernel_rc) + where;
      else if (extra.empty())
        why = "htam_kernel: " + o.message;
      return Verdict::Fail(cls, why);
    }
    if (o.extra_threads) {
      g_keep_everything = g_keep_everything || sharer_ == nullptr;
      if (!extra.empty())
        return Verdict::Fail(OutcomeStatus::Nondeterministic,
                             "race: threads still running after timed calls");
      return Verdict::Fail(OutcomeStatus::Nondeterministic,
                           "race: htam_kernel returned while " + std::to_string(o.extra_threads) +
                               " thread(s) it started were still running; results depend on "
                               "timing" +
                               where);
    }
    if (o.children)
      return Verdict::Fail(OutcomeStatus::ResourceLimit,
                           "htam_kernel created child processes (fork)" + where);
    return Verdict{};
  }

  // One call; classifies failures.
  Verdict Call(CandidateExec* ex, const TensorSet& in, TensorSet& out, const std::string& where) {
    OpTimer t(&ops_, ex == ref_ ? "call reference" : "call candidate");
    ExecOutcome o = ex->Run(Bound(in), Bound(out));
    if (o.ok()) return Verdict{};
    return Classify(o, where, "");
  }

  Verdict CheckGuardsAndInputs(const TensorSet& in, const TensorSet& out, const Inputs* inputs,
                               const std::string& where) {
    for (const auto* set : {&in, &out}) {
      for (const auto& t : *set) {
        auto g = t->CheckGuards();
        if (!g.ok()) return Verdict::Fail(OutcomeStatus::InfraError, g.status().message());
        if (!g->empty())
          return Verdict::Fail(OutcomeStatus::Incorrect,
                               "wrote out of bounds of " +
                                   std::string(set == &in ? "input" : "output") + " '" + t->name() +
                                   "': " + *g + " the buffer" + where);
      }
    }
    for (size_t i = 0; inputs && i < in.size(); ++i) {
      bool same = true;
      if (i < inputs->pristine.size()) {
        auto c = CompareOnDevice(*in[i], *inputs->pristine[i], 2);
        if (!c.ok()) return Verdict::Fail(OutcomeStatus::InfraError, c.status().message());
        same = c->mismatches == 0;
      } else if (i < inputs->host.size()) {
        auto now = in[i]->Download();
        if (!now.ok()) return Verdict::Fail(OutcomeStatus::InfraError, now.status().message());
        same = now->bytes == inputs->host[i].bytes;
      }
      if (!same)
        return Verdict::Fail(OutcomeStatus::Incorrect, "modified input '" + in[i]->name() +
                                                           "' (inputs are read-only)" + where);
    }
    return Verdict{};
  }

  // Verification case `index` (of its shape) with inputs from `seed`.
  Verdict VerifyCase(CandidateExec* cand, const DimBinding& dims, uint64_t seed, size_t index,
                     const std::string& where, bool hide) {
    Inputs host_in;
    TensorSet in, out, run1_dev;
    const std::vector<HostTensor>* given = reference_->GivenInputs(false, index);
    Status st = MakeInputs(dims, seed, &host_in, &in, given);
    const bool on_device = !host_in.pristine.empty() || (in.empty() && !given && DeviceData());
    if (st.ok()) st = MakeOutputs(dims, &out);
    // The first call's outputs, kept on the device in the verifier's own memory.
    if (st.ok() && on_device) st = MakeOutputs(dims, &run1_dev, /*local=*/true);
    if (!st.ok()) return Verdict::Fail(OutcomeStatus::InfraError, st.message());
    // Candidate first (stale results of the reference cannot help it), outputs poisoned.
    Verdict v = Call(cand, in, out, where);
    if (!v.ok()) return v;
    v = CheckGuardsAndInputs(in, out, &host_in, where);
    if (!v.ok()) return v;
    std::vector<HostTensor> run1;
    for (size_t i = 0; i < out.size(); ++i) {
      if (on_device) {
        st = run1_dev[i]->CopyFrom(*out[i]);
      } else {
        auto h = out[i]->Download();
        if (!h.ok()) return Verdict::Fail(OutcomeStatus::InfraError, h.status().message());
        run1.push_back(std::move(*h));
      }
      if (st.ok()) st = out[i]->Poison();
      if (!st.ok()) return Verdict::Fail(OutcomeStatus::InfraError, st.message());
    }
    // Second call, same inputs: catches skipped work on repeated calls and races.
    v = Call(cand, in, out, where);
    if (!v.ok()) return v;
    v = CheckGuardsAndInputs(in, out, &host_in, where);
    if (!v.ok()) return v;
    // The reference last (golden outputs: computed by PyTorch beforehand).
    Expected expected;
    v = reference_->Outputs(dims, in, false, index, &expected, where);
    if (!v.ok()) return v;
    const TensorSet& ref_out = expected.device;
    for (size_t i = 0; i < out.size(); ++i) {
      std::string why, why2, same;
      if (on_device) {
        auto w1 = CheckOutputOnDevice(*run1_dev[i], *ref_out[i], where, hide);
        if (!w1.ok()) return Verdict::Fail(OutcomeStatus::InfraError, w1.status().message());
        if (!w1->empty()) return Verdict::WrongOutput(OutcomeStatus::Incorrect, *w1);
        auto w2 = CheckOutputOnDevice(*out[i], *ref_out[i], where, hide);
        auto sm = CheckSameOnDevice(*run1_dev[i], *out[i], hide);
        if (!w2.ok() || !sm.ok())
          return Verdict::Fail(OutcomeStatus::InfraError,
                               (!w2.ok() ? w2.status() : sm.status()).message());
        why2 = *w2;
        same = *sm;
      } else {
        auto r = expected.Output(i);
        auto c2 = out[i]->Download();
        if (!r.ok() || !c2.ok()) return Verdict::Fail(OutcomeStatus::InfraError, "download failed");
        why = CheckOutput(run1[i], *r, task_.tolerance, where, hide);
        if (!why.empty()) return Verdict::WrongOutput(OutcomeStatus::Incorrect, why);
        why2 = CheckOutput(*c2, *r, task_.tolerance, where, hide);
        same = CheckSame(run1[i], *c2, task_.tolerance, hide);
      }
      if (!same.empty() && !why2.empty() && why2.find("not written") != std::string::npos)
        return Verdict::WrongOutput(
            OutcomeStatus::Incorrect,
            "a repeated call with the same inputs did not compute its outputs: " + why2);
      if (!same.empty()) return Verdict::WrongOutput(OutcomeStatus::Nondeterministic, same + where);
      if (!why2.empty()) return Verdict::WrongOutput(OutcomeStatus::Incorrect, why2);
    }
    return Verdict{};
  }

  // Times `mod` over rotating input sets; when `check` is set, verifies every set's outputs (each
  // written by a timed call: the plugin poisons before every repetition) against the reference's.
  Verdict TimeAndVerify(CandidateExec* mod, const DimBinding& dims, TimingStats* stats, bool check,
                        GateResult* res) {
    const int sets = std::max(1, opt_.input_sets);
    const std::string who = check ? "candidate" : "baseline";
    Progress("prepare timing inputs (" + who + ")");
    std::vector<Inputs> host_in(sets);
    std::vector<TensorSet> in(sets), out(sets);
    // The baseline (the reference, in this process) is timed over buffers of this process, as a
    // runner's candidate is over its own: writes into memory opened from another process's
    // handle were up to 37 % slower on an H200, which inflated every candidate's speedup.
    const bool local = !check;
    for (int k = 0; k < sets; ++k) {
      Status st = MakeInputs(dims, MixSeed(opt_.seed_base, 7000 + k), &host_in[k], &in[k],
                             reference_->GivenInputs(true, size_t(k)), local);
      if (st.ok()) st = MakeOutputs(dims, &out[k], local);
      if (!st.ok()) return Verdict::Fail(OutcomeStatus::InfraError, st.message());
    }
    std::vector<BoundTensor> bin, bout;
    for (int k = 0; k < sets; ++k) {
      for (auto& t : in[k]) bin.push_back(t->Bound());
      for (auto& t : out[k]) bout.push_back(t->Bound());
    }
    htam_timing_request req{};
    req.struct_size = sizeof(req);
    req.num_sets = sets;
    req.num_inputs = int32_t(task_.inputs.size());
    req.num_outputs = int32_t(task_.outputs.size());
    req.warmup_reps = opt_.warmup_reps;
    req.warmup_ms = opt_.warmup_ms;
    req.repetitions = std::max(sets, opt_.repetitions);
    req.flush_bytes = opt_.flush_bytes;
    req.poison = 1;
    req.poison_byte = kPoisonByte;
    std::vector<double> reps(size_t(req.repetitions), 0.0);
    Progress("time " + who);
    htam_timing_result tr{};
    tr.struct_size = sizeof(tr);
    tr.rep_us = reps.data();
    tr.sm_clock_mhz = tr.mem_clock_mhz = -1;
    ExecOutcome o;
    {
      // Never while the background torch.compile measurement times on this host (the runner
      // never sees the lock: the verifier holds it around the call).
      SharedTimingLock lock(TimingLockPath(GoldenCacheRoot(opt_, *backend_)),
                            opt_.timing_lock_wait_s);
      if (lock.waited_out()) timing_note_ = lock.Note();
      turn_.Exclusive();  // nothing else on the device while this is timed
      o = mod->Time(req, bin, bout, &tr);
      turn_.Shared();
      if (timing_note_.empty()) timing_note_ = turn_.Note();
    }
    if (!o.ok()) return Classify(o, "", " (during timing)");
    if (tr.sm_clock_mhz > 0) fb::MutableProfile(res).sm_clock_mhz = tr.sm_clock_mhz;
    if (tr.mem_clock_mhz > 0) fb::MutableProfile(res).mem_clock_mhz = tr.mem_clock_mhz;
    for (int k = 0; k < sets; ++k) {
      Verdict v = CheckGuardsAndInputs(in[k], out[k], &host_in[k], " (during timing)");
      if (!v.ok()) return v;
    }
    if (check) {
      for (int k = 0; k < sets; ++k) {
        Progress("verify timed outputs, input set " + std::to_string(k));
        Expected expected;
        Verdict v = reference_->Outputs(dims, in[k], true, size_t(k), &expected, "");
        if (!v.ok()) return v;
        const bool given = expected.given != nullptr;
        const TensorSet& ref_out = expected.device;
        for (size_t i = 0; i < out[k].size() && !given && !host_in[k].pristine.empty(); ++i) {
          auto why =
              CheckOutputOnDevice(*out[k][i], *ref_out[i],
                                  " (output of a timed call, input set " + std::to_string(k) + ")");
          if (!why.ok()) return Verdict::Fail(OutcomeStatus::InfraError, why.status().message());
          if (!why->empty()) return Verdict::Fail(OutcomeStatus::Incorrect, *why);
        }
        for (size_t i = 0; i < out[k].size() && (given || host_in[k].pristine.empty()); ++i) {
          auto c = out[k][i]->Download();
          auto r = expected.Output(i);
          if (!c.ok() || !r.ok())
            return Verdict::Fail(OutcomeStatus::InfraError, "download failed");
          std::string why =
              CheckOutput(*c, *r, task_.tolerance,
                          " (output of a timed call, input set " + std::to_string(k) + ")");
          if (!why.empty()) return Verdict::Fail(OutcomeStatus::Incorrect, why);
        }
      }
    }
    *stats = Summarize(reps);
    return Verdict{};
  }

  // ---- the reference: what the candidate's outputs are compared with and what its speedup is
  // over. One interface with two kinds, the only code that tells them apart: the task's kernel,
  // run in this process (KernelReference), or golden data and a baseline figure computed
  // beforehand by PyTorch (GoldenReference, KernelBench tasks).

  // Expected outputs of one case: the reference kernel's, in this process's own memory, or given.
  struct Expected {
    TensorSet device;
    const std::vector<HostTensor>* given = nullptr;
    Result<HostTensor> Output(size_t i) const {
      return given ? Result<HostTensor>((*given)[i]) : device[i]->Download();
    }
  };

  class Reference {
   public:
    virtual ~Reference() = default;
    // Before the candidate is compiled (a profiling run, single_call, needs no expected outputs).
    virtual Verdict Prepare(GateResult* res) = 0;
    // Once the candidate compiled.
    virtual Verdict Load() = 0;
    // The inputs of verification case `i` (timing input set `i` when `timing`) when the
    // reference gives them; null: generated from the task's distributions.
    virtual const std::vector<HostTensor>* GivenInputs(bool timing, size_t i) const = 0;
    // The expected outputs for inputs `in` of that case.
    virtual Verdict Outputs(const DimBinding& dims, const TensorSet& in, bool timing, size_t i,
                            Expected* out, const std::string& where) = 0;
    // The baseline the speedup is over.
    virtual Verdict Baseline(const DimBinding& dims, TimingStats* stats, GateResult* res) = 0;
    // After the candidate was timed (work that must not overlap its timing).
    virtual void AfterTiming() {}
  };

  // The task's reference kernel, compiled and run in this process.
  class KernelReference : public Reference {
   public:
    KernelReference(Impl* gate, CandidateExec* exec, std::string source)
        : g_(gate), exec_(exec), source_(std::move(source)) {}
    Verdict Prepare(GateResult*) override {
      if (g_->opt_.single_call) return Verdict{};
      g_->Progress("compile reference");
      std::string diag;
      Status st = g_->Compile(exec_, source_, "reference", &diag, nullptr, nullptr);
      if (!st.ok())
        return Verdict::Fail(OutcomeStatus::InfraError,
                             "the task's reference does not compile: " + diag);
      compiled_ = true;
      return Verdict{};
    }
    Verdict Load() override {
      if (!compiled_) return Verdict{};
      ExecOutcome o = exec_->Load();
      if (!o.ok())
        return Verdict::Fail(OutcomeStatus::InfraError, "loading reference: " + o.message);
      return Verdict{};
    }
    const std::vector<HostTensor>* GivenInputs(bool, size_t) const override { return nullptr; }
    Verdict Outputs(const DimBinding& dims, const TensorSet& in, bool, size_t, Expected* out,
                    const std::string& where) override {
      Status mk = g_->MakeOutputs(dims, &out->device, /*local=*/true);
      if (!mk.ok()) return Verdict::Fail(OutcomeStatus::InfraError, mk.message());
      Verdict v = g_->Call(exec_, in, out->device, where);
      if (!v.ok()) return Verdict::Fail(OutcomeStatus::InfraError, "reference failed: " + v.reason);
      return Verdict{};
    }
    // Timed as the candidate was, or its figure kept from an earlier job of this worker.
    Verdict Baseline(const DimBinding& dims, TimingStats* stats, GateResult* res) override {
      if (!g_->opt_.time_baseline) return Verdict{};
      const std::string key = g_->BaselineKey(source_, dims);
      if (g_->ReusedBaseline(key, stats)) return Verdict{};
      Verdict v = g_->TimeAndVerify(exec_, dims, stats, false, res);
      if (!v.ok())
        return Verdict::Fail(OutcomeStatus::InfraError, "timing the reference failed: " + v.reason);
      g_->KeepBaseline(key, *stats);
      return Verdict{};
    }

   private:
    Impl* g_;
    CandidateExec* exec_;
    std::string source_;
    bool compiled_ = false;
  };

  // KernelBench: golden data for seeds 0..seeds-1 (verification) and 1000.. (timing input sets),
  // computed by PyTorch in a subprocess on a cache miss, and PyTorch's baseline figures.
  class GoldenReference : public Reference {
   public:
    explicit GoldenReference(Impl* gate) : g_(gate) {}
    Verdict Prepare(GateResult* res) override {
      const GateOptions& opt = g_->opt_;
      const char* name = g_->backend_->description().name;
      device_ = std::string(name ? name : "") == "cpu" ? "cpu" : "cuda";
      GoldenOptions go = MakeGoldenOptions(opt, *g_->backend_, device_);
      std::vector<uint64_t> verify;
      // With a seed pool, this job's seeds start at a place seed_base (drawn per job) picks.
      const uint64_t pool = opt.golden_seed_pool > 0 ? uint64_t(opt.golden_seed_pool) : 0;
      const uint64_t start = pool ? MixSeed(opt.seed_base, 0x5EED) % pool : 0;
      auto pick = [&](uint64_t i) { return pool ? (start + i) % pool : i; };
      if (!opt.single_call)
        for (int s = 0; s < opt.seeds; ++s) verify.push_back(pick(uint64_t(s)));
      const int sets = opt.single_call ? 1 : std::max(1, opt.input_sets);
      for (int k = 0; k < sets; ++k) timing_seeds_.push_back(1000 + pick(uint64_t(k)));
      golden_ = std::make_unique<KernelBenchGolden>(g_->task_, go);
      KernelBenchGolden& g = *golden_;
      g_->Progress("golden data (PyTorch)");
      Status st = g.Prepare(verify, timing_seeds_, !opt.single_call);
      res->golden_computed = g.helper_runs() > 0;
      if (!st.ok()) return Verdict::Fail(OutcomeStatus::InfraError, st.message());
      for (auto [seeds, cases] : {std::pair{&verify, &verify_}, {&timing_seeds_, &time_}}) {
        for (uint64_t s : *seeds) {
          auto c = g.Load(s);
          if (!c.ok()) return Verdict::Fail(OutcomeStatus::InfraError, c.status().message());
          cases->push_back(std::move(*c));
        }
      }
      if (!opt.single_call) {
        auto b = g.Baseline();
        if (!b.ok()) return Verdict::Fail(OutcomeStatus::InfraError, b.status().message());
        baseline_ = *b;
      }
      return Verdict{};
    }
    Verdict Load() override { return Verdict{}; }
    const std::vector<HostTensor>* GivenInputs(bool timing, size_t i) const override {
      const GoldenCase* c = Case(timing, i);
      return c ? &c->inputs : nullptr;
    }
    Verdict Outputs(const DimBinding&, const TensorSet&, bool timing, size_t i, Expected* out,
                    const std::string&) override {
      const GoldenCase* c = Case(timing, i);
      if (!c) return Verdict::Fail(OutcomeStatus::InfraError, "no golden data for this case");
      out->given = &c->outputs;
      return Verdict{};
    }
    // PyTorch eager's time (and torch.compile's, where measured) from the golden data.
    Verdict Baseline(const DimBinding&, TimingStats* stats, GateResult* res) override {
      stats->median = baseline_.eager_us;
      stats->iqr = baseline_.eager_spread_us;
      res->baseline_compile_us = baseline_.compile_us;
      res->baseline_note =
          "PyTorch eager on " + device_ +
          (baseline_.compile_us > 0 ? "; torch.compile measured" : "; " + baseline_.note);
      return Verdict{};
    }
    // torch.compile's figure, when still pending, in a detached process started once the
    // candidate is timed (never overlapping its timing; no verdict waits for it).
    void AfterTiming() override {
      if (golden_ && baseline_.compile_pending) golden_->MeasureCompileInBackground(timing_seeds_);
    }

   private:
    // The case `i` of its kind (rotating), or null when there is none.
    const GoldenCase* Case(bool timing, size_t i) const {
      const std::vector<GoldenCase>& cases = timing ? time_ : verify_;
      return cases.empty() ? nullptr : &cases[i % cases.size()];
    }
    Impl* g_;
    std::unique_ptr<KernelBenchGolden> golden_;
    std::vector<GoldenCase> verify_, time_;
    std::vector<uint64_t> timing_seeds_;
    TorchBaseline baseline_;
    std::string device_;
  };

  // What a kept baseline figure depends on: the reference, the task and shape, the device and the
  // timing settings.
  std::string BaselineKey(const std::string& ref_source, const DimBinding& dims) const {
    std::string k = CandidateKey("reference", ref_source) + "|" + task_.dir + "|" + DimsText(dims);
    for (double x : {double(opt_.device_index), double(opt_.repetitions), opt_.warmup_ms,
                     double(opt_.warmup_reps), double(opt_.input_sets), double(opt_.flush_bytes)})
      k += "|" + FormatNumber(x);
    return k + "|" + (backend_->description().name ? backend_->description().name : "");
  }
  bool ReusedBaseline(const std::string& key, TimingStats* stats) {
    double age = 0;
    if (opt_.baseline_reuse_s <= 0 || !opt_.baselines ||
        !opt_.baselines->Find(key, opt_.baseline_reuse_s, stats, &age))
      return false;
    baseline_note_ = "baseline timed " + FormatNumber(std::round(age * 10) / 10) +
                     " s earlier by this worker (eval.baseline_reuse_s)";
    return true;
  }
  void KeepBaseline(const std::string& key, const TimingStats& stats) {
    if (opt_.baseline_reuse_s > 0 && opt_.baselines) opt_.baselines->Keep(key, stats);
  }

  // One call of the candidate on the first seen shape (the run a profiler watches).
  GateResult SingleCall(GateResult res) {
    const DimBinding& dims = task_.seen_shapes.front();
    Inputs host_in;
    TensorSet in, out;
    Status st = MakeInputs(dims, MixSeed(opt_.seed_base, 9000), &host_in, &in,
                           reference_->GivenInputs(true, 0));
    if (st.ok()) st = MakeOutputs(dims, &out);
    if (!st.ok()) return Infra(res, st.message());
    Progress("single call");
    Verdict v = Call(cand_, in, out, "");
    res.status = v.status;
    res.diagnostics = v.ok() ? "single call (profiling run)" : v.reason;
    return res;
  }

  // sol_fraction: the time the task's bytes and FLOPs need at the device's measured ceilings
  // (16-bit tensor cores when an input is f16/bf16), over the candidate's median; and the floor
  // no honest result can beat. Inputs come from DRAM (the cache is flushed before every
  // repetition), but up to a last-level cache's worth of output may be written back only after
  // the window closes, so those bytes bound the roofline (sol_us) and not the floor: an honest
  // vectorized relu over 16 MiB on an H100 ran at 1.18x sol_us this way, and one over 64 MiB
  // (larger than the 50 MiB L2) at 40.3 us against 46.2 us of all its bytes at the copy rate.
  void SpeedOfLight(GateResult* res) {
    if (!api_->device_roofline || res->median_us <= 0) return;
    htam_roofline_report r{};
    r.struct_size = sizeof r;
    if (!ConsumeError(api_->device_roofline(device_, &r), "roofline").ok()) return;
    res->copy_bytes_per_s = r.copy_bytes_per_s;
    res->fp32_flops = r.fp32_flops;
    res->tensor16_flops = r.tensor16_flops;
    bool is16 = false;
    for (const auto& t : task_.inputs) is16 |= t.dtype == HTAM_F16 || t.dtype == HTAM_BF16;
    const double peak = is16 ? r.tensor16_flops : r.fp32_flops;
    auto time_us = [&](double bytes) {
      double us = 0;
      if (r.copy_bytes_per_s > 0) us = std::max(us, bytes / r.copy_bytes_per_s * 1e6);
      if (peak > 0) us = std::max(us, res->flops / peak * 1e6);
      return us;
    };
    res->sol_us = time_us(res->bytes);
    if (res->sol_us > 0) fb::MutableProfile(res).sol_fraction = float(res->sol_us / res->median_us);
    double out_bytes = 0;
    for (const auto& t : task_.outputs) {
      double n = double(htam_dtype_size(t.dtype));
      for (int64_t d : task_.Shape(t, task_.seen_shapes.front())) n *= double(d);
      out_bytes += n;
    }
    double cache = 0;  // the device's last-level cache (the first device's if none is named)
    const htam_backend_description& desc = backend_->description();
    for (int i = desc.num_devices - 1; i >= 0; --i)
      if (i == 0 || desc.devices[i].index == opt_.device_index) {
        cache = double(desc.devices[i].cache_bytes);
        break;
      }
    res->floor_us = time_us(std::max(0.0, res->bytes - std::min(out_bytes, cache)));
  }

  void ProfileCandidate(const DimBinding& dims, GateResult* res) {
    Inputs host_in;
    TensorSet in, out;
    if (!MakeInputs(dims, MixSeed(opt_.seed_base, 9000), &host_in, &in).ok()) return;
    if (!MakeOutputs(dims, &out).ok()) return;
    htam_profile_report rep{};
    rep.struct_size = sizeof(rep);
    rep.registers = rep.shared_bytes = rep.spill_bytes = -1;
    rep.dram_throughput = rep.sm_throughput = rep.occupancy = -1;
    rep.sm_clock_mhz = rep.mem_clock_mhz = -1;
    if (!cand_->Profile(Bound(in), Bound(out), &rep).ok()) return;
    fb::ProfileT& p = fb::MutableProfile(res);
    p.registers = rep.registers;
    p.shared_bytes = rep.shared_bytes;
    p.spill_bytes = rep.spill_bytes;
    p.dram_throughput = rep.dram_throughput;
    p.sm_throughput = rep.sm_throughput;
    p.occupancy = rep.occupancy;
    if (rep.sm_clock_mhz > 0) p.sm_clock_mhz = rep.sm_clock_mhz;
    if (rep.mem_clock_mhz > 0) p.mem_clock_mhz = rep.mem_clock_mhz;
  }

  BackendInstance* backend_;
  const PluginApi* api_;
  htam_device* device_;
  const TaskSpec& task_;
  GateOptions opt_;
  ProgressFn progress_;
  std::vector<uint8_t> canary_;
  OpTimes ops_;  // before pool_, which records into it until it is destroyed
  BufferPool pool_;
  DeviceLock turn_;  // the device: shared while this job works on it, exclusive while timing  //
                     // device buffers of this job's tensors (declared before any tensor member)
  CandidateExec* cand_ = nullptr;         // where the candidate runs (this process or the runner)
  CandidateExec* ref_ = nullptr;          // the reference, always in this process
  CandidateExec* sharer_ = nullptr;       // the runner, when buffers are shared with one
  std::unique_ptr<Reference> reference_;  // made by Run
  bool device_data_failed_ = false;
  std::string data_note_;
  std::string timing_note_;    // a timed phase did not get the timing lock in time
  std::string baseline_note_;  // the baseline came from an earlier job of this process
  std::vector<fb::StageTimeT> stage_ms_;
  std::string stage_name_;
  std::chrono::steady_clock::time_point stage_start_;
};

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

std::string DeviceLockPathFor(const GateOptions& opt, const BackendInstance& backend) {
  if (opt.device_index < 0 || opt.single_call) return std::string();
  return DeviceLockPath(GoldenCacheRoot(opt, backend),
                        backend.description().name ? backend.description().name : "",
                        opt.device_index);
}

std::string GoldenCacheRoot(const GateOptions& opt, const BackendInstance& backend) {
  if (!opt.golden_cache_dir.empty()) return opt.golden_cache_dir;
  if (!backend.host().cache_dir.empty()) return backend.host().cache_dir + "/kernelbench";
  return "/tmp/htam-kernelbench-" + std::to_string(getuid());
}

GoldenOptions MakeGoldenOptions(const GateOptions& opt, const BackendInstance& backend,
                                const std::string& device) {
  GoldenOptions go;
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
