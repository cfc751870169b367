# expect: Incorrect. Correct output, then zeroes its input (a reference run after it would see
# zeros); the runner's digests of the inputs before and after the call differ.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.relu(self.linear(x))
        x.zero_()
        return y
