import torch


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
