import torch
import torch.nn as nn


# An RNN cell stepped in Python, as KernelBench's level-3 VanillaRNNHidden: hundreds of small
# matrix products a call, each a parallel region of PyTorch's CPU threads.
class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)

    def forward(self, x, h0):
        hidden = h0
        outputs = []
        for t in range(x.size(0)):
            hidden = torch.tanh(self.i2h(torch.cat((x[t], hidden), dim=1)))
            outputs.append(self.h2o(hidden))
        return torch.stack(outputs, dim=0)


def get_inputs():
    return [torch.rand(128, 8, 512), torch.rand(8, 256)]


def get_init_inputs():
    return [512, 256, 128]
