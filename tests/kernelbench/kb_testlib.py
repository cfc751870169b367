"""What the KernelBench tests on the CPU (kb_full_size_test) and on the GPU (tests/gpu/kb_*_gpu_test)
share: the large ReLU problem and its honest ModelNew, and whether an interpreter has a usable
CUDA device. Imported by path (tests are run as files, not as a package)."""
import subprocess


def big_relu_problem(n: str) -> str:
    """A KernelBench problem file: ReLU over one float32 vector of `n` elements (a Python
    expression, written into the file as it is)."""
    return '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


N = %s


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
''' % n


# The honest ModelNew of big_relu_problem (tests derive wrong ones by replacing its return line).
CLAMP_MODELNEW = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.clamp_min(0)
'''


def cuda_torch(python: str) -> bool:
    """Whether `python` imports PyTorch with a usable CUDA device."""
    try:
        r = subprocess.run([python, "-c", "import torch,sys; sys.exit(0 if "
                            "torch.cuda.is_available() else 1)"], capture_output=True, timeout=120)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
