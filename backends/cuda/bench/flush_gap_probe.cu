// Where does a streaming kernel's extra time in htam's timing come from? A standalone probe, run on
// the GPU machine by tools/gpu/flush_gap.sh (alone and under ncu):
//   the suite's gelu (16M f32 in, 16M f32 out) timed with CUDA events after the preparation of
//   htam's protocol (poison the output, read-flush 2x L2, synchronize), with a host-side pause of
//   GAP microseconds between the preparation and the kernel (0, 20, 100, 1000), and without the
//   poison; each variant is its own kernel instantiation so ncu can tell them apart by name.
// Prints one line per variant: median and min of the event-timed kernel (30 reps).
//   build: nvcc -O3 -arch=sm_90a -o flush_gap_probe flush_gap_probe.cu
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

template <int V>
__global__ void gelu_v(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}

__global__ void flush_read(const uint4* buf, unsigned long long n, unsigned* sink) {
  unsigned acc = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

int main() {
  const long n = 16L << 20;
  const size_t flush_bytes = 2 * 50 * (1 << 20) + (16 << 20);
  float *x, *y;
  uint4* f;
  cudaMalloc(&x, n * 4);
  cudaMalloc(&y, n * 4);
  cudaMalloc(&f, flush_bytes);
  cudaMemset(x, 0, n * 4);
  cudaMemset(f, 1, flush_bytes);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  int dev = 0, sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  struct Variant {
    const char* name;
    bool poison;
    int gap_us;
    void (*k)(const float*, float*, long);
  } vs[] = {{"poison+flush, gap 0", true, 0, gelu_v<0>},
            {"poison+flush, gap 20us", true, 20, gelu_v<1>},
            {"poison+flush, gap 100us", true, 100, gelu_v<2>},
            {"poison+flush, gap 1000us", true, 1000, gelu_v<3>},
            {"flush only, gap 0", false, 0, gelu_v<4>},
            {"flush only, gap 1000us", false, 1000, gelu_v<5>},
            {"no flush (warm), gap 0", false, -1, gelu_v<6>}};
  for (int round = 0; round < 2; ++round) {  // round 0 warms up
    for (auto& v : vs) {
      std::vector<float> t;
      for (int r = 0; r < 30; ++r) {
        if (v.poison) cudaMemsetAsync(y, 0x7f, n * 4);
        if (v.gap_us >= 0) flush_read<<<sms * 8, 512>>>(f, flush_bytes / 16, (unsigned*)y);
        cudaDeviceSynchronize();
        if (v.gap_us > 0) usleep(v.gap_us);
        cudaEventRecord(a);
        v.k<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        t.push_back(ms * 1000);
      }
      std::sort(t.begin(), t.end());
      if (round == 1)
        printf("%-28s median %7.2f us  min %7.2f us\n", v.name, t[t.size() / 2], t[0]);
    }
  }
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) printf("error: %s\n", cudaGetErrorString(e));
  return 0;
}
