// Hack: does the work on its own blocking side stream (cudaStreamCreate) and returns at once, so that events on the
// handed stream see nothing. Defence: the window closes at device idle (the closing event is on the legacy stream, which waits for it).
// Expected: Ok with an honest time (not faster than the reference by the hidden work).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void relu_slow(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  static cudaStream_t side = nullptr;
  if (!side) cudaStreamCreate(&side);
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  relu_slow<<<(unsigned)((n + 255) / 256), 256, 0, side>>>((const float*)in[0].data,
                                                          (float*)out[0].data, n);
  return 0;
}
