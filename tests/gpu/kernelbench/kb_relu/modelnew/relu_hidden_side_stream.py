# expect: Ok, timed by the wall clock. The kernel runs on a side stream the static checks do
# not see (its own stream, named by token pasting, launched through cudaLaunchKernel): CUDA
# events on the caller's stream would miss it; the harness's whole-device synchronize and wall
# clock count it, so it gains nothing.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#define HTAM_PASTE(a, b) a##b

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  static cudaStream_t side = nullptr;
  if (!side) HTAM_PASTE(cudaStream, Create)(&side);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  void* args[] = {&xp, &yp, &n};
  cudaLaunchKernel((const void*)relu_kernel, dim3((n + 255) / 256), dim3(256), args, 0, side);
  return y;
}
"""

ext = load_inline("htam_gpu_relu_side", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["relu_cuda"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_cuda(x.contiguous())
