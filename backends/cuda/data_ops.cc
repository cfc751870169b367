// Test data on the device; see data_ops.h.
#include "backends/cuda/data_ops.h"

#include <climits>
#include <cstring>

namespace htam::cuda {
namespace {

// Device code: no headers (NVRTC), so half/bfloat16 conversions are spelled out with the same
// rounding as the host's (daemon/eval/gate/tensor_data.cc): round to nearest, ties to even.
constexpr const char* kDataSource = R"(
typedef unsigned long long u64;
typedef long long i64;

struct FillArgs {  // = htam_fill_request from dtype on
  int dtype; u64 count; int dist; int round; double a, b; u64 seed; int num_special;
  double fraction; double special[8];
};
struct CompareArgs {
  int dtype; u64 count; int mode; double atol, rtol;
};
struct Result {
  u64 mismatches, first_mismatch, first_nonfinite;
  unsigned not_all_zero, any_nonzero;
};

__device__ u64 mix(u64 z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ double u01(u64 h) { return (double)(h >> 11) * (1.0 / 9007199254740992.0); }

__device__ float half_to_float(unsigned short h) {
  unsigned sign = (unsigned)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) { bits = sign; }
    else { int e = -1; do { ++e; man <<= 1; } while ((man & 0x400) == 0);
           bits = sign | (unsigned)(127 - 15 - e) << 23 | (man & 0x3ff) << 13; }
  } else if (exp == 31) { bits = sign | 0x7f800000u | man << 13; }
  else { bits = sign | (exp - 15 + 127) << 23 | man << 13; }
  return __uint_as_float(bits);
}
__device__ unsigned short float_to_half(float f) {
  unsigned x = __float_as_uint(f);
  unsigned short sign = (unsigned short)((x >> 16) & 0x8000);
  unsigned exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);
  int e = (int)exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    man |= 0x800000;
    unsigned shift = (unsigned)(14 - e), half = man >> shift;
    unsigned rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | (unsigned short)half;
  }
  unsigned half = (unsigned)e << 10 | man >> 13, rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return sign | (unsigned short)half;
}
__device__ float bf16_to_float(unsigned short b) { return __uint_as_float((unsigned)b << 16); }
__device__ unsigned short float_to_bf16(float f) {
  unsigned x = __float_as_uint(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (unsigned short)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (unsigned short)(x >> 16);
}

// htam_dtype: F32 0, F16 1, BF16 2, F64 3, I32 4, I64 5, U8 6, I8 7, BOOL 8
__device__ double get(const unsigned char* p, u64 i, int t) {
  switch (t) {
    case 0: return ((const float*)p)[i];
    case 1: return half_to_float(((const unsigned short*)p)[i]);
    case 2: return bf16_to_float(((const unsigned short*)p)[i]);
    case 3: return ((const double*)p)[i];
    case 4: return ((const int*)p)[i];
    case 5: return (double)((const i64*)p)[i];
    case 6: return p[i];
    case 7: return (signed char)p[i];
    default: return p[i] ? 1.0 : 0.0;
  }
}
__device__ void put(unsigned char* p, u64 i, int t, double v) {
  switch (t) {
    case 0: ((float*)p)[i] = (float)v; return;
    case 1: ((unsigned short*)p)[i] = float_to_half((float)v); return;
    case 2: ((unsigned short*)p)[i] = float_to_bf16((float)v); return;
    case 3: ((double*)p)[i] = v; return;
    case 4: ((int*)p)[i] = (int)v; return;
    case 5: ((i64*)p)[i] = (i64)v; return;
    case 6: p[i] = (unsigned char)(int)v; return;
    case 7: p[i] = (unsigned char)(signed char)(int)v; return;
    default: p[i] = v != 0 ? 1 : 0; return;
  }
}
__device__ bool same_bits(const unsigned char* a, const unsigned char* b, u64 i, int t) {
  switch (t) {
    case 3: case 5: return ((const u64*)a)[i] == ((const u64*)b)[i];
    case 0: case 4: return ((const unsigned*)a)[i] == ((const unsigned*)b)[i];
    case 1: case 2: return ((const unsigned short*)a)[i] == ((const unsigned short*)b)[i];
    default: return a[i] == b[i];
  }
}

extern "C" __global__ void htam_fill(unsigned char* p, FillArgs f) {
  const u64 stride = (u64)gridDim.x * blockDim.x;
  const double lo = ceil(f.a), hi = floor(f.b), span = hi >= lo ? hi - lo + 1 : 1;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < f.count; i += stride) {
    const u64 h = mix(f.seed ^ (i * 0xD1B54A32D192ED03ull));
    double v;
    if (f.dist == 0) {
      double u1 = 1.0 - u01(h), u2 = u01(mix(h ^ 0x632BE59BD9B4E019ull));
      v = f.a + f.b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    } else if (f.dist == 1) {
      v = f.a + (f.b - f.a) * u01(h);
    } else {
      v = lo + floor(u01(h) * span);
      if (v > hi && hi >= lo) v = hi;
    }
    if (f.round && f.dist != 2) v = round(v);
    if (f.num_special > 0) {  // as backends/common/data_ops_host.h FillValue
      const u64 s = mix(h ^ 0x5851F42D4C957F2Dull);
      if (u01(s) < f.fraction) v = f.special[(s >> 7) % (u64)f.num_special];
    }
    put(p, i, f.dtype, v);
  }
}

extern "C" __global__ void htam_compare(const unsigned char* a, const unsigned char* b,
                                        CompareArgs c, Result* r) {
  const u64 stride = (u64)gridDim.x * blockDim.x;
  u64 bad = 0, first_bad = ~0ull, first_nf = ~0ull;
  unsigned nonzero_a = 0, nonzero_b = 0;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < c.count; i += stride) {
    // not_all_zero / any_nonzero in every mode: the gate's fill check reads them in mode 2.
    const double x = get(a, i, c.dtype), y = get(b, i, c.dtype);
    nonzero_a |= x != 0;
    nonzero_b |= y != 0;
    if (c.mode == 2) {
      if (!same_bits(a, b, i, c.dtype)) { ++bad; if (i < first_bad) first_bad = i; }
      continue;
    }
    if (c.mode == 1) {
      if ((isnan(x) && isnan(y)) || x == y) continue;
      if (isfinite(x) && isfinite(y) && fabs(x - y) <= c.atol + c.rtol * fabs(x)) continue;
      ++bad; if (i < first_bad) first_bad = i;
      continue;
    }
    if (!isfinite(x)) {
      bool same = (isnan(x) && isnan(y)) || (isinf(x) && x == y);
      if (!same && i < first_nf) first_nf = i;
      continue;
    }
    if (!isfinite(y) || fabs(x - y) > c.atol + c.rtol * fabs(y)) {
      ++bad; if (i < first_bad) first_bad = i;
    }
  }
  if (bad) { atomicAdd(&r->mismatches, bad); atomicMin(&r->first_mismatch, first_bad); }
  if (first_nf != ~0ull) atomicMin(&r->first_nonfinite, first_nf);
  if (nonzero_a) atomicOr(&r->not_all_zero, 1u);
  if (nonzero_b) atomicOr(&r->any_nonzero, 1u);
}
)";

struct FillArgs {
  int dtype;
  unsigned long long count;
  int dist;
  int round;
  double a, b;
  unsigned long long seed;
  int num_special;
  double fraction;
  double special[8];
};
struct CompareArgs {
  int dtype;
  unsigned long long count;
  int mode;
  double atol, rtol;
};
struct DeviceResult {
  unsigned long long mismatches, first_mismatch, first_nonfinite;
  unsigned not_all_zero, any_nonzero;
};

constexpr unsigned kThreads = 256;

unsigned Blocks(unsigned long long count) {
  unsigned long long b = (count + kThreads - 1) / kThreads;
  return unsigned(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

DataOps::~DataOps() {
  if (result_) cudaFree(result_);
}

Status DataOps::Ensure(cudaStream_t stream) {
  (void)stream;
  if (module_) return Status::OK();
  if (!error_.empty()) return Status::Unavailable(error_);
  auto compiled = NvrtcCompile(kDataSource, "htam_data.cu", arch_, {});
  if (!compiled.ok() || !compiled->ok) {
    error_ = "test-data kernels do not compile: " +
             (compiled.ok() ? compiled->log : compiled.status().ToString());
    return Status::Unavailable(error_);
  }
  auto m = std::make_unique<NvrtcModule>();
  if (Status s = m->Load(compiled->cubin); !s.ok()) {
    error_ = "test-data kernels do not load: " + s.ToString();
    return Status::Unavailable(error_);
  }
  HTAM_RETURN_IF_ERROR(Cuda(cudaMalloc(&result_, sizeof(DeviceResult)), "cudaMalloc"));
  module_ = std::move(m);
  return Status::OK();
}

Status DataOps::Fill(void* data, const htam_fill_request& req, cudaStream_t stream) {
  HTAM_RETURN_IF_ERROR(Ensure(stream));
  if (req.count == 0) return Status::OK();
  FillArgs f{};
  f.dtype = req.dtype;
  f.count = req.count;
  f.dist = req.dist;
  f.round = req.round;
  f.a = req.a;
  f.b = req.b;
  f.seed = req.seed;
  f.num_special = req.num_special < 0 ? 0 : req.num_special > 8 ? 8 : req.num_special;
  f.fraction = req.fraction;
  for (int i = 0; i < f.num_special; ++i) f.special[i] = req.special[i];
  void* args[] = {&data, &f};
  HTAM_RETURN_IF_ERROR(
      module_->Launch("htam_fill", dim3(Blocks(req.count)), dim3(kThreads), args, stream));
  return Cuda(cudaStreamSynchronize(stream), "fill");
}

Status DataOps::Compare(const void* a, const void* b, const htam_compare_request& req,
                        cudaStream_t stream, htam_compare_result* out) {
  HTAM_RETURN_IF_ERROR(Ensure(stream));
  DeviceResult init{0, ULLONG_MAX, ULLONG_MAX, 0, 0};
  HTAM_RETURN_IF_ERROR(Cuda(
      cudaMemcpyAsync(result_, &init, sizeof init, cudaMemcpyHostToDevice, stream), "compare"));
  if (req.count > 0) {
    CompareArgs c{req.dtype, req.count, req.mode, req.atol, req.rtol};
    void* args[] = {const_cast<void**>(&a), const_cast<void**>(&b), &c, &result_};
    HTAM_RETURN_IF_ERROR(
        module_->Launch("htam_compare", dim3(Blocks(req.count)), dim3(kThreads), args, stream));
  }
  DeviceResult r{};
  HTAM_RETURN_IF_ERROR(
      Cuda(cudaMemcpyAsync(&r, result_, sizeof r, cudaMemcpyDeviceToHost, stream), "compare"));
  HTAM_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream), "compare"));
  out->mismatches = r.mismatches;
  out->first_mismatch = r.first_mismatch == ULLONG_MAX ? -1 : int64_t(r.first_mismatch);
  out->first_nonfinite = r.first_nonfinite == ULLONG_MAX ? -1 : int64_t(r.first_nonfinite);
  out->a_all_zero = r.not_all_zero ? 0 : 1;
  out->b_any_nonzero = r.any_nonzero ? 1 : 0;
  return Status::OK();
}

}  // namespace htam::cuda
