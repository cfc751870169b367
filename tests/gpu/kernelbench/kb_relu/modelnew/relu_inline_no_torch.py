# expect: Ok. A load_inline call whose sources need no PyTorch headers (raw pointers, a trailing
# cudaStream_t): the runner compiles it through htam's fast path, transparently.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void relu_kernel(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}

void relu_raw(const float* x, float* y, long long n, cudaStream_t stream) {
  relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
}
"""

ext = load_inline("htam_relu_inline_fast",
                  cpp_sources="void relu_raw(const float* x, float* y, long long n, "
                              "cudaStream_t stream);",
                  cuda_sources=CUDA, functions=["relu_raw"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        ext.relu_raw(x, y, x.numel())
        return y
