# expect: Incorrect where the task forbids PyTorch compute operators ("torch_ops": "forbid"):
# torch.Tensor.relu is not the spelling the static checks look for, but the forward's recorded
# PyTorch calls show relu at run time.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.Tensor.relu(self.linear(x))
