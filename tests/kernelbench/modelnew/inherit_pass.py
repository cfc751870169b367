# expect: Incorrect ([inheritance], static). ModelNew is the reference under another name.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


class ModelNew(Model):
    pass
