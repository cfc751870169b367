"""kb_static.py against KernelBench's own static checker, rule by rule: under the default policy
htam accepts every ModelNew file KernelBench's checker accepts (its warnings stay warnings here),
and rejects only where a file is a way to be judged correct without a kernel doing the work
(docs/backends.md, "Static checks of ModelNew files", "Parity with KernelBench").

Each rule of KernelBench's checker has a case here: a small ModelNew file that trips that rule
alone, KernelBench's verdict on it (error or warning) and htam's. Where a KernelBench checkout is
named by HTAM_KERNELBENCH_DIR (its reference/kernel_static_checker.py, or
scripts/../src/kernelbench/kernel_static_checker.py), the verdicts written here are checked
against that checker too, and so is every file of the hack catalogues."""
import glob
import importlib.util
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "kernelbench"))
import kb_static  # noqa: E402

# The checks htam keeps as errors under every policy although KernelBench's pattern checker lets
# the file through: each is a way to pass the correctness trials while the kernel does not do the
# work (the reference built or called, a result kept across calls, code the checks cannot read,
# the reference's operators replaced).
STRICTER_THAN_KERNELBENCH = {"inheritance", "caching", "dynamic", "patching", "threads"}

HEAD = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
%(cuda)s
torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
                  cuda_sources=SRC, functions=["relu_cuda"])
%(top)s

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
%(init)s

    def forward(self, x):
%(forward)s
'''


def modelnew(forward="        return ext.relu_cuda(x)", init="        self.k = 1", top="",
             cuda=""):
    return HEAD % {"forward": forward, "init": init, "top": top, "cuda": cuda}


TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''

# (KernelBench's rule, what the case does, source, KernelBench backend,
#  KernelBench's verdict: "ok", "warn" or "error",
#  htam's default verdict: "ok", "warn" or "error", and the htam check that reports it)
CASES = [
    ("baseline", "a load_inline ReLU on the current stream", modelnew(), "cuda",
     "ok", "ok", None),
    ("code_bypass", "an except branch that falls back to PyTorch",
     modelnew("        try:\n            return ext.relu_cuda(x)\n        except RuntimeError:\n"
              "            return torch.relu(x)"), "cuda", "error", "error", "fallback"),
    ("code_bypass", "an except branch that only re-raises (htam: no fallback, accepted)",
     modelnew("        try:\n            return ext.relu_cuda(x)\n        except RuntimeError "
              "as e:\n            raise ValueError('kernel failed') from e"), "cuda",
     "error", "ok", None),
    ("code_bypass", "'pass' in a helper class (htam: only an empty forward is rejected)",
     modelnew(top="\nclass Config:\n    pass\n"), "cuda", "error", "ok", None),
    ("code_bypass", "a forward that is only 'pass'", modelnew("        pass"), "cuda",
     "error", "error", "inheritance"),
    ("pytorch_wrap", "a torch.nn layer kept from the reference",
     modelnew("        return ext.relu_cuda(self.lin(x))",
              "        self.lin = torch.nn.Linear(16, 16)"), "cuda", "warn", "warn", "layers"),
    ("timing_event_patch", "torch.cuda.synchronize replaced",
     modelnew(top="\ntorch.cuda.synchronize = lambda *a: None\n"), "cuda", "error", "error",
     "patching"),
    ("timing_event_patch", "time.perf_counter replaced",
     modelnew(top="\nimport time\ntime.perf_counter = lambda: 0.0\n"), "cuda", "error",
     "error", "patching"),
    ("torch_computation_ops", "torch.matmul in forward",
     modelnew("        return ext.relu_cuda(torch.matmul(x, x))"), "cuda", "warn", "warn",
     "torch_ops"),
    ("torch_computation_ops", "torch.nn.functional.gelu in forward",
     modelnew("        return torch.nn.functional.gelu(ext.relu_cuda(x))"), "cuda", "warn",
     "warn", "functional"),
    ("torch_computation_ops", "F.softmax (torch.nn.functional imported as F) in forward",
     modelnew("        return F.softmax(ext.relu_cuda(x), dim=-1)",
              top="\nimport torch.nn.functional as F\n"), "cuda", "warn", "warn",
     "functional"),
    ("stream_injection", "a torch.cuda.Stream of its own",
     modelnew("        with torch.cuda.stream(self.s):\n            y = ext.relu_cuda(x)\n"
              "        torch.cuda.current_stream().wait_stream(self.s)\n        return y",
              "        self.s = torch.cuda.Stream()"), "cuda", "warn", "warn", "streams"),
    ("thread_injection", "import threading",
     modelnew(top="\nimport threading\n"), "cuda", "error", "error", "threads"),
    ("thread_injection", "concurrent.futures",
     modelnew(top="\nimport concurrent.futures\n"), "cuda", "error", "error", "threads"),
    ("lazy_eval", "a torch.Tensor subclass",
     modelnew(top="\nclass Lazy(torch.Tensor):\n    def __repr__(self):\n"
                  "        return 'lazy'\n"), "cuda", "error", "error", "patching"),
    ("lazy_eval", "torch.Tensor._make_subclass",
     modelnew("        return torch.Tensor._make_subclass(torch.Tensor, ext.relu_cuda(x))"),
     "cuda", "error", "error", "patching"),
    ("precision_downgrade", "an f32 problem computed in half precision (.half())",
     modelnew("        return ext.relu_cuda(x.half()).float()"), "cuda", "warn", "warn",
     "precision"),
    ("precision_downgrade", "__float2half in the CUDA source",
     modelnew(cuda="__device__ __half to_half(float v) { return __float2half(v); }"), "cuda",
     "warn", "warn", "precision"),
    ("cuda_impl", "no __global__ kernel",
     modelnew().replace("__global__ void relu_kernel", "__device__ void relu_kernel"), "cuda",
     "error", "error", "require_kernel"),
    ("cuda_impl", "a kernel that is never compiled (no load_inline)",
     modelnew().replace("ext = load_inline(", "ext = dict(").replace(
         "from torch.utils.cpp_extension import load_inline\n", ""), "cuda", "error", "error",
     "require_kernel"),
    ("triton_impl", "a Triton kernel", TRITON, "triton", "ok", "ok", None),
]


def kernelbench_checker():
    """KernelBench's kernel_static_checker module, or None where no checkout is named."""
    root = os.environ.get("HTAM_KERNELBENCH_DIR", "")
    for rel in ("reference/kernel_static_checker.py",
                "src/kernelbench/kernel_static_checker.py", "kernel_static_checker.py"):
        path = os.path.join(root, rel)
        if root and os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("kernel_static_checker", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    return None


def kernelbench_verdict(checker, source, backend):
    valid, errors, warnings = checker.validate_kernel_static(source, backend=backend,
                                                            precision="fp32")
    return "error" if not valid else ("warn" if warnings else "ok")


def htam_verdict(source):
    r = kb_static.check(source)
    if not r.ok:
        return "error", {e.check for e in r.errors}
    return ("warn" if r.warnings else "ok"), {w.check for w in r.warnings}


class RuleByRuleTest(unittest.TestCase):
    def test_every_kernelbench_rule_has_a_case(self):
        rules = {c[0] for c in CASES}
        for rule in ("code_bypass", "pytorch_wrap", "timing_event_patch",
                     "torch_computation_ops", "stream_injection", "thread_injection",
                     "lazy_eval", "precision_downgrade", "cuda_impl", "triton_impl"):
            self.assertIn(rule, rules)

    def test_htam_default_verdicts(self):
        for rule, what, src, _, kb, ours, check in CASES:
            with self.subTest(rule=rule, case=what):
                got, checks = htam_verdict(src)
                self.assertEqual(got, ours, "%s: %s" % (what, sorted(checks)))
                if check:
                    self.assertIn(check, checks)
                # What KernelBench accepts (with or without warnings), htam accepts.
                if kb in ("ok", "warn"):
                    self.assertNotEqual(got, "error", what)

    def test_a_task_can_forbid_what_kernelbench_only_warns_about(self):
        for rule, what, src, _, kb, ours, check in CASES:
            if kb == "warn" and check:
                with self.subTest(rule=rule, case=what):
                    r = kb_static.check(src, policy={check: "forbid"})
                    self.assertIn(check, [e.check for e in r.errors], what)

    def test_verdicts_written_here_are_kernelbench_s(self):
        checker = kernelbench_checker()
        if checker is None:
            self.skipTest("HTAM_KERNELBENCH_DIR names no KernelBench checkout")
        for rule, what, src, backend, kb, _, _ in CASES:
            with self.subTest(rule=rule, case=what):
                self.assertEqual(kernelbench_verdict(checker, src, backend), kb, what)

    def test_catalogue_files_kernelbench_accepts_are_accepted_or_known_hacks(self):
        checker = kernelbench_checker()
        if checker is None:
            self.skipTest("HTAM_KERNELBENCH_DIR names no KernelBench checkout")
        files = sorted(glob.glob(os.path.join(ROOT, "tests", "hacks", "kernelbench", "*.py")) +
                       glob.glob(os.path.join(ROOT, "tests", "gpu", "kernelbench", "*",
                                              "modelnew", "*.py")))
        self.assertGreater(len(files), 20)
        for path in files:
            with open(path) as f:
                src = f.read()
            if kernelbench_verdict(checker, src, "cuda") == "error" and \
                    kernelbench_verdict(checker, src, "triton") == "error":
                continue
            with self.subTest(file=os.path.basename(path)):
                got, checks = htam_verdict(src)
                if got == "error":
                    self.assertLessEqual(checks, STRICTER_THAN_KERNELBENCH,
                                         "%s: rejected by %s, which KernelBench accepts" %
                                         (os.path.basename(path), sorted(checks)))


if __name__ == "__main__":
    unittest.main()
