# expect: Ok, timed by the wall clock. The kernel runs on a side stream the static checks do
# not see (torch.cuda.streams spellings): CUDA events on the current stream would miss it; the
# harness's whole-device synchronize and wall clock count it, so it gains nothing.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""

ext = load_inline("htam_gpu_relu_side", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["relu_cuda"])
SIDE = torch.cuda.Stream()


class ModelNew(nn.Module):
    def forward(self, x):
        ctx = torch.cuda.StreamContext(SIDE)
        ctx.__enter__()
        y = ext.relu_cuda(x.contiguous())
        ctx.__exit__(None, None, None)
        return y
