# A KernelBench-style problem: y = relu(x @ W^T + b), with W and b the parameters of nn.Linear.
import torch
import torch.nn as nn

BATCH, IN, OUT = 32, 64, 48


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN)]


def get_init_inputs():
    return [IN, OUT]
