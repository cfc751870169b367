// kb_linear_relu on the CUDA backend: out = relu(x @ W^T + b), one thread per output element.
// The model's parameters arrive as further inputs, in task.json's order: in[0] = x [B, IN],
// in[1] = linear.weight [OUT, IN], in[2] = linear.bias [OUT].
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

__global__ void linear_relu(const float* __restrict__ x, const float* __restrict__ w,
                            const float* __restrict__ b, float* __restrict__ y, int batch, int k,
                            int n) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y;
  if (i >= batch || j >= n) return;
  float acc = b[j];
  for (int p = 0; p < k; ++p) acc = fmaf(x[i * k + p], w[j * k + p], acc);
  y[i * n + j] = fmaxf(acc, 0.f);
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 3 || nout != 1) return 1;
  int batch = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[0];
  if (batch == 0 || n == 0) return 0;
  dim3 grid((unsigned)((n + 127) / 128), (unsigned)batch);
  linear_relu<<<grid, 128, 0, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data,
      (float*)out[0].data, batch, k, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
