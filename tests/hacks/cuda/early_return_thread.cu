// Hack: returns at once and launches the work later from a background thread, so that no timer
// sees it. Defence: thread census around every call; device idle at the end of the window.
// Expected: rejected (Nondeterministic "race: ... threads", or Incorrect).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

#include <chrono>
#include <thread>

__global__ void relu(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  long n = htam_numel(&in[0]);
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  std::thread([=] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (n) relu<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
    cudaDeviceSynchronize();
  }).detach();
  return 0;
}
