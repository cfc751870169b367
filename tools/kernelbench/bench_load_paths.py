#!/usr/bin/python3
"""Cold compile + first call of one ModelNew candidate (ReLU over 4M floats,
tests/gpu/kernelbench/kb_relu) through each build path, each in a fresh process with fresh
build directories (docs/backends.md, "The fast path: htam.load_cuda"):

  load_inline   PyTorch's load_inline with torch/extension.h (relu_inline.py), fresh
                TORCH_EXTENSIONS_DIR and build directory: what KernelBench candidates pay today;
  load_cuda     htam.load_cuda, the fast path (relu_load_cuda.py), fresh cache;
  inline_fast   a load_inline call without PyTorch headers (relu_inline_no_torch.py) through the
                runner's load_inline wrapper (kb_runner.py), which takes the fast path.

Each time counts from before the candidate's import (PyTorch imported and CUDA initialised
before, as in the runner) to after its first forward and a synchronize; outputs are checked
against torch.relu. Prints one JSON line: the seconds of each path (median of --fast-reps cold
runs for the fast paths), and load_inline's time over each fast path's (the target is >= 20).

  python3 tools/kernelbench/bench_load_paths.py [--fast-reps 3] [--compile-only]

Needs a Python with PyTorch+CUDA (run it with that interpreter), nvcc (CUDA_HOME, PATH or
/usr/local/cuda/bin) and ninja (PATH or beside the interpreter) for load_inline. --compile-only
times only the import (the builds), for a machine without a GPU. Takes 1-3 minutes on an H100
host (load_inline dominates).
"""
import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CANDIDATES = os.path.join(ROOT, "tests", "gpu", "kernelbench", "kb_relu", "modelnew")
FILES = {"load_inline": "relu_inline.py", "load_cuda": "relu_load_cuda.py",
         "inline_fast": "relu_inline_no_torch.py"}


def child(mode, path, scratch, compile_only):
    """One cold run in this (fresh) process; prints {"seconds", "builds", "checked"}."""
    sys.path.insert(0, HERE)
    import torch
    cuda = torch.cuda.is_available() and not compile_only
    if cuda:
        torch.cuda.init()
        x = torch.randn(1 << 22, device="cuda")
        torch.cuda.synchronize()
    builds = []
    if mode in ("load_cuda", "inline_fast"):
        import kb_fastpath
        kb_fastpath.configure(cache_dir=os.path.join(scratch, "cache"), work_dir=scratch,
                              builds=builds)
        sys.modules["htam"] = kb_fastpath.htam_module()
    if mode == "inline_fast":
        import kb_runner
        kb_runner.torch = torch
        kb_runner.install_build_cache(os.path.join(scratch, "cache"), scratch,
                                      "cuda" if (cuda or compile_only) else "cpu", builds, True)
    t0 = time.monotonic()
    spec = importlib.util.spec_from_file_location("candidate", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    checked = False
    if cuda:
        model = mod.ModelNew().cuda().eval()
        with torch.no_grad():
            y = model(x)
        torch.cuda.synchronize()
    seconds = time.monotonic() - t0
    if cuda:
        checked = bool(torch.equal(y, torch.relu(x)))
        if not checked:
            raise SystemExit("%s: wrong output" % mode)
    print(json.dumps({"seconds": seconds, "builds": builds, "checked": checked}))


def run_child(mode, compile_only, timeout_s):
    scratch = tempfile.mkdtemp(prefix="htam-bench-%s-" % mode)
    env = dict(os.environ)
    env["TORCH_EXTENSIONS_DIR"] = os.path.join(scratch, "torch_extensions")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if compile_only:
        env.setdefault("TORCH_CUDA_ARCH_LIST", "8.0")  # PyTorch before 2.0 knows no 9.0
    cmd = [sys.executable, os.path.realpath(__file__), "--child", mode,
           os.path.join(CANDIDATES, FILES[mode]), "--scratch", scratch]
    if compile_only:
        cmd.append("--compile-only")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"error": "ran past %d s" % timeout_s}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": (p.stderr or p.stdout).strip()[-1500:] or "exit %d" % p.returncode}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast-reps", type=int, default=3)
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--timeout-s", type=int, default=240)
    ap.add_argument("--child")
    ap.add_argument("--scratch")
    ap.add_argument("candidate", nargs="?")
    a = ap.parse_args()
    if a.child:
        child(a.child, a.candidate, a.scratch, a.compile_only)
        return
    import torch
    if not a.compile_only and not torch.cuda.is_available():
        sys.exit("bench_load_paths: no CUDA device usable by %s (run it with a PyTorch+CUDA "
                 "interpreter on a GPU machine, or pass --compile-only)" % sys.executable)
    sys.path.insert(0, HERE)
    import kb_fastpath
    nvcc = kb_fastpath.find_nvcc()
    out = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
           "torch": torch.__version__, "python": sys.executable,
           "nvcc": kb_fastpath.nvcc_version(nvcc).splitlines()[-1],
           "compile_only": a.compile_only}
    runs = {}
    for mode in ("load_cuda", "inline_fast"):
        runs[mode] = [run_child(mode, a.compile_only, a.timeout_s)
                      for _ in range(max(1, a.fast_reps))]
    runs["load_inline"] = [run_child("load_inline", a.compile_only, a.timeout_s)]
    for mode, rs in runs.items():
        ok = [r["seconds"] for r in rs if "seconds" in r]
        errors = [r["error"] for r in rs if "error" in r]
        out[mode + "_s"] = round(statistics.median(ok), 3) if ok else None
        if len(ok) > 1:
            out[mode + "_all_s"] = [round(s, 3) for s in ok]
        if errors:
            out[mode + "_error"] = errors[0]
    for mode in ("load_cuda", "inline_fast"):
        if out.get("load_inline_s") and out.get(mode + "_s"):
            out["ratio_" + mode] = round(out["load_inline_s"] / out[mode + "_s"], 1)
    out["target_ratio"] = 20
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
