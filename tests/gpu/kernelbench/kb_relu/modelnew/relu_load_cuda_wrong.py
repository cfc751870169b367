# expect: Incorrect. A leaky ReLU through htam.load_cuda where the problem asks for ReLU.
import torch
import torch.nn as nn

import htam

CUDA = r"""
__global__ void leaky_kernel(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.01f * x[i];
}

void leaky(const float* x, float* y, long long n, cudaStream_t stream) {
  leaky_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
}
"""

ext = htam.load_cuda("htam_leaky_fast", CUDA,
                     ["void leaky(const float* x, float* y, long long n, cudaStream_t stream)"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        ext.leaky(x, y, x.numel())
        return y
