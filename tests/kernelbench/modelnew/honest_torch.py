# expect: Ok. An honest ModelNew for kb_linear_relu_open: the same computation with PyTorch
# operators (the task's policy allows them); parameters built under the same seed as Model's.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.addmm(self.linear.bias, x, self.linear.weight.t()).clamp_min(0)
