# Sample in KernelBench's level-1 format: a 3-D transposed convolution with its weights.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, groups=1,
                 bias=False):
        super().__init__()
        self.conv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                       padding=padding, groups=groups, bias=bias)

    def forward(self, x):
        return self.conv(x)


batch_size = 8
in_channels = 48
out_channels = 48
kernel_size = 3
depth = height = width = 64


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
