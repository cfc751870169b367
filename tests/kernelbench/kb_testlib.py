"""What the KernelBench tests on the CPU (kb_full_size_test) and on the GPU (tests/gpu/kb_*_gpu_test)
share: the large ReLU problem and its honest ModelNew, and whether an interpreter has a usable
CUDA device. Imported by path (tests are run as files, not as a package)."""
import json
import os
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


# A task's policy that lets a ModelNew call PyTorch's operators (tests whose point is not the
# policy: memory, timing, retries).
OPEN_POLICY = {"require_kernel": False, "torch_ops": "allow", "layers": "allow",
               "functional": "warn"}


def import_task(python: str, helper: str, problem: str, folder: str, name: str,
                policy: dict = None, timeout: int = 600) -> str:
    """Writes the problem file's text `problem` under `folder`, imports it as task `name` there
    (kb_helper.py import) and, with `policy`, sets its task.json's kernelbench_policy. Returns
    the task's directory."""
    src = os.path.join(folder, name + ".py")
    with open(src, "w") as f:
        f.write(problem)
    task = os.path.join(folder, name)
    subprocess.run([python, helper, "import", src, task, "--name", name], check=True,
                   capture_output=True, timeout=timeout)
    if policy is not None:
        with open(os.path.join(task, "task.json")) as f:
            t = json.load(f)
        t["kernelbench_policy"] = dict(policy)
        with open(os.path.join(task, "task.json"), "w") as f:
            json.dump(t, f, indent=2)
    return task
