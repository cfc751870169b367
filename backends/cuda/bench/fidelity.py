"""Timing fidelity of the CUDA backend, on the GPU machine (PyTorch + Triton there).

Times the SAME compiled candidate (.so with htam_kernel) with triton.testing.do_bench (events, L2
cleared by a 256 MB memset, median) ten times, and prints JSON: median per measurement and the CV.
Compare with htam-eval's median of the same source (tools/gpu/one_run.sh fidelity does both).
usage: python3 fidelity.py candidate.so N
"""
import ctypes
import json
import statistics
import sys

import torch
import triton.testing

MAX_DIMS = 8


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


def desc(t):
    d = Tensor()
    d.data = t.data_ptr()
    d.dtype = 0  # f32
    d.ndim = 1
    d.shape[0] = t.numel()
    d.strides[0] = 1
    return d


def main():
    so, n = sys.argv[1], int(sys.argv[2])
    lib = ctypes.CDLL(so)
    fn = lib.htam_kernel
    fn.restype = ctypes.c_int
    sets = [(torch.randn(n, device="cuda"), torch.empty(n, device="cuda")) for _ in range(4)]
    descs = [(desc(x), desc(y)) for x, y in sets]
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    k = [0]

    def call():
        i, o = descs[k[0] % len(descs)]
        k[0] += 1
        fn(ctypes.byref(i), 1, ctypes.byref(o), 1, stream)

    meds = []
    for _ in range(10):
        meds.append(1000.0 * triton.testing.do_bench(call, warmup=25, rep=100,
                                                     return_mode="median"))
    x, y = sets[0]
    call_ok = torch.equal(y, torch.relu(x)) if k[0] else False
    print(json.dumps({"tool": "triton.testing.do_bench", "n": n, "medians_us": meds,
                      "median_us": statistics.median(meds),
                      "cv": statistics.stdev(meds) / statistics.mean(meds),
                      "check": bool(call_ok)}))


if __name__ == "__main__":
    main()
