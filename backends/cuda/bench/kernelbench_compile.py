"""The KernelBench evaluation path on the GPU machine, for the side-by-side throughput ratio: one
candidate = torch.utils.cpp_extension.load_inline of the kernel (fresh build directory, so the
compile is real), a correctness check against PyTorch, and a timing loop (CUDA events, 20
repetitions after 3 warm-up calls), as KernelBench's eval does. Prints one JSON line per kernel
with the seconds of each stage and the candidates/min this path reaches.
    python3 kernelbench_compile.py [relu] [scale_add]"""
import json
import os
import sys
import tempfile
import time

import torch
from torch.utils.cpp_extension import load_inline

KERNELS = {
    "relu": (r"""
#include <torch/extension.h>
__global__ void relu_k(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor run(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  relu_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
""", lambda x: torch.relu(x)),
    "scale_add": (r"""
#include <torch/extension.h>
__global__ void scale_add_k(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.f * x[i] + 1.f;
}
torch::Tensor run(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  scale_add_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
""", lambda x: 2 * x + 1),
}
CPP_SRC = "torch::Tensor run(torch::Tensor x);"


def one(name):
    src, ref = KERNELS[name]
    build = tempfile.mkdtemp(prefix="kb-")
    t0 = time.time()
    mod = load_inline(name="kb_" + name, cpp_sources=CPP_SRC, cuda_sources=src,
                      functions=["run"], build_directory=build, verbose=False)
    t1 = time.time()
    x = torch.randn(1 << 24, device="cuda")
    ok = bool(torch.allclose(mod.run(x), ref(x)))
    torch.cuda.synchronize()
    t2 = time.time()
    for _ in range(3):
        mod.run(x)
    times = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        mod.run(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    t3 = time.time()
    times.sort()
    total = t3 - t0
    return {"path": "torch.utils.cpp_extension.load_inline", "kernel": name, "compile_s": t1 - t0,
            "verify_s": t2 - t1, "time_s": t3 - t2, "total_s": total,
            "candidates_per_min": 60.0 / total, "median_us": times[len(times) // 2],
            "check": ok, "torch": torch.__version__, "nproc": os.cpu_count()}


def main():
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    for name in sys.argv[1:] or ["relu"]:
        print(json.dumps(one(name)), flush=True)


if __name__ == "__main__":
    main()
