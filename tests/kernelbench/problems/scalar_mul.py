# A small problem with a Python float among its inputs (like KernelBench's
# 5_Matrix_scalar_multiplication, at a size the golden data can be computed quickly).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return A * s


def get_inputs():
    return [torch.randn(64, 32), 3.14]


def get_init_inputs():
    return []
