// Timing of the gate (gate_impl.h): the candidate and the baseline timed over rotating input
// sets under the host-wide timing lock, a kept baseline figure, the profiler's one call and
// the speed of light.
#include <algorithm>
#include <cmath>

#include "base/hash.h"
#include "daemon/eval/gate/compare.h"
#include "daemon/eval/gate/gate_impl.h"
#include "daemon/eval/gate/stats.h"
#include "daemon/eval/gate/tensor_data.h"
#include "daemon/eval/gate/timing_lock.h"

namespace htam {
namespace {

using fb::OutcomeStatus;
using gate_detail::CheckOutput;
using gate_detail::Inputs;
using gate_detail::kPoisonByte;
using gate_detail::TensorSet;
using gate_detail::Verdict;

}  // namespace

Verdict Gate::Impl::TimeAndVerify(CandidateExec* mod, const DimBinding& dims, TimingStats* stats,
                                  bool check, GateResult* res) {
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
    SharedTimingLock lock(TimingLockPath(DeviceLockDir(opt_, *backend_)),
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
        if (!c.ok() || !r.ok()) return Verdict::Fail(OutcomeStatus::InfraError, "download failed");
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

std::string Gate::Impl::BaselineKey(const std::string& ref_source, const DimBinding& dims) const {
  std::string k = CandidateKey("reference", ref_source) + "|" + task_.dir + "|" + DimsText(dims);
  for (double x : {double(opt_.device_index), double(opt_.repetitions), opt_.warmup_ms,
                   double(opt_.warmup_reps), double(opt_.input_sets), double(opt_.flush_bytes)})
    k += "|" + FormatNumber(x);
  return k + "|" + (backend_->description().name ? backend_->description().name : "");
}

bool Gate::Impl::ReusedBaseline(const std::string& key, TimingStats* stats) {
  double age = 0;
  if (opt_.baseline_reuse_s <= 0 || !opt_.baselines ||
      !opt_.baselines->Find(key, opt_.baseline_reuse_s, stats, &age))
    return false;
  baseline_note_ = "baseline timed " + FormatNumber(std::round(age * 10) / 10) +
                   " s earlier by this worker (eval.baseline_reuse_s)";
  return true;
}

void Gate::Impl::KeepBaseline(const std::string& key, const TimingStats& stats) {
  if (opt_.baseline_reuse_s > 0 && opt_.baselines) opt_.baselines->Keep(key, stats);
}

GateResult Gate::Impl::SingleCall(GateResult res) {
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
void Gate::Impl::SpeedOfLight(GateResult* res) {
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

void Gate::Impl::ProfileCandidate(const DimBinding& dims, GateResult* res) {
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

}  // namespace htam
