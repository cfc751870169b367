// CudaDevice's roofline (copy bandwidth, fp32 FMA and 16-bit mma rates) and the backend's own
// device code (the probes, the hold kernel and the read flush), compiled with NVRTC at device open.
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_device_internal.h"
#include "backends/cuda/cuda_errors.h"

namespace htam::cuda {
namespace {

// Roofline probes: device code only, compiled with NVRTC for the device's arch.
constexpr const char* kProbeSource = R"(
extern "C" __global__ void htam_fma_probe(float* out, int iters, float seed) {
  float a0 = seed + threadIdx.x, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
  float a4 = a0 + 4.f, a5 = a0 + 5.f, a6 = a0 + 6.f, a7 = a0 + 7.f;
  const float b = 0.999999f, c = 1e-7f;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      a0 = fmaf(a0, b, c); a1 = fmaf(a1, b, c); a2 = fmaf(a2, b, c); a3 = fmaf(a3, b, c);
      a4 = fmaf(a4, b, c); a5 = fmaf(a5, b, c); a6 = fmaf(a6, b, c); a7 = fmaf(a7, b, c);
    }
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}
extern "C" __global__ void htam_mma_probe(float* out, int iters) {
  unsigned a0 = 0x3f803f80u ^ threadIdx.x, a1 = 0x3f003f00u, a2 = 0x3e803e80u, a3 = 0x3f403f40u;
  unsigned b0 = 0x3f803f80u, b1 = 0x3c003c00u ^ threadIdx.x;
  float c[4][4];
#pragma unroll
  for (int k = 0; k < 4; ++k) { c[k][0] = c[k][1] = c[k][2] = c[k][3] = 0.f; }
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};"
          : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
// Fills every thread slot of every SM for `ns` nanoseconds: launched on the legacy stream just
// before the window opens, it absorbs the candidate's launch latency and keeps side-stream
// kernels from running before the window (they cannot be scheduled while it holds the SMs).
extern "C" __global__ void __launch_bounds__(256, 8) htam_hold(unsigned long long ns,
                                                             volatile unsigned* started,
                                                             unsigned ticket) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  if (started && blockIdx.x == 0 && threadIdx.x == 0) {
    *started = ticket;  // host-mapped: tells the host that the SMs are held now
    __threadfence_system();
  }
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
// Cache flush by reading: every line of the buffer is loaded once; the xor keeps the loads alive.
extern "C" __global__ void htam_flush_read(const uint4* buf, unsigned long long n, unsigned* sink) {
  unsigned acc = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}
)";

}  // namespace

const char* ProbeSource() {
  return kProbeSource;
}

void CudaDevice::MeasureRoofline() {
  auto t0 = Clock::now();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  // 1. Copy bandwidth: a large device-to-device copy, bytes read + written.
  uint64_t n = options_.measure_roofline
                   ? std::min<uint64_t>(options_.roofline_copy_bytes, props_.memory_bytes / 8)
                   : 0;
  void *src = nullptr, *dst = nullptr;
  if (n >= (1u << 20) && cudaMalloc(&src, n) == cudaSuccess && cudaMalloc(&dst, n) == cudaSuccess) {
    cudaMemsetAsync(src, 1, n, stream_);
    double best = 0;
    for (int i = 0; i < 6; ++i) {
      cudaEventRecord(a, stream_);
      cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_);
      cudaEventRecord(b, stream_);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      if (i > 0 && ms > 0) best = std::max(best, 2.0 * static_cast<double>(n) / (ms * 1e-3));
    }
    roofline_.copy_bytes_per_s = best;
  }
  if (src) cudaFree(src);
  if (dst) cudaFree(dst);
  cudaGetLastError();

  // 2. Arithmetic rates: NVRTC-compiled probes.
  auto compiled = NvrtcCompile(kProbeSource, "htam_probes.cu", props_.arch, {});
  if (!compiled.ok() || !compiled->ok) {
    roofline_.note =
        "probe compile failed: " + (compiled.ok() ? compiled->log : compiled.status().ToString());
  } else if (Status s = probes_.Load(compiled->cubin); !s.ok()) {
    roofline_.note = "probe load failed: " + s.ToString();
  } else {
    have_probes_ = true;
    void* hflag = nullptr;
    if (cudaHostAlloc(&hflag, sizeof(unsigned), cudaHostAllocMapped) == cudaSuccess) {
      hold_flag_host_ = static_cast<volatile unsigned*>(hflag);
      *hold_flag_host_ = 0;
      if (cudaHostGetDevicePointer(&hold_flag_device_, hflag, 0) != cudaSuccess)
        hold_flag_device_ = nullptr;
    }
    cudaGetLastError();
    int threads = 256, blocks = props_.sm_count * 8;
    float* out = nullptr;
    if (cudaMalloc(reinterpret_cast<void**>(&out), sizeof(float) * threads * blocks) ==
        cudaSuccess) {
      auto rate = [&](const char* kernel, void** args, double flops) {
        double best = 0;
        for (int i = 0; i < 4; ++i) {
          cudaEventRecord(a, stream_);
          if (!probes_.Launch(kernel, dim3(blocks), dim3(threads), args, stream_).ok()) return 0.0;
          cudaEventRecord(b, stream_);
          cudaEventSynchronize(b);
          float ms = 0;
          cudaEventElapsedTime(&ms, a, b);
          if (i > 0 && ms > 0) best = std::max(best, flops / (ms * 1e-3));
        }
        return best;
      };
      int iters = options_.measure_roofline ? 2048 : 0;
      float seed = 1.0f;
      void* fma_args[] = {&out, &iters, &seed};
      roofline_.fp32_flops =
          rate("htam_fma_probe", fma_args, 2.0 * 8 * 16 * double(iters) * threads * blocks);
      int mma_iters = options_.measure_roofline ? 2048 : 0;
      void* mma_args[] = {&out, &mma_iters};
      double warps = double(threads) / 32 * blocks;
      roofline_.tensor16_flops =
          rate("htam_mma_probe", mma_args, warps * mma_iters * 4 * (2.0 * 16 * 8 * 16));
      cudaFree(out);
    }
    cudaGetLastError();
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGetLastError();
  if (roofline_.note.empty()) {
    roofline_.note = "measured in " + std::to_string(static_cast<int>(MsSince(t0))) + " ms";
  }
}
}  // namespace htam::cuda
