# expect: Incorrect. Result reuse the static checks do not see (a mutable default argument):
# the first call's output is returned for every later input. Fresh inputs per trial catch it.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x, _memo=[]):
        if not _memo:
            _memo.append(torch.relu(self.linear(x)))
        return _memo[0].clone()
