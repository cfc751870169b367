// Host-side tensors of the evaluation host: seeded input generation per the task's distribution
// (with special values; never all zeros), dtype conversions (f16/bf16), element access.
// Thread-safety: values; GenerateInput is safe to call from several threads (its process-wide cache
// of generated inputs takes a lock) and fills large tensors with several threads of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/eval/gate/task_spec.h"
#include "htam/kernel_abi.h"

namespace htam {

struct HostTensor {
  std::string name;
  htam_dtype dtype = HTAM_F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const;
  uint64_t nbytes() const { return bytes.size(); }
  // Element i converted to double (f16/bf16 widened, bool 0/1).
  double At(int64_t i) const;
  void Set(int64_t i, double v);
  bool IsFloat() const;
};

// A zeroed tensor of that dtype and shape.
HostTensor MakeTensor(const std::string& name, htam_dtype dtype, const std::vector<int64_t>& shape);

// Fills an input from its InitSpec with a deterministic generator seeded by `seed` (independent
// streams per 64Ki-element chunk, filled in parallel: the values depend on the seed only). Special
// values replace about special_fraction of the elements (at least one when the fraction is > 0).
// A result that would be all zeros gets non-zero elements. The same (spec, shape, seed) again in
// this process is served from a bounded cache (a copy).
HostTensor GenerateInput(const TensorSpec& spec, const std::vector<int64_t>& shape, uint64_t seed);

// Elements [lo, hi) converted to double into out[0 .. hi-lo) (a typed loop, no per-element
// dispatch: the gate compares outputs through it).
void ReadAsDouble(const HostTensor& t, int64_t lo, int64_t hi, double* out);

// The gate's seed mixing: the seeds of a job's cases, input tensors and timing sets.
uint64_t MixSeed(uint64_t a, uint64_t b);
// A number as verification diagnostics print it (7 significant digits).
std::string FormatNumber(double v);
// Bytes as GiB with two decimals, as memory messages print them ("3.25").
std::string FormatGiB(double bytes);

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);

// Fills a row-major htam_tensor descriptor (strides in elements) for data at `data`.
htam_tensor Describe(const HostTensor& t, void* data);

}  // namespace htam
