"""Compile cost of the KernelBench path on the GPU machine: torch.utils.cpp_extension.load_inline of
a trivial relu extension (fresh build directory), one sample; prints JSON with the seconds."""
import json
import os
import tempfile
import time

import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
__global__ void relu_k(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  relu_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
CPP_SRC = "torch::Tensor relu(torch::Tensor x);"


def main():
    build = tempfile.mkdtemp(prefix="kb-")
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    t0 = time.time()
    mod = load_inline(name="kb_relu", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["relu"], build_directory=build, verbose=False)
    compile_s = time.time() - t0
    x = torch.randn(1 << 20, device="cuda")
    ok = torch.equal(mod.relu(x), torch.relu(x))
    print(json.dumps({"path": "torch.utils.cpp_extension.load_inline", "compile_s": compile_s,
                      "check": bool(ok), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
