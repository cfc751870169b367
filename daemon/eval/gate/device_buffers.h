// The gate's test data on the device: the buffers a job's cases and timing sets reuse (BufferPool),
// a tensor in one of them with its guard bands (DeviceTensor), and what a call's inputs must still
// be afterwards (Inputs). Used by the gate (gate_impl.h), which generates the data, verifies with
// it and times on it. Thread-safety: a pool and its tensors belong to one job on one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/eval/gate/tensor_data.h"
#include "daemon/eval/runner/exec.h"

namespace htam::gate_detail {

inline constexpr uint8_t kPoisonByte = 0xFF;  // NaN in f32, f64, f16 and bf16

// Set once a candidate left threads running: from then on nothing is freed or unloaded (those
// threads may still write to the buffers or execute the module's code); the worker process ends
// after the job anyway.
inline std::atomic<bool> g_keep_everything{false};

// Wall time of the gate's own operations, summed by name (GateResult::op_ms).
using OpTimes = std::map<std::string, double>;
class OpTimer {
 public:
  OpTimer(OpTimes* t, const char* name)
      : t_(t), name_(name), start_(std::chrono::steady_clock::now()) {}
  ~OpTimer() {
    (*t_)[name_] +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
            .count();
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpTimes* t_;
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

// Device buffers reused across the cases and timing sets of one job (GateOptions::
// buffer_pool_bytes): a job's cases share a few shapes, and every buffer a runner allocates costs
// a round trip, an export and an IPC mapping. A buffer goes back only to a tensor of the same kind
// (shared with the runner, or the verifier's own: a buffer that held pristine inputs or expected
// outputs never reaches the runner) and the same size. Before any call sees a reused buffer its
// guards are written again, an input is filled again and an output poisoned, exactly as a new one.
// The pool ends with the job (Gate::Evaluate), before the runner's reset.
class BufferPool {
 public:
  BufferPool(const PluginApi* api, uint64_t cap_bytes, OpTimes* ops)
      : api_(api), cap_(cap_bytes), ops_(ops) {}
  OpTimes* ops() { return ops_; }
  ~BufferPool() { Clear(); }
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // An idle buffer of exactly `bytes` and the same kind, else a new one (after freeing every idle
  // buffer when the device is out of memory).
  Result<htam_buffer*> Get(htam_device* dev, CandidateExec* sharer, uint64_t bytes) {
    if (!g_keep_everything) {
      for (size_t i = 0; i < idle_.size(); ++i) {
        if (idle_[i].sharer != sharer || idle_[i].bytes != bytes) continue;
        htam_buffer* b = idle_[i].buf;
        idle_bytes_ -= bytes;
        idle_.erase(idle_.begin() + std::ptrdiff_t(i));
        ++reused_;
        return b;
      }
    }
    auto b = Allocate(dev, sharer, bytes);
    if (!b.ok() && b.status().code() == Status::Code::kResourceExhausted && !idle_.empty()) {
      Clear();
      b = Allocate(dev, sharer, bytes);
    }
    return b;
  }
  // Keeps `b` for the next tensor of its kind and size, or frees it past the pool's size.
  void Put(CandidateExec* sharer, uint64_t bytes, htam_buffer* b) {
    if (g_keep_everything) return;  // threads of a candidate may still use it: never again
    if (idle_bytes_ + bytes > cap_) {
      Free(sharer, b);
      return;
    }
    idle_.push_back({sharer, bytes, b});
    idle_bytes_ += bytes;
  }
  size_t reused() const { return reused_; }

 private:
  Result<htam_buffer*> Allocate(htam_device* dev, CandidateExec* sharer, uint64_t bytes) {
    OpTimer t(ops_, sharer ? "allocate shared" : "allocate");
    if (sharer) return sharer->Allocate(dev, bytes);
    htam_buffer* b = nullptr;
    HTAM_RETURN_IF_ERROR(
        ConsumeError(api_->buffer_alloc(dev, bytes, &b), "allocating device buffer"));
    return b;
  }
  void Free(CandidateExec* sharer, htam_buffer* b) {
    OpTimer t(ops_, "free");
    if (sharer && sharer->Allocated(b)) {
      // The runner's buffer: this process's view goes first, then the runner frees it.
      if (!g_keep_everything) api_->buffer_free(b);
      sharer->Forget(b);
      return;
    }
    if (sharer) sharer->Forget(b);
    if (!g_keep_everything) api_->buffer_free(b);
  }
  void Clear() {
    for (const Idle& e : idle_) Free(e.sharer, e.buf);
    idle_.clear();
    idle_bytes_ = 0;
  }

  struct Idle {
    CandidateExec* sharer;
    uint64_t bytes;
    htam_buffer* buf;
  };
  const PluginApi* api_;
  uint64_t cap_;
  OpTimes* ops_;
  std::vector<Idle> idle_;
  uint64_t idle_bytes_ = 0;
  size_t reused_ = 0;
};

// A tensor in device memory, between two guard regions filled with a per-job canary pattern.
class DeviceTensor {
 public:
  DeviceTensor(const PluginApi* api, CandidateExec* sharer, BufferPool* pool)
      : api_(api), sharer_(sharer), pool_(pool) {}
  ~DeviceTensor() {
    if (buf_) pool_->Put(sharer_, bytes_ + 2 * guard_, buf_);
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  Status Create(htam_device* dev, const HostTensor& shape_of, uint64_t guard,
                const std::vector<uint8_t>* canary) {
    guard_ = guard;
    bytes_ = uint64_t(shape_of.numel()) * uint64_t(htam_dtype_size(shape_of.dtype));
    host_ = shape_of;  // name, dtype and shape; no data kept here
    host_.bytes.clear();
    host_.bytes.shrink_to_fit();
    canary_ = canary;
    HTAM_ASSIGN_OR_RETURN(buf_, pool_->Get(dev, sharer_, bytes_ + 2 * guard_));
    if (guard_) {
      OpTimer t(pool_->ops(), "write guards");
      HTAM_RETURN_IF_ERROR(
          ConsumeError(api_->copy_to_device(buf_, 0, canary_->data(), guard_), "writing guard"));
      HTAM_RETURN_IF_ERROR(ConsumeError(
          api_->copy_to_device(buf_, guard_ + bytes_, canary_->data() + guard_, guard_),
          "writing guard"));
    }
    desc_ = Describe(shape_of, static_cast<uint8_t*>(api_->buffer_address(buf_)) + guard_);
    return Status::OK();
  }
  Status Upload(const HostTensor& t) {
    OpTimer u(pool_->ops(), "upload");
    return ConsumeError(api_->copy_to_device(buf_, guard_, t.bytes.data(), bytes_), "upload");
  }
  Status Poison() {
    OpTimer t(pool_->ops(), "poison");
    return ConsumeError(api_->memset(buf_, guard_, kPoisonByte, bytes_), "poison");
  }
  Result<HostTensor> Download() const {
    OpTimer d(pool_->ops(), "download");
    HostTensor t = host_;
    t.bytes.resize(bytes_);
    HTAM_RETURN_IF_ERROR(
        ConsumeError(api_->copy_to_host(t.bytes.data(), buf_, guard_, bytes_), "download"));
    return t;
  }
  // "" when both guards hold their canary; else which side was overwritten.
  Result<std::string> CheckGuards() const {
    if (!guard_) return std::string();
    OpTimer t(pool_->ops(), "check guards");
    std::vector<uint8_t> g(guard_);
    HTAM_RETURN_IF_ERROR(ConsumeError(api_->copy_to_host(g.data(), buf_, 0, guard_), "guard"));
    size_t before = 0;
    for (size_t i = 0; i < guard_; ++i) before += g[i] != (*canary_)[i];
    HTAM_RETURN_IF_ERROR(
        ConsumeError(api_->copy_to_host(g.data(), buf_, guard_ + bytes_, guard_), "guard"));
    size_t after = 0;
    for (size_t i = 0; i < guard_; ++i) after += g[i] != (*canary_)[guard_ + i];
    if (!before && !after) return std::string();
    std::string s;
    if (before) s += std::to_string(before) + " bytes before";
    if (after) s += std::string(s.empty() ? "" : " and ") + std::to_string(after) + " bytes after";
    return s;
  }
  // Element i alone, as a one-element host tensor (messages about a device-side comparison).
  Result<HostTensor> Element(int64_t i) const {
    HostTensor t = MakeTensor(host_.name, host_.dtype, {1});
    HTAM_RETURN_IF_ERROR(
        ConsumeError(api_->copy_to_host(t.bytes.data(), buf_, guard_ + uint64_t(i) * t.bytes.size(),
                                        t.bytes.size()),
                     "download"));
    return t;
  }
  Status Fill(const htam_fill_request& req) {
    OpTimer t(pool_->ops(), "fill");
    return ConsumeError(api_->buffer_fill(buf_, guard_, &req), "generating inputs on the device");
  }
  // This tensor's elements from `src` (same shape), on the device.
  Status CopyFrom(const DeviceTensor& src) {
    OpTimer t(pool_->ops(), "copy");
    return ConsumeError(api_->buffer_copy(buf_, guard_, src.buf_, src.guard_, bytes_),
                        "copying on the device");
  }
  htam_buffer* buffer() const { return buf_; }
  uint64_t guard() const { return guard_; }
  int64_t numel() const { return host_.numel(); }
  htam_dtype dtype() const { return host_.dtype; }
  bool is_float() const { return host_.IsFloat(); }
  const htam_tensor& desc() const { return desc_; }
  htam_tensor& desc() { return desc_; }
  BoundTensor Bound() const { return BoundTensor{buf_, guard_, desc_}; }
  const std::string& name() const { return host_.name; }

 private:
  const PluginApi* api_;
  CandidateExec* sharer_;  // the runner that may have mapped this buffer (told before the free)
  BufferPool* pool_;       // where the buffer comes from and goes back to
  htam_buffer* buf_ = nullptr;
  uint64_t guard_ = 0, bytes_ = 0;
  HostTensor host_;
  const std::vector<uint8_t>* canary_ = nullptr;
  htam_tensor desc_{};
};

using TensorSet = std::vector<std::unique_ptr<DeviceTensor>>;

// What a call's inputs must still be afterwards: host copies, or (inputs generated on the device)
// pristine device copies in the verifier's own memory, never shared with the runner.
struct Inputs {
  std::vector<HostTensor> host;
  TensorSet pristine;
};

}  // namespace htam::gate_detail
