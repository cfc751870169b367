# expect: Incorrect ([caching], static). Keeps its output on self and returns it again.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.out = None

    def forward(self, x):
        if self.out is None:
            self.out = torch.relu(self.linear(x))
        return self.out
