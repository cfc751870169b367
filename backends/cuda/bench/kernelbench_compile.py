"""The KernelBench evaluation path on the GPU machine, for the side-by-side throughput ratio: one
candidate = torch.utils.cpp_extension.load_inline of the kernel (fresh build directory, so the
compile is real), a correctness check against PyTorch, and a timing loop (CUDA events, 20
repetitions after 3 warm-up calls), as KernelBench's eval does. Prints one JSON line per kernel
with the seconds of each stage and the candidates/min this path reaches.
    python3 kernelbench_compile.py [relu] [scale_add]

--suite TASK[:VARIANT,...] ...: the same path over the suite's own lineage variants (the kernels
htam-bench eval and `one_run.sh modes` evaluate), so that the two paths are compared on the same
kernels. Each lean-ABI source (configs/tasks/T/variants/cuda/*.cu) is built with load_inline
together with a small torch binding that hands its tensors to `htam_kernel`, then checked as
KernelBench checks a ModelNew (5 trials with fresh inputs against the PyTorch operator, its
default atol = rtol = 1e-2) and timed as KernelBench times it (3 warm-up calls, 100 trials, CUDA
events). Without variants a task gives its first lineage variant.
    python3 kernelbench_compile.py --suite gelu softmax:v2,v5 sgemm"""
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


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# The PyTorch operator of each suite task (KernelBench's Model), on the task's first seen shape.
SUITE_REF = {
    "gelu": lambda x: torch.nn.functional.gelu(x),
    "rowsum": lambda x: x.sum(dim=1),
    "softmax": lambda x: torch.softmax(x, dim=1),
    "sgemm": lambda a, b: a @ b,
    "scan": lambda x: torch.cumsum(x, 0, dtype=torch.int32),
    "transpose": lambda x: x.t().contiguous(),
}
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32}

BINDING = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
static htam_tensor htam_wrap_(const torch::Tensor& t) {
  htam_tensor h{};
  h.data = t.data_ptr();
  h.ndim = (int32_t)t.dim();
  switch (t.scalar_type()) {
    case torch::kFloat: h.dtype = HTAM_F32; break;
    case torch::kHalf: h.dtype = HTAM_F16; break;
    case torch::kBFloat16: h.dtype = HTAM_BF16; break;
    case torch::kInt: h.dtype = HTAM_I32; break;
    default: TORCH_CHECK(false, "dtype");
  }
  for (int i = 0; i < h.ndim; ++i) { h.shape[i] = t.size(i); h.strides[i] = t.stride(i); }
  return h;
}
void run(std::vector<torch::Tensor> ins, std::vector<torch::Tensor> outs) {
  std::vector<htam_tensor> a, b;
  for (auto& t : ins) a.push_back(htam_wrap_(t));
  for (auto& t : outs) b.push_back(htam_wrap_(t));
  int rc = htam_kernel(a.data(), (int)a.size(), b.data(), (int)b.size(),
                       (htam_stream)at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(rc == 0, "htam_kernel returned ", rc);
}
"""
SUITE_CPP = "void run(std::vector<torch::Tensor> ins, std::vector<torch::Tensor> outs);"


def suite_inputs(spec, dims, gen):
    ins = []
    for i in spec["inputs"]:
        shape = [dims[d] for d in i["shape"]]
        dt = DTYPES[i["dtype"]]
        if dt == torch.int32:
            ins.append(torch.randint(-100, 100, shape, dtype=dt, device="cuda", generator=gen))
        else:
            ins.append(torch.randn(shape, device="cuda", generator=gen).to(dt))
    return ins


def suite_one(task, variant):
    tdir = os.path.join(ROOT, "configs", "tasks", task)
    spec = json.load(open(os.path.join(tdir, "task.json")))
    lin = json.load(open(os.path.join(tdir, "lineage.json")))
    v = next(x for x in lin["variants"] if x["id"] == variant)
    src = open(os.path.join(tdir, v["file"])).read()
    dims = spec["shapes"]["seen"][0]
    row = {"path": "torch.utils.cpp_extension.load_inline", "task": task, "variant": variant,
           "file": v["file"], "torch": torch.__version__, "nproc": os.cpu_count()}
    build = tempfile.mkdtemp(prefix="kb-")
    t0 = time.time()
    try:
        mod = load_inline(name=f"kb_{task}_{variant}", cpp_sources=SUITE_CPP,
                          cuda_sources=src + BINDING, functions=["run"],
                          extra_include_paths=[os.path.join(ROOT, "sdk", "include")],
                          extra_cuda_cflags=["-O3"], build_directory=build, verbose=False)
    except Exception as e:  # the path's own verdict: the candidate does not build
        row.update(status="compile_error", compile_s=time.time() - t0, total_s=time.time() - t0,
                   error=str(e)[-400:])
        return row
    t1 = time.time()
    gen = torch.Generator(device="cuda")
    ok = True
    for trial in range(5):  # KernelBench: num_correct_trials=5, fresh inputs each
        gen.manual_seed(1000 + trial)
        ins = suite_inputs(spec, dims, gen)
        ref = SUITE_REF[task](*ins)
        out = torch.empty_like(ref)
        mod.run(ins, [out])
        torch.cuda.synchronize()
        if out.dtype == torch.int32:
            ok = ok and bool(torch.equal(out, ref))
        else:
            ok = ok and bool(torch.allclose(out.float(), ref.float(), rtol=1e-2, atol=1e-2))
    t2 = time.time()
    for _ in range(3):
        mod.run(ins, [out])
    times = []
    for _ in range(100):  # KernelBench: num_perf_trials=100
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        mod.run(ins, [out])
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    t3 = time.time()
    times.sort()
    row.update(status="ok" if ok else "incorrect", compile_s=t1 - t0, verify_s=t2 - t1,
               time_s=t3 - t2, total_s=t3 - t0, candidates_per_min=60.0 / (t3 - t0),
               median_us=times[len(times) // 2])
    return row


def main():
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    args = sys.argv[1:]
    if args and args[0] == "--suite":
        t_all = time.time()
        n = 0
        for item in args[1:]:
            task, _, vs = item.partition(":")
            if vs:
                variants = vs.split(",")
            else:
                lin = json.load(open(os.path.join(ROOT, "configs", "tasks", task, "lineage.json")))
                variants = [lin["variants"][0]["id"]]
            for v in variants:
                print(json.dumps(suite_one(task, v)), flush=True)
                n += 1
        wall = time.time() - t_all
        print(json.dumps({"summary": "suite", "candidates": n, "wall_s": wall,
                          "candidates_per_min": 60.0 * n / wall if wall else 0}), flush=True)
        return
    for name in args or ["relu"]:
        print(json.dumps(one(name)), flush=True)


if __name__ == "__main__":
    main()
