"""The suite's CUDA references timed by triton.testing.do_bench, on the GPU machine (PyTorch + Triton).

For each task: nvcc builds reference.cu into a shared library (the kernel ABI's htam_kernel, the
same source htam times), inputs of the task's first seen shape are made with PyTorch (4 rotating
sets, as htam's default), and do_bench (CUDA events, L2 cleared by its 256 MB memset before every
call, median) times one call ten times. One JSON line per task: the ten medians, their median and
CV. tools/gpu/fidelity_suite.sh puts these beside htam's and ncu's figures.
usage: python3 suite_do_bench.py SDK_INCLUDE_DIR TASK_DIR [TASK_DIR ...]
"""
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile

import torch
import triton.testing

MAX_DIMS = 8
DTYPES = {"f32": (0, torch.float32), "f16": (1, torch.float16), "bf16": (2, torch.bfloat16),
          "f64": (3, torch.float64), "i32": (4, torch.int32), "i64": (5, torch.int64),
          "u8": (6, torch.uint8), "i8": (7, torch.int8)}


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


def dim(expr, dims):
    # Shapes name dimensions ("M") or give numbers; simple products ("M*N") are allowed.
    if isinstance(expr, int):
        return expr
    value = 1
    for part in str(expr).split("*"):
        part = part.strip()
        value *= int(part) if part.isdigit() else int(dims[part])
    return value


def make(spec, dims):
    code, dt = DTYPES[spec["dtype"]]
    shape = [dim(e, dims) for e in spec["shape"]]
    if dt.is_floating_point:
        t = torch.randn(shape, device="cuda").to(dt)
    else:
        t = torch.randint(-100, 100, shape, device="cuda").to(dt)
    d = Tensor()
    d.data = t.data_ptr()
    d.dtype = code
    d.ndim = len(shape)
    stride = 1
    for i in reversed(range(len(shape))):
        d.shape[i] = shape[i]
        d.strides[i] = stride
        stride *= shape[i]
    return t, d


def one(include, task_dir, build):
    spec = json.load(open(os.path.join(task_dir, "task.json")))
    name = spec["name"]
    src = os.path.join(task_dir, "reference.cu")
    so = os.path.join(build, name + ".so")
    cc = subprocess.run(["nvcc", "-O3", "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC",
                         "-I", include, "-o", so, src], capture_output=True, text=True)
    if cc.returncode != 0:
        return {"task": name, "error": "nvcc: " + cc.stderr[-300:]}
    fn = ctypes.CDLL(so).htam_kernel
    fn.restype = ctypes.c_int
    dims = spec["shapes"]["seen"][0]
    sets = []
    for _ in range(4):
        ins = [make(s, dims) for s in spec["inputs"]]
        outs = [make(s, dims) for s in spec["outputs"]]
        keep = [t for t, _ in ins + outs]
        iarr = (Tensor * len(ins))(*[d for _, d in ins])
        oarr = (Tensor * len(outs))(*[d for _, d in outs])
        sets.append((keep, iarr, len(ins), oarr, len(outs)))
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    k = [0]
    rc = [0]

    def call():
        _, i, ni, o, no = sets[k[0] % len(sets)]
        k[0] += 1
        rc[0] |= fn(i, ni, o, no, stream)

    meds = [1000.0 * triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")
            for _ in range(10)]
    torch.cuda.synchronize()
    return {"task": name, "tool": "triton.testing.do_bench", "shape": dims, "medians_us": meds,
            "median_us": statistics.median(meds),
            "cv_pct": 100 * statistics.pstdev(meds) / statistics.mean(meds),
            "kernel_rc": rc[0]}


def main():
    include, tasks = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as build:
        for t in tasks:
            try:
                print(json.dumps(one(include, t, build)), flush=True)
            except Exception as e:  # one task's trouble does not stop the others
                print(json.dumps({"task": os.path.basename(t.rstrip("/")), "error": repr(e)[:300]}),
                      flush=True)


if __name__ == "__main__":
    main()
