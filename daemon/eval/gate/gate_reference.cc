// The reference of the gate (gate_impl.h): the task's kernel run in this process, or
// KernelBench's golden data and PyTorch's baseline figures.
#include <algorithm>
#include <memory>
#include <utility>

#include "daemon/eval/gate/gate_impl.h"
#include "daemon/eval/gate/tensor_data.h"
#include "daemon/eval/kernelbench/kernelbench.h"

namespace htam {
namespace {

using fb::OutcomeStatus;
using gate_detail::TensorSet;

}  // namespace

// The task's reference kernel, compiled and run in this process.
class Gate::Impl::KernelReference : public Gate::Impl::Reference {
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
    if (!o.ok()) return Verdict::Fail(OutcomeStatus::InfraError, "loading reference: " + o.message);
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
class Gate::Impl::GoldenReference : public Gate::Impl::Reference {
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

std::unique_ptr<Gate::Impl::Reference> Gate::Impl::MakeKernelReference(CandidateExec* exec,
                                                                       std::string source) {
  return std::make_unique<KernelReference>(this, exec, std::move(source));
}

std::unique_ptr<Gate::Impl::Reference> Gate::Impl::MakeGoldenReference() {
  return std::make_unique<GoldenReference>(this);
}

}  // namespace htam
