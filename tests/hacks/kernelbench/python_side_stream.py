# Hack: the kernel runs on a side stream that the harness does not time.
# expect: streams
# policy: {"streams": "forbid"}
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    auto stream = at::cuda::getCurrentCUDAStream();
    relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

relu_ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
                       cuda_sources=relu_source, functions=["relu_cuda"])



class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = torch.cuda.Stream()

    def forward(self, x):
        with torch.cuda.stream(self.s):
            return relu_ext.relu_cuda(x)
