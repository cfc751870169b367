# Hack: a plain PyTorch rewrite with no custom kernel at all.
# expect: require_kernel
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0)
