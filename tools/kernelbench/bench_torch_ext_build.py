#!/usr/bin/python3
"""How fast a KernelBench-style torch extension (a .cu that includes torch/extension.h and defines
a torch::Tensor wrapper, bound through load_inline) can be built, and by which route. On a CUDA
machine, each step in fresh directories, one JSON line per measurement, then a summary line:

  load_inline_cold      torch.utils.cpp_extension.load_inline as KernelBench calls it (ninja)
  load_inline_reload    the same call again in a fresh process, same build directory (ninja
                        finds nothing to do; the import)
  import_built          importing the built library by path (what htam's build cache does on a hit)
  gxx_main              g++ of load_inline's main.cpp (torch/extension.h + pybind11) alone
  gxx_pch_build         g++ precompiling torch/extension.h once (per PyTorch version and flags)
  gxx_main_pch          the same main.cpp with that precompiled header
  nvcc_full             nvcc of the .cu as written (torch headers in the device compile)
  nvcc_split            nvcc of the kernels alone (no torch header) with a launch stub per kernel
  gxx_wrappers_pch      g++ of the torch::Tensor wrappers (calling the stubs) with the PCH
  link_split            linking the split objects with PyTorch's libraries
  split_total           nvcc_split + gxx_wrappers_pch + link_split, run side by side
                        (the cold cost of the split build once the PCH exists)
  same_result           the split build's output equals load_inline's on the same input
  auto_split            kb_split.py (what the runner does with such a load_inline call) on the
                        same sources: plan, the job's precompiled header, both halves, link
  auto_split_cached     the same again in the same job, the precompiled header reused
  auto_same_result      its output equals load_inline's

Usage (repository root, a python3 with PyTorch+CUDA and nvcc on PATH):
  python3 tools/kernelbench/bench_torch_ext_build.py [--jobs N] [--skip-load-inline]
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

KERNELS = r"""
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
__global__ void scale_add_kernel(const float* a, const float* b, float* y, float s, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] * s + b[i];
}
"""

# What a KernelBench one-shot kernel looks like: the kernels and their torch::Tensor wrappers in
# one .cu that includes torch/extension.h.
FULL_CU = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
""" + KERNELS + r"""
torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
torch::Tensor scale_add_cuda(torch::Tensor a, torch::Tensor b, double s) {
    auto y = torch::empty_like(a);
    long long n = a.numel();
    scale_add_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
    return y;
}
"""
CPP_DECLS = ("torch::Tensor relu_cuda(torch::Tensor x);\n"
             "torch::Tensor scale_add_cuda(torch::Tensor a, torch::Tensor b, double s);\n")
FUNCTIONS = ["relu_cuda", "scale_add_cuda"]

# The split: the kernels with a host launch stub each (no torch header) ...
SPLIT_CU = "#include <cuda_runtime.h>\n" + KERNELS + r"""
void htam_launch_relu_kernel(dim3 g, dim3 b, size_t sh, cudaStream_t st,
                             const float* x, float* y, long long n) {
    relu_kernel<<<g, b, sh, st>>>(x, y, n);
}
void htam_launch_scale_add_kernel(dim3 g, dim3 b, size_t sh, cudaStream_t st,
                                  const float* a, const float* bb, float* y, float s, long long n) {
    scale_add_kernel<<<g, b, sh, st>>>(a, bb, y, s, n);
}
"""
# ... and the wrappers, each launch replaced by its stub, compiled by g++ with the PCH.
WRAPPERS_CPP = r"""#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
void htam_launch_relu_kernel(dim3 g, dim3 b, size_t sh, cudaStream_t st,
                             const float* x, float* y, long long n);
void htam_launch_scale_add_kernel(dim3 g, dim3 b, size_t sh, cudaStream_t st,
                                  const float* a, const float* bb, float* y, float s, long long n);
torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long long n = x.numel();
    htam_launch_relu_kernel((n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream(),
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
torch::Tensor scale_add_cuda(torch::Tensor a, torch::Tensor b, double s) {
    auto y = torch::empty_like(a);
    long long n = a.numel();
    htam_launch_scale_add_kernel((n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream(),
        a.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
    return y;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("relu_cuda", &relu_cuda, "relu_cuda");
    m.def("scale_add_cuda", &scale_add_cuda, "scale_add_cuda");
}
"""
MAIN_CPP = "#include <torch/extension.h>\n" + CPP_DECLS + r"""
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("relu_cuda", torch::wrap_pybind_function(relu_cuda), "relu_cuda");
    m.def("scale_add_cuda", torch::wrap_pybind_function(scale_add_cuda), "scale_add_cuda");
}
"""


def emit(**kv):
    print(json.dumps(kv), flush=True)


def timed(cmd, cwd, env=None):
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (cmd[0], p.returncode,
                                                    (p.stderr or p.stdout)[-1500:]))
    return dt


def child_python(code, env=None):
    """Runs code in a fresh interpreter; returns its last stdout line parsed as JSON."""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-1500:])
    return json.loads(p.stdout.strip().splitlines()[-1])


LOAD_INLINE = r"""
import json, sys, time, torch
from torch.utils.cpp_extension import load_inline
t0 = time.monotonic()
ext = load_inline(name="htam_bench_ext", cpp_sources=%r, cuda_sources=%r, functions=%r,
                  build_directory=%r, extra_cuda_cflags=["-O3"], verbose=False)
dt = time.monotonic() - t0
x = torch.randn(1 << 20, device="cuda")
torch.save((ext.relu_cuda(x).cpu(), ext.scale_add_cuda(x, x, 0.5).cpu(), x.cpu()), %r)
print(json.dumps({"seconds": dt, "so": ext.__file__}))
"""

IMPORT_SO = r"""
import importlib.util, json, sys, time, torch
t0 = time.monotonic()
spec = importlib.util.spec_from_file_location("htam_bench_ext", %r)
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
dt = time.monotonic() - t0
ref_relu, ref_sa, x = torch.load(%r)
x = x.cuda()
same = torch.equal(m.relu_cuda(x).cpu(), ref_relu) and torch.equal(m.scale_add_cuda(x, x, 0.5).cpu(), ref_sa)
print(json.dumps({"seconds": dt, "same": bool(same)}))
"""


def torch_flags():
    import torch
    from torch.utils import cpp_extension as ce
    try:
        incs = ce.include_paths(device_type="cuda")
    except TypeError:
        incs = ce.include_paths(cuda=True)
    incs = list(incs) + [sysconfig.get_paths()["include"]]
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    defs = ["-DTORCH_EXTENSION_NAME=htam_bench_ext", "-DTORCH_API_INCLUDE_EXTENSION_H",
            "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi]
    cuda_home = ce.CUDA_HOME or "/usr/local/cuda"
    libdirs = [os.path.join(os.path.dirname(torch.__file__), "lib"),
               os.path.join(cuda_home, "lib64")]
    major, minor = torch.cuda.get_device_capability()
    arch = "%d%d" % (major, minor)
    return incs, defs, libdirs, arch, cuda_home


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-load-inline", action="store_true")
    a = ap.parse_args()
    incs, defs, libdirs, arch, cuda_home = torch_flags()
    inc = ["-I" + p for p in incs]
    cxx = ["g++", "-O3", "-std=c++17", "-fPIC", "-w"] + defs
    nvcc = [os.path.join(cuda_home, "bin", "nvcc") if os.path.exists(
        os.path.join(cuda_home, "bin", "nvcc")) else "nvcc", "-O3", "-std=c++17",
        "--compiler-options", "-fPIC", "-w", "-gencode",
        "arch=compute_%s,code=sm_%s" % (arch, arch)] + defs
    work = tempfile.mkdtemp(prefix="htam-ext-build-")
    results = {}
    try:
        ref = os.path.join(work, "ref.pt")
        if not a.skip_load_inline:
            bdir = os.path.join(work, "load_inline")
            os.makedirs(bdir)
            r = child_python(LOAD_INLINE % (CPP_DECLS, FULL_CU, FUNCTIONS, bdir, ref))
            results["load_inline_cold"] = r["seconds"]
            emit(step="load_inline_cold", seconds=round(r["seconds"], 2))
            r2 = child_python(LOAD_INLINE % (CPP_DECLS, FULL_CU, FUNCTIONS, bdir, ref))
            emit(step="load_inline_reload", seconds=round(r2["seconds"], 2))
            r3 = child_python(IMPORT_SO % (r["so"], ref))
            emit(step="import_built", seconds=round(r3["seconds"], 3))
        d = os.path.join(work, "parts")
        os.makedirs(d)
        for name, text in (("main.cpp", MAIN_CPP), ("full.cu", FULL_CU), ("split.cu", SPLIT_CU),
                           ("wrappers.cpp", WRAPPERS_CPP),
                           ("torch_ext.h", "#include <torch/extension.h>\n"
                                           "#include <ATen/cuda/CUDAContext.h>\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        steps = [("gxx_main", cxx + inc + ["-c", "main.cpp", "-o", "main.o"]),
                 ("gxx_pch_build", cxx + inc + ["-x", "c++-header", "torch_ext.h", "-o",
                                                "torch_ext.h.gch"]),
                 ("gxx_main_pch", cxx + inc + ["-include", "torch_ext.h", "-Winvalid-pch",
                                               "-c", "main.cpp", "-o", "main_pch.o"]),
                 ("nvcc_full", nvcc + inc + ["-c", "full.cu", "-o", "full.o"])]
        for step, cmd in steps:
            results[step] = timed(cmd, d)
            emit(step=step, seconds=round(results[step], 2))
        torch_libs = ["-L" + p for p in libdirs] + [
            "-Wl,-rpath," + libdirs[0], "-lc10", "-lc10_cuda", "-ltorch", "-ltorch_cpu",
            "-ltorch_cuda", "-ltorch_python", "-lcudart"]
        split = [("nvcc_split", nvcc + ["-c", "split.cu", "-o", "split.o"]),
                 ("gxx_wrappers_pch", cxx + inc + ["-include", "torch_ext.h", "-Winvalid-pch",
                                                   "-c", "wrappers.cpp", "-o", "wrappers.o"])]
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=2) as pool:
            times = list(pool.map(lambda s: timed(s[1], d), split))
        for (step, _), t in zip(split, times):
            results[step] = t
            emit(step=step, seconds=round(t, 2))
        results["link_split"] = timed(["g++", "-shared", "split.o", "wrappers.o", "-o",
                                       "split_ext.so"] + torch_libs, d)
        emit(step="link_split", seconds=round(results["link_split"], 2))
        results["split_total"] = time.monotonic() - t0
        emit(step="split_total", seconds=round(results["split_total"], 2))
        if os.path.exists(ref):
            r = child_python(IMPORT_SO % (os.path.join(d, "split_ext.so"), ref))
            results["same_result"] = r["same"]
            emit(step="same_result", same=r["same"], import_seconds=round(r["seconds"], 3))
        # The runner's route: kb_split.py on load_inline's own arguments.
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import kb_split
        tc = kb_split.Toolchain(shutil.which(nvcc[0]) or nvcc[0], arch)
        pch_root = os.path.join(work, "pch")
        # auto_split: a job's first build, its precompiled header included (the runner keeps it
        # per job); auto_split_cached: a second kernel in the same job (the header reused).
        for step in ("auto_split", "auto_split_cached"):
            t0 = time.monotonic()
            p = kb_split.plan(FULL_CU, CPP_DECLS, FUNCTIONS)
            so = kb_split.build(p, "htam_bench_ext", tc, os.path.join(work, step), pch_root)
            results[step] = time.monotonic() - t0
            emit(step=step, seconds=round(results[step], 2))
        if os.path.exists(ref):
            r = child_python(IMPORT_SO % (so, ref))
            results["auto_same_result"] = r["same"]
            emit(step="auto_same_result", same=r["same"])
        summary = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in results.items()}
        if "load_inline_cold" in results:
            summary["ratio_load_inline_over_split"] = round(
                results["load_inline_cold"] / results["split_total"], 1)
            summary["ratio_load_inline_over_auto_split"] = round(
                results["load_inline_cold"] / results["auto_split"], 1)
        summary["cores"] = os.cpu_count()
        emit(summary=summary)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
