# A KernelBench-style elementwise problem: y = relu(x) over 4M floats (16 MiB in, 16 MiB out).
import torch
import torch.nn as nn

N = 1 << 22


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
