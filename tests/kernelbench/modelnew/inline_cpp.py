# expect: Ok. A custom C++ CPU kernel (linear + ReLU, one loop nest) through
# torch.utils.cpp_extension.load_inline; the second evaluation of this file loads the build
# from the content-keyed build cache instead of compiling.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
  const int64_t n = xc.size(0), k = xc.size(1), m = wc.size(0);
  auto y = torch::empty({n, m}, xc.options());
  const float* X = xc.data_ptr<float>();
  const float* W = wc.data_ptr<float>();
  const float* B = bc.data_ptr<float>();
  float* Y = y.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      float s = B[j];
      for (int64_t t = 0; t < k; ++t) s += X[i * k + t] * W[j * k + t];
      Y[i * m + j] = s > 0.f ? s : 0.f;
    }
  return y;
}
"""

ext = load_inline("htam_test_linear_relu", cpp_sources=[CPP], functions=["linear_relu"],
                  extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_relu(x, self.linear.weight, self.linear.bias)
