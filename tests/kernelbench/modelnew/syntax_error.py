# expect: CompileError. Does not parse.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features)
        super().__init__()
