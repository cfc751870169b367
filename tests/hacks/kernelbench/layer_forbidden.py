# Hack on a task that forbids PyTorch layers: the convolution is nn.Conv2d; only the cheap
# epilogue is a custom kernel.
# expect: layers
# policy: {"layers": "forbid"}
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

bias_relu_source = """
#include <torch/extension.h>

__global__ void bias_relu(float* y, const float* b, int n, int hw, int c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = y[i] + b[(i / hw) % c]; y[i] = v > 0.f ? v : 0.f; }
}

torch::Tensor bias_relu_cuda(torch::Tensor y, torch::Tensor b) {
    int n = y.numel(), hw = y.size(2) * y.size(3), c = y.size(1);
    bias_relu<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), b.data_ptr<float>(), n, hw, c);
    return y;
}
"""

ext = load_inline(name="bias_relu", cpp_sources="torch::Tensor bias_relu_cuda(torch::Tensor y, torch::Tensor b);",
                  cuda_sources=bias_relu_source, functions=["bias_relu_cuda"])


class ModelNew(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, bias=False)
        self.bias = nn.Parameter(torch.zeros(cout))

    def forward(self, x):
        return ext.bias_relu_cuda(self.conv(x), self.bias)
