// Input generation of the gate (gate_impl.h): test data from the task's distributions on the
// device where the plugin can, else on the host, or given (golden data); output buffers.
#include <algorithm>
#include <memory>

#include "daemon/eval/gate/gate_impl.h"
#include "daemon/eval/gate/tensor_data.h"

namespace htam {
namespace {

using gate_detail::DeviceTensor;
using gate_detail::Inputs;
using gate_detail::OpTimer;
using gate_detail::TensorSet;

}  // namespace

Status Gate::Impl::MakeInputs(const DimBinding& dims, uint64_t seed, Inputs* inputs, TensorSet* dev,
                              const std::vector<HostTensor>* given, bool local) {
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

HostTensor Gate::Impl::Shaped(const TensorSpec& ts, const DimBinding& dims) const {
  HostTensor h;
  h.name = ts.name;
  h.dtype = ts.dtype;
  h.shape = task_.Shape(ts, dims);
  return h;
}

bool Gate::Impl::DeviceData() const {
  return opt_.device_data && api_->buffer_fill && api_->buffer_compare && api_->buffer_copy &&
         !device_data_failed_;
}

Result<bool> Gate::Impl::FillOnDevice(const TensorSpec& ts, uint64_t seed, DeviceTensor* t) {
  htam_fill_request q{};
  q.struct_size = sizeof q;
  q.dtype = ts.dtype;
  q.count = uint64_t(t->numel());
  q.dist = ts.init.dist == InitSpec::Dist::kNormal    ? 0
           : ts.init.dist == InitSpec::Dist::kUniform ? 1
                                                      : 2;
  const bool is_float =
      ts.dtype == HTAM_F32 || ts.dtype == HTAM_F16 || ts.dtype == HTAM_BF16 || ts.dtype == HTAM_F64;
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

Status Gate::Impl::MakeOutputs(const DimBinding& dims, TensorSet* dev, bool local) {
  for (const TensorSpec& ts : task_.outputs) {
    auto t = std::make_unique<DeviceTensor>(api_, local ? nullptr : sharer_, &pool_);
    HTAM_RETURN_IF_ERROR(t->Create(device_, Shaped(ts, dims), opt_.guard_bytes, &canary_));
    HTAM_RETURN_IF_ERROR(t->Poison());
    dev->push_back(std::move(t));
  }
  return Status::OK();
}

std::vector<BoundTensor> Gate::Impl::Bound(const TensorSet& s) {
  std::vector<BoundTensor> d;
  for (const auto& t : s) d.push_back(t->Bound());
  return d;
}

}  // namespace htam
