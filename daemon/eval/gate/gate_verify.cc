// Verification of the gate (gate_impl.h): one case's two calls and their comparison with the
// reference (on the device or the host), failure classification, guard bands and read-only
// inputs. Each check says which hack it stops.
#include <cmath>

#include "daemon/eval/gate/compare.h"
#include "daemon/eval/gate/gate_impl.h"
#include "daemon/eval/gate/tensor_data.h"

namespace htam {
namespace {

using fb::OutcomeStatus;
using gate_detail::At;
using gate_detail::CheckOutput;
using gate_detail::CheckSame;
using gate_detail::DeviceTensor;
using gate_detail::g_keep_everything;
using gate_detail::Inputs;
using gate_detail::IsPoison;
using gate_detail::OpTimer;
using gate_detail::TensorSet;
using gate_detail::Verdict;

}  // namespace

Result<htam_compare_result> Gate::Impl::CompareOnDevice(const DeviceTensor& a,
                                                        const DeviceTensor& b, int mode) {
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
Result<std::string> Gate::Impl::CheckOutputOnDevice(const DeviceTensor& c, const DeviceTensor& r,
                                                    const std::string& where, bool hide) {
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
Result<std::string> Gate::Impl::CheckSameOnDevice(const DeviceTensor& a, const DeviceTensor& b,
                                                  bool hide) {
  HTAM_ASSIGN_OR_RETURN(htam_compare_result res, CompareOnDevice(a, b, 1));
  if (res.mismatches == 0) return std::string();
  const int64_t i = res.first_mismatch;
  HTAM_ASSIGN_OR_RETURN(HostTensor x, a.Element(i));
  HTAM_ASSIGN_OR_RETURN(HostTensor y, b.Element(i));
  return "two calls with the same inputs disagree on '" + a.name() + "'" + At(i, hide) + ": " +
         FormatNumber(x.At(0)) + " vs " + FormatNumber(y.At(0));
}

Verdict Gate::Impl::Classify(const ExecOutcome& o, const std::string& where,
                             const std::string& extra) {
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

Verdict Gate::Impl::Call(CandidateExec* ex, const TensorSet& in, TensorSet& out,
                         const std::string& where) {
  OpTimer t(&ops_, ex == ref_ ? "call reference" : "call candidate");
  ExecOutcome o = ex->Run(Bound(in), Bound(out));
  if (o.ok()) return Verdict{};
  return Classify(o, where, "");
}

Verdict Gate::Impl::CheckGuardsAndInputs(const TensorSet& in, const TensorSet& out,
                                         const Inputs* inputs, const std::string& where) {
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
      return Verdict::Fail(OutcomeStatus::Incorrect,
                           "modified input '" + in[i]->name() + "' (inputs are read-only)" + where);
  }
  return Verdict{};
}

Verdict Gate::Impl::VerifyCase(CandidateExec* cand, const DimBinding& dims, uint64_t seed,
                               size_t index, const std::string& where, bool hide) {
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

}  // namespace htam
