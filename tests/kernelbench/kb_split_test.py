"""kb_split.py: the split build of load_inline sources that include PyTorch's headers — which
sources it splits (the usual KernelBench kernel: __global__ kernels and torch::Tensor wrappers in
one .cu), what each half holds (no PyTorch header on the nvcc side, every launch rewritten as a
stub call on the g++ side), what it refuses with the reason, and (where nvcc is installed) that
the kernel half compiles with nvcc alone. The whole build against a CUDA PyTorch runs on the GPU
machine (tools/gpu/one_run.sh kbcompile)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "kernelbench"))
import kb_split  # noqa: E402

RELU = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>
#define BLOCK 256   // threads per block

__device__ __forceinline__ float relu1(float v) { return v > 0.f ? v : 0.f; }

static int blocks_for(long long n) { return (int)((n + BLOCK - 1) / BLOCK); }

int launched_blocks(int n) { return (n + BLOCK - 1) / BLOCK; }

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = relu1(x[i]);   /* a comment with <<< inside */
}

__global__ void __launch_bounds__(256) scale_kernel(float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= s;
}

torch::Tensor relu_scale(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<blocks_for(n), BLOCK>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    scale_kernel<<<blocks_for(n), BLOCK, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), (float)s, n);
    return y;
}
"""
CPP = "torch::Tensor relu_scale(torch::Tensor x, double s);"

DISPATCH = r"""
#include <torch/extension.h>
template <typename scalar_t>
__global__ void k(const scalar_t* x, scalar_t* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }
torch::Tensor f(torch::Tensor x) {
    auto y = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "f", ([&] {
        k<scalar_t><<<1, 256>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), x.numel());
    }));
    return y;
}
"""


class SplitTest(unittest.TestCase):
    def test_the_usual_kernelbench_source_is_split(self):
        p = kb_split.plan(RELU, CPP, ["relu_scale"])
        self.assertEqual(sorted(k.name for k in p.kernels), ["relu_kernel", "scale_kernel"])
        self.assertNotRegex(p.kernel_tu, r"torch|ATen|at::")
        for needle in ("__device__ __forceinline__ float relu1", "#define BLOCK 256",
                       "#include <cuda_fp16.h>", "static int blocks_for",
                       "void htam_launch_relu_kernel(dim3 htam_grid, dim3 htam_block, size_t "
                       "htam_shmem, cudaStream_t htam_stream, const float* __restrict__ x, "
                       "float* __restrict__ y, int n)",
                       "relu_kernel<<<htam_grid, htam_block, htam_shmem, htam_stream>>>(x, y, n)"):
            self.assertIn(needle, p.kernel_tu)
        m = kb_split.module_source(p)
        self.assertNotIn("<<<", m)
        self.assertNotIn("__global__", m)
        self.assertIn("htam_launch_relu_kernel(dim3(blocks_for(n)), dim3(BLOCK), (size_t)(0), "
                      "(cudaStream_t)(0), x.data_ptr<float>(), y.data_ptr<float>(), n)", m)
        self.assertIn("(cudaStream_t)(at::cuda::getCurrentCUDAStream())", m)
        self.assertIn("static int blocks_for(long long n) {", m)  # each half its own copy
        self.assertIn('m.def("relu_scale", &relu_scale, "relu_scale");', m)
        self.assertIn("int launched_blocks(int n);", m)  # defined once, with the kernels
        self.assertIn("int launched_blocks(int n) {", p.kernel_tu)
        self.assertIn("#include <torch/extension.h>", m)

    def test_what_it_refuses_says_why(self):
        for src, fns, says in (
                (DISPATCH, ["f"], "template"),
                (RELU.replace("relu_kernel<<<", "relu_kernel<float><<<"), ["relu_scale"],
                 "template arguments"),
                ("namespace a { __global__ void k(float* y) {} }", ["f"], "namespaces"),
                (RELU, ["missing_fn"], "missing_fn is not defined"),
                ("__global__ void k(float*) {}\ntorch::Tensor f(torch::Tensor x) "
                 "{ k<<<1,1>>>(nullptr); return x; }", ["f"], "unnamed parameter"),
                ("__global__ void k(at::Half* y, int n) {}\ntorch::Tensor f(torch::Tensor x) "
                 "{ return x; }", ["f"], "uses PyTorch's types"),
                ("torch::Tensor f(torch::Tensor x) { return x; }", ["f"], "no __global__")):
            with self.subTest(says=says):
                with self.assertRaises(kb_split.SplitRefused) as c:
                    kb_split.plan(src, "", fns)
                self.assertIn(says, str(c.exception))

    @unittest.skipUnless(shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc"),
                         "no nvcc here")
    def test_the_kernel_half_compiles_with_nvcc_alone(self):
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        with open(os.path.join(d, "k.cu"), "w") as f:
            f.write(kb_split.plan(RELU, CPP, ["relu_scale"]).kernel_tu)
        r = subprocess.run([nvcc, "-c", "k.cu", "-o", "k.o", "-gencode",
                            "arch=compute_90,code=sm_90"], cwd=d, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        syms = subprocess.run(["nm", "-C", os.path.join(d, "k.o")], capture_output=True,
                              text=True).stdout
        self.assertIn("htam_launch_relu_kernel(dim3, dim3, unsigned long, CUstream_st*, "
                      "float const*, float*, int)", syms)


if __name__ == "__main__":
    unittest.main()
