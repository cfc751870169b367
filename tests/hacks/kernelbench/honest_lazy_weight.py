# Honest: a transposed copy of a parameter made on the first call and reused (not an output).
# expect: ok
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gemm_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void gemm_kernel(const float* a, const float* bt, float* c, int m, int n, int k) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < m && col < n) {
        float acc = 0.f;
        for (int i = 0; i < k; ++i) acc += a[row * k + i] * bt[col * k + i];
        c[row * n + col] = acc;
    }
}

torch::Tensor gemm(torch::Tensor a, torch::Tensor bt) {
    int m = a.size(0), k = a.size(1), n = bt.size(0);
    auto c = torch::empty({m, n}, a.options());
    dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);
    gemm_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), bt.data_ptr<float>(), c.data_ptr<float>(), m, n, k);
    return c;
}
"""

gemm_ext = torch.utils.cpp_extension.load_inline(
    name="gemm_ext", cpp_sources="torch::Tensor gemm(torch::Tensor a, torch::Tensor bt);",
    cuda_sources=gemm_source, functions=["gemm"])


class ModelNew(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(k, n))
        self.wt = None

    def forward(self, x):
        if self.wt is None:
            self.wt = self.weight.t().contiguous()
        return gemm_ext.gemm(x.contiguous(), self.wt)
