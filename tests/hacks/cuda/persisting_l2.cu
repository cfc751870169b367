// Hack: asks for persisting L2 lines over its input (limit raised, access-policy window on the
// handed stream), so that repetitions find the input in L2 despite the flush (llm.c PR 851).
// Defence: before every repetition the persisting limit is set to 0, persisting lines are reset and
// the stream's window is cleared. Expected: Ok with an honest time.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void relu(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  long n = htam_numel(&in[0]);
  if (n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  int dev = 0, max_persist = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, dev);
  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, max_persist);
  cudaStreamAttrValue v = {};
  v.accessPolicyWindow.base_ptr = in[0].data;
  v.accessPolicyWindow.num_bytes = (size_t)n * sizeof(float);
  v.accessPolicyWindow.hitRatio = 1.0f;
  v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v);
  cudaGetLastError();
  relu<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
