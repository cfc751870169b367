// Hack/bug: two phases in one launch with no grid-wide barrier: each block writes relu(x) of its
// slice into a scratch buffer, then copies ANOTHER block's slice of the scratch to the output. Only
// when the other block happened to run first (or the scratch still holds the same values from an
// earlier call on the same inputs) is the answer right. Defence: fresh inputs per case, several
// seeds, repeated calls, poisoned outputs. Expected: rejected (Incorrect or Nondeterministic).
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void two_phase(const float* x, float* scratch, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) scratch[i] = x[i] > 0.f ? x[i] : 0.f;
  __syncthreads();  // orders this block only, not the others
  long j = (i + 64 * (long)blockDim.x) % n;
  if (i < n) y[j] = scratch[j];
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  static float* scratch = nullptr;
  static long cap = 0;
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  if (n > cap) {
    if (scratch) cudaFree(scratch);
    if (cudaMalloc(&scratch, n * sizeof(float)) != cudaSuccess) return 3;
    cap = n;
  }
  two_phase<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, scratch, (float*)out[0].data, n);
  return 0;
}
