# A KernelBench-style reduction problem: the sum of every row of a 2048 x 4096 matrix.
import torch
import torch.nn as nn

ROWS, COLS = 2048, 4096


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [1]
