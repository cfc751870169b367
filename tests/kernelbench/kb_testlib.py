"""What the KernelBench tests on the CPU (kb_full_size_test, kb_score_test, kb_busy_host_test,
...) and on the GPU (tests/gpu/kb_*_gpu_test) share: the large ReLU problem and its honest
ModelNew, whether an interpreter has PyTorch (a usable CUDA device), and a scoring run of
htam-bench kernelbench. Imported by path (tests are run as files, not as a package)."""
import json
import os
import shutil
import subprocess
import tempfile


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


def scoring_tree(test, level: int):
    """A temporary folder for `test` (removed after it; readable by sandboxed workers) with
    kb/level<level> for problem files and mn/level<level> for ModelNew files: (tmp, kb, mn)."""
    tmp = tempfile.mkdtemp()
    test.addCleanup(shutil.rmtree, tmp)
    os.chmod(tmp, 0o755)
    kbdir, mndir = (os.path.join(tmp, d, "level%d" % level) for d in ("kb", "mn"))
    os.makedirs(kbdir)
    os.makedirs(mndir)
    return tmp, kbdir, mndir


def score_levels(root: str, htam_eval: str, args: list, timeout: int = 900):
    """`htam-bench kernelbench` (python3 -m htam_bench kernelbench, Debian's interpreter) through
    `htam_eval` on the CPU with `args` (the KernelBench tree, the ModelNew files, --json ...),
    the require-a-kernel check off, kb_helper.py of this checkout; the finished process."""
    path = os.pathsep.join([os.path.join(root, "sdk", "python"),
                            os.path.join(root, "tools", "bench", "python")])
    return subprocess.run(
        ["/usr/bin/python3", "-m", "htam_bench", "kernelbench", "--htam-eval", htam_eval,
         "--policy", '{"require_kernel": false}'] + list(args),
        capture_output=True, text=True, timeout=timeout,
        env=dict(os.environ, PYTHONPATH=path,
                 HTAM_KERNELBENCH_HELPER=os.path.join(root, "tools", "kernelbench",
                                                      "kb_helper.py")))


def has_torch() -> bool:
    """Whether Debian's interpreter imports PyTorch."""
    return subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                          capture_output=True).returncode == 0
