"""kb_fastpath.py (htam.load_cuda and the transparent load_inline fast path), on a machine without
a GPU: which sources need PyTorch's headers, the signature convention, the content-keyed cache
(with a stand-in nvcc that logs its runs), a real nvcc build where nvcc is installed, and the
argument checks of a bound function (with a stand-in library)."""
import ctypes
import multiprocessing
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import types
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "kernelbench"))
import kb_fastpath as fp  # noqa: E402

RELU_CU = r"""
__global__ void relu_kernel(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}
void relu(const float* x, float* y, long long n, cudaStream_t stream) {
  relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
}
"""
RELU_DECL = "void relu(const float* x, float* y, long long n, cudaStream_t stream)"

# KernelBench-style sources as agents write them.
TORCH_EXTENSION = r"""
#include <torch/extension.h>
__global__ void add_kernel(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
  auto c = torch::zeros_like(a);
  add_kernel<<<(a.numel() + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                c.data_ptr<float>(), a.numel());
  return c;
}
"""
ATEN_STREAM_ONLY = r"""
__global__ void k(float* x) { x[threadIdx.x] = 0.f; }
void launch(float* x) { k<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(x); }
"""
CHECK_MACRO_ONLY = r"""
void f(const float* x, int n) { TORCH_CHECK(n > 0, "empty"); }
"""
PYBIND_ONLY = r"""
void f(float* x) {}
PYBIND11_MODULE(m, mod) {}
"""
USING_NAMESPACE = r"""
using namespace torch;
void f(float* x) {}
"""
PURE_CUDA = r"""
#include <cuda_fp16.h>
// Before: torch::Tensor relu(torch::Tensor x) with TORCH_CHECK; now raw pointers.
/* at::cuda::getCurrentCUDAStream() is not needed: the stream comes as a parameter. */
__global__ void scale_kernel(const __half* x, __half* y, float at, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half(__half2float(x[i]) * at);
}
void scale(const __half* x, __half* y, float s, int n, cudaStream_t stream) {
  scale_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, s, n);
}
"""


def inline_args(**kw):
    a = {"name": "ext", "cpp_sources": "", "cuda_sources": None, "functions": None,
         "extra_cflags": None, "extra_cuda_cflags": None, "extra_ldflags": None,
         "extra_include_paths": None, "build_directory": None, "verbose": False,
         "with_cuda": None, "is_python_module": True, "with_pytorch_error_handling": True,
         "keep_intermediates": True}
    a.update(kw)
    return a


class ClassifierTest(unittest.TestCase):
    def test_sources_that_need_torch_headers(self):
        cases = {TORCH_EXTENSION: "includes torch/", ATEN_STREAM_ONLY: "uses at::",
                 CHECK_MACRO_ONLY: "uses TORCH_CHECK", PYBIND_ONLY: "uses PYBIND11_MODULE",
                 USING_NAMESPACE: "uses namespace torch",
                 "#include <ATen/cuda/CUDAContext.h>\n": "includes ATen/",
                 "#include <c10/cuda/CUDAStream.h>\n": "includes c10/",
                 "AT_DISPATCH_FLOATING_TYPES(t, \"f\", [&]{});": "uses AT_DISPATCH_FLOATING_TYPES",
                 "PyObject* f();": "uses PyObject"}
        for src, why in cases.items():
            self.assertEqual(fp.torch_dependency(src), why, src)

    def test_sources_that_do_not(self):
        # Comments that name torch, a variable called `at`: no dependency.
        self.assertEqual(fp.torch_dependency(PURE_CUDA), "")
        self.assertEqual(fp.torch_dependency(RELU_CU, RELU_DECL + ";"), "")
        # Either source decides: the C++ side of a load_inline call counts too.
        self.assertEqual(fp.torch_dependency(RELU_CU, "torch::Tensor relu(torch::Tensor x);"),
                         "uses torch::")

    def test_load_inline_plans(self):
        ok = inline_args(cpp_sources=RELU_DECL + ";", cuda_sources=RELU_CU, functions=["relu"])
        decls, why = fp.fast_inline_plan(ok, "cuda:0")
        self.assertEqual(why, "")
        self.assertEqual(fp.parse_signature(decls[0]).decl,
                         "void relu(const float*, float*, long long, cudaStream_t)")
        # functions as a dict (name -> docstring) and as one string; declaration in the CUDA.
        for functions in ({"relu": "ReLU"}, "relu"):
            d, _ = fp.fast_inline_plan(inline_args(cuda_sources=RELU_CU, functions=functions),
                                       "cuda")
            self.assertTrue(d, functions)
        refusals = [
            (inline_args(cpp_sources=RELU_DECL + ";", cuda_sources=RELU_CU, functions=["relu"]),
             "cpu", "not on a CUDA device"),
            (inline_args(cpp_sources="torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);",
                         cuda_sources=TORCH_EXTENSION, functions=["add_cuda"]), "cuda",
             "needs PyTorch's headers (uses torch::)"),
            (inline_args(cuda_sources=RELU_CU, functions=["gelu"]), "cuda",
             "no declaration of gelu"),
            (inline_args(cuda_sources=RELU_CU, functions=["relu_kernel"]), "cuda",
             "no declaration of relu_kernel"),
            (inline_args(cuda_sources=RELU_CU, functions=["relu"], is_python_module=False),
             "cuda", "not a Python module"),
            (inline_args(cpp_sources="void f(const float* x, int n) {}", functions=["f"]),
             "cuda", "no CUDA sources"),
            (inline_args(cuda_sources="void g(std::vector<int>& v) {}", functions=["g"]),
             "cuda", "templates are not supported"),
        ]
        for args, device, why in refusals:
            decls, got = fp.fast_inline_plan(args, device)
            self.assertIsNone(decls)
            self.assertIn(why, got)

    def test_host_only_declarations_are_dropped(self):
        # The cpp side of a load_inline call usually only declares for pybind11.
        self.assertEqual(fp._strip_declarations(RELU_DECL + " ;\n", [RELU_DECL]), "")
        host = RELU_DECL + ";\nvoid helper(float* x) { }\n"
        self.assertEqual(fp._strip_declarations(host, [RELU_DECL]), host)


class SignatureTest(unittest.TestCase):
    def test_accepted(self):
        s = fp.parse_signature("void relu(const float* __restrict__ x, float *y, int64_t n, "
                               "cudaStream_t stream);")
        self.assertEqual([(p.kind, p.name, p.dtype) for p in s.params],
                         [("pointer", "x", "float32"), ("pointer", "y", "float32"),
                          ("scalar", "n", None), ("stream", "stream", None)])
        self.assertTrue(s.has_stream)
        self.assertEqual(s.decl, "void relu(const float*, float*, int64_t, cudaStream_t)")
        s = fp.parse_signature('extern "C" int count(const __half* a, unsigned int n, bool f)')
        self.assertEqual(s.ret, "int")
        self.assertEqual([p.dtype for p in s.params], ["float16", None, None])
        self.assertEqual([p.ctype for p in s.params],
                         [ctypes.c_void_p, ctypes.c_uint, ctypes.c_bool])
        s = fp.parse_signature("double norm(const double*, size_t, float)")
        self.assertEqual([p.name for p in s.params], ["arg0", "arg1", "arg2"])
        self.assertEqual(fp.parse_signature("cudaError_t run(void* p)").ret, "error")
        self.assertEqual(fp.parse_signature("void nothing(void)").params, [])
        for t, dtype in (("__nv_bfloat16", "bfloat16"), ("int64_t", "int64"), ("int", "int32"),
                         ("uint8_t", "uint8"), ("float4", "float32"), ("void", None)):
            self.assertEqual(fp.parse_signature("void f(%s* p)" % t).params[0].dtype, dtype)

    def test_refused_with_the_reason(self):
        cases = {"__global__ void k(float* x)": "is a __global__ kernel",
                 "torch::Tensor f(torch::Tensor x)": "return type torch Tensor",
                 "void f(std::vector<float> v)": "templates are not supported",
                 "void f(float& x)": "references are not supported",
                 "void f(float* x, int n = 4)": "default arguments",
                 "void f(cudaStream_t s, float* x)": "cudaStream_t must be the last",
                 "void f(float** x)": "type float** is not supported",
                 "float* f(int n)": "pointer return type",
                 "void f(MyStruct* s)": "pointer to MyStruct is not supported",
                 "relu": "not a function declaration"}
        for decl, why in cases.items():
            with self.assertRaises(fp.SignatureError, msg=decl) as cm:
                fp.parse_signature(decl)
            self.assertIn(why, str(cm.exception))

    def test_declarations_found_in_sources(self):
        self.assertEqual(fp.find_declaration("relu", "", RELU_CU),
                         "void relu(const float* x, float* y, long long n, cudaStream_t stream)")
        # The kernel of the same stem, calls and returns are not declarations.
        src = "__global__ void go(float* x) {}\nvoid run(float* x) { go<<<1,1>>>(x); }\n" \
              "int twice(int n) { return run2(n); }"
        self.assertEqual(fp.find_declaration("go", src), "")
        self.assertEqual(fp.find_declaration("run2", src), "")
        self.assertEqual(fp.find_declaration("run", src), "void run(float* x)")

    def test_generated_wrapper(self):
        w = fp.wrapper_source([fp.parse_signature("float f(const float* x, cudaStream_t s)")])
        self.assertIn('extern "C" int htam_fast_f(const float* p0, cudaStream_t p1, '
                      'float* htam_ret)', w)
        self.assertIn("*htam_ret = f(p0, p1);", w)
        self.assertIn("return (int)cudaGetLastError();", w)


FAKE_NVCC = r"""#!/bin/sh
# A stand-in nvcc: logs its run, takes a while, writes -o OUT (the .cu's text plus flags).
if [ "$1" = "--version" ]; then echo "fake nvcc 1.0"; exit 0; fi
echo run >> "$FAKE_NVCC_LOG"
out=""; prev=""; cu=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  case "$a" in *.cu) cu="$a";; esac
  prev="$a"
done
sleep 0.3
cat "$cu" > "$out.part"
echo "$@" | sed 's#/[^ ]*/htam-fast-[^/ ]*/##g' >> "$out.part"
mv "$out.part" "$out"
"""


def build_one(args):
    cache, work, nvcc, flags = args
    b = fp.Build(RELU_CU, "", [fp.parse_signature(RELU_DECL)], "sm_90", nvcc, flags)
    path, hit, key = fp.build_cached(b, cache, work)
    with open(path, "rb") as f:
        return path, hit, f.read()


class CacheTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="htam-fastpath-test-")
        self.cache = os.path.join(self.dir, "cache")
        self.work = os.path.join(self.dir, "work")
        os.makedirs(self.work)
        self.nvcc = os.path.join(self.dir, "nvcc")
        with open(self.nvcc, "w") as f:
            f.write(FAKE_NVCC)
        os.chmod(self.nvcc, 0o755)
        self.log = os.path.join(self.dir, "nvcc.log")
        os.environ["FAKE_NVCC_LOG"] = self.log

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def runs(self):
        if not os.path.exists(self.log):
            return 0
        with open(self.log) as f:
            return len(f.read().split())

    def test_second_call_hits_and_other_flags_miss(self):
        p1, hit1, _ = build_one((self.cache, self.work, self.nvcc, []))
        self.assertFalse(hit1)
        self.assertEqual(self.runs(), 1)
        p2, hit2, _ = build_one((self.cache, self.work, self.nvcc, []))
        self.assertTrue(hit2)
        self.assertEqual(p1, p2)
        self.assertEqual(self.runs(), 1, "a hit ran nvcc")
        p3, hit3, _ = build_one((self.cache, self.work, self.nvcc, ["-O3"]))
        self.assertFalse(hit3)
        self.assertNotEqual(p1, p3)
        self.assertEqual(self.runs(), 2)
        # The architecture and the declarations are part of the key.
        sig = [fp.parse_signature(RELU_DECL)]
        keys = {fp.Build(RELU_CU, "", sig, "sm_90", self.nvcc).key(),
                fp.Build(RELU_CU, "", sig, "sm_80", self.nvcc).key(),
                fp.Build(RELU_CU, "", [fp.parse_signature(
                    "void relu(const float* x, float* y, long long n)")], "sm_90",
                    self.nvcc).key(),
                fp.Build(RELU_CU + " ", "", sig, "sm_90", self.nvcc).key()}
        self.assertEqual(len(keys), 4)
        # Entries are named by key, read-only; no temporary file is left; builds are removed.
        names = sorted(os.listdir(self.cache))
        self.assertEqual(len(names), 2)
        for n in names:
            self.assertRegex(n, r"^fast-[0-9a-f]{64}\.so$")
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.cache, n)).st_mode), 0o444)
        self.assertEqual(os.listdir(self.work), [])

    def test_concurrent_builders_do_not_corrupt(self):
        jobs = [(self.cache, self.work, self.nvcc, [])] * 6
        with multiprocessing.get_context("fork").Pool(6) as pool:
            results = pool.map(build_one, jobs)
        paths = {r[0] for r in results}
        contents = {r[2] for r in results}
        self.assertEqual(len(paths), 1, paths)
        self.assertEqual(len(contents), 1, "builders saw different libraries")
        self.assertIn(b"relu_kernel", contents.pop())
        self.assertEqual(len(os.listdir(self.cache)), 1, os.listdir(self.cache))
        # Afterwards, a hit.
        self.assertTrue(build_one(jobs[0])[1])

    def test_no_cache_directory_builds_privately(self):
        p, hit, _ = build_one(("", self.work, self.nvcc, []))
        self.assertFalse(hit)
        self.assertTrue(p.startswith(self.work + "/htam-fast-"))

    def test_nvcc_failure_is_a_build_error(self):
        with open(self.nvcc, "w") as f:
            f.write("#!/bin/sh\n[ \"$1\" = --version ] && { echo v; exit 0; }\n"
                    "echo 'fast.cu(3): error: identifier \"x\" is undefined' >&2; exit 1\n")
        with self.assertRaises(fp.BuildError) as cm:
            build_one((self.cache, self.work, self.nvcc, []))
        self.assertIn('fast.cu(3): error: identifier "x" is undefined', str(cm.exception))
        self.assertFalse(os.path.exists(self.cache) and os.listdir(self.cache))


class FakeTensor:
    def __init__(self, dtype="float32", device="cuda", contiguous=True, ptr=4096):
        self.dtype = "torch." + dtype
        self.device = types.SimpleNamespace(type=device, index=None)
        self._c, self._p = contiguous, ptr

    def __str__(self):
        return "FakeTensor"

    def is_contiguous(self):
        return self._c

    def data_ptr(self):
        return self._p


class FakeEntry:
    """Stands in for a ctypes function of the library: records the converted arguments."""

    def __init__(self, rc=0, ret=None):
        self.calls, self.rc, self.ret = [], rc, ret
        self.argtypes, self.restype = None, None

    def __call__(self, *args):
        self.calls.append(args)
        if self.ret is not None:
            args[-1]._obj.value = self.ret
        return self.rc


class CallTest(unittest.TestCase):
    def bound(self, decl, rc=0, ret=None):
        entry = FakeEntry(rc, ret)
        lib = types.SimpleNamespace(htam_fast_error_string=lambda e: b"invalid configuration "
                                    b"argument")
        setattr(lib, "htam_fast_" + fp.parse_signature(decl).name, entry)
        return fp.FastFunction(lib, fp.parse_signature(decl), "ext"), entry

    def setUp(self):
        self.saved = fp.current_stream
        fp.current_stream = lambda: 1234

    def tearDown(self):
        fp.current_stream = self.saved

    def test_tensors_pass_their_address_and_the_stream_is_torchs(self):
        f, entry = self.bound(RELU_DECL)
        f(FakeTensor(ptr=100), FakeTensor(ptr=200), 7)
        self.assertEqual(entry.calls, [(100, 200, 7, 1234)])
        f(None, 4096, 1)  # None is NULL; an int is an address
        self.assertEqual(entry.calls[-1], (None, 4096, 1, 1234))

    def test_clear_errors(self):
        f, _ = self.bound(RELU_DECL)
        cases = [((FakeTensor(device="cpu"), FakeTensor(), 1), "must be on the GPU"),
                 ((FakeTensor(contiguous=False), FakeTensor(), 1), "x is not contiguous"),
                 ((FakeTensor("float16"), FakeTensor(), 1), "x is float16 but the parameter "
                  "is float*"),
                 ((FakeTensor(), FakeTensor(), 1.5), "n (long long) takes a Python int"),
                 ((FakeTensor(), [1.0], 1), "y takes a tensor, an int address or None"),
                 ((FakeTensor(), FakeTensor()), "takes 3 arguments, 2 given (the cudaStream_t "
                  "is PyTorch's current stream"),
                 ((FakeTensor(), FakeTensor(), 1, 99), "takes 3 arguments, 4 given")]
        for args, why in cases:
            with self.assertRaises(TypeError, msg=why) as cm:
                f(*args)
            self.assertIn(why, str(cm.exception))
            self.assertIn("ext.relu", str(cm.exception))

    def test_launch_errors_raise_and_returns_come_back(self):
        f, _ = self.bound(RELU_DECL, rc=9)
        with self.assertRaises(RuntimeError) as cm:
            f(FakeTensor(), FakeTensor(), 1)
        self.assertIn("ext.relu: CUDA error 9 (invalid configuration argument)",
                      str(cm.exception))
        g, entry = self.bound("double mean(const float* x, int n)", ret=2.5)
        self.assertEqual(g(FakeTensor(), 3), 2.5)
        self.assertEqual(entry.calls[0][:2], (4096, 3))


def have_torch():
    try:
        import torch.utils.cpp_extension  # noqa: F401
        return True
    except Exception:  # noqa: BLE001
        return False


@unittest.skipUnless(have_torch(), "no torch for %s: the runner's load_inline wrapper is not "
                     "tested" % sys.executable)
class TransparentTest(unittest.TestCase):
    """kb_runner's load_inline: which calls take the fast path (stand-ins record the calls)."""

    def setUp(self):
        import torch
        import torch.utils.cpp_extension as ce
        import kb_runner
        self.ce, self.runner = ce, kb_runner
        # The key of PyTorch's path reads the device's capability: an H100's, no GPU needed.
        kb_runner.torch = types.SimpleNamespace(__version__=torch.__version__, cuda=types.
                                                SimpleNamespace(get_device_capability=lambda:
                                                                (9, 0)))
        self.saved = (ce.load_inline, fp.load_inline_fast)
        self.calls = []
        self.fast_error = None

        def slow(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                 extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
                 build_directory=None, verbose=False, with_cuda=None, is_python_module=True,
                 with_pytorch_error_handling=True, keep_intermediates=True):
            self.calls.append(("slow", name))
            return "slow module"

        def fast(args, decls):
            self.calls.append(("fast", args["name"], tuple(decls)))
            if self.fast_error:
                raise self.fast_error
            return "fast module"

        ce.load_inline = self.slow = slow
        fp.load_inline_fast = fast
        self.dir = tempfile.mkdtemp(prefix="htam-fastpath-runner-")

    def tearDown(self):
        self.ce.load_inline, fp.load_inline_fast = self.saved
        shutil.rmtree(self.dir, ignore_errors=True)

    def install(self, device, fast_path=True):
        self.ce.load_inline = self.slow  # the runner wraps PyTorch's once per harness
        builds = []
        self.runner.install_build_cache("", self.dir, device, builds, fast_path)
        return builds

    def test_only_calls_without_torch_headers_on_cuda_take_the_fast_path(self):
        builds = self.install("cuda")
        self.assertEqual(self.ce.load_inline("a", RELU_DECL + ";", cuda_sources=RELU_CU,
                                             functions=["relu"]), "fast module")
        self.assertEqual(self.calls[-1], ("fast", "a", (RELU_DECL,)))
        self.assertEqual(self.ce.load_inline(
            "b", "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);",
            cuda_sources=TORCH_EXTENSION, functions=["add_cuda"]), "slow module")
        self.assertEqual(self.calls[-1], ("slow", "b"))
        self.assertEqual([b["name"] for b in builds], ["b"])  # the fast path records its own

    def test_cpu_and_the_option_off_keep_pytorchs_load_inline(self):
        self.install("cpu")
        self.ce.load_inline("a", RELU_DECL + ";", cuda_sources=RELU_CU, functions=["relu"])
        self.install("cuda", fast_path=False)
        self.ce.load_inline("a", RELU_DECL + ";", cuda_sources=RELU_CU, functions=["relu"])
        self.assertEqual(self.calls, [("slow", "a"), ("slow", "a")])

    def test_a_failed_fast_build_falls_back_and_says_why(self):
        builds = self.install("cuda")
        self.fast_error = fp.BuildError("nvcc failed (exit 1):\nfast.cu(9): error: x")
        self.assertEqual(self.ce.load_inline("a", RELU_DECL + ";", cuda_sources=RELU_CU,
                                             functions=["relu"]), "slow module")
        self.assertEqual([c[0] for c in self.calls], ["fast", "slow"])
        self.assertEqual(builds[0]["fast_failed"], "nvcc failed (exit 1):")


NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else "")


@unittest.skipUnless(NVCC, "nvcc not found (PATH, /usr/local/cuda/bin): the real build is not "
                     "tested here")
class NvccTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="htam-fastpath-nvcc-")
        fp.configure(cache_dir=os.path.join(self.dir, "cache"), work_dir=self.dir, nvcc=NVCC,
                     builds=[])

    def tearDown(self):
        fp.configure()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_load_cuda_builds_a_library_with_the_entry_points(self):
        builds = []
        fp.configure(cache_dir=os.path.join(self.dir, "cache"), work_dir=self.dir, nvcc=NVCC,
                     builds=builds)
        m = fp.load_cuda("relu_ext", RELU_CU, [RELU_DECL])
        self.assertTrue(callable(m.relu))
        self.assertEqual(m.relu.__doc__, "void relu(const float*, float*, long long, "
                         "cudaStream_t)")
        out = subprocess.run(["nm", "-D", m.__file__], capture_output=True, text=True).stdout
        self.assertIn("htam_fast_relu", out)
        self.assertIn("htam_fast_error_string", out)
        m2 = fp.load_cuda("relu_ext", RELU_CU, [RELU_DECL])
        self.assertEqual([b["hit"] for b in builds], [False, True])
        self.assertEqual(m2.__file__, m.__file__)
        print("\nnvcc fast path: cold build %.2f s, cache hit %.3f s" %
              (builds[0]["seconds"], builds[1]["seconds"]))

    def test_load_inline_sources_through_the_fast_path(self):
        a = inline_args(name="inl", cpp_sources=RELU_DECL + ";", cuda_sources=RELU_CU,
                        functions=["relu"], extra_cuda_cflags=["-O3"])
        decls, why = fp.fast_inline_plan(a, "cuda")
        self.assertEqual(why, "")
        m = fp.load_inline_fast(a, decls)
        self.assertTrue(callable(m.relu))

    def test_errors_name_the_line_and_a_mismatched_declaration_fails_to_link(self):
        with self.assertRaises(fp.BuildError) as cm:
            fp.load_cuda("bad", RELU_CU.replace("fmaxf(x[i], 0.f)", "fmaxf(z[i], 0.f)"),
                         [RELU_DECL])
        self.assertIn('identifier "z" is undefined', str(cm.exception))
        # Declared with int n, defined with long long n: refused at build time, not at load.
        with self.assertRaises(fp.BuildError) as cm:
            fp.load_cuda("mismatch", RELU_CU, ["void relu(const float* x, float* y, int n, "
                                               "cudaStream_t stream)"])
        self.assertIn("relu", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
