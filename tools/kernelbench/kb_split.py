#!/usr/bin/python3
"""The split build of a load_inline call whose CUDA source needs PyTorch's headers (the usual
KernelBench kernel: __global__ kernels and torch::Tensor wrappers in one .cu that includes
torch/extension.h). Compiling PyTorch's headers is what takes load_inline a minute; here

  - the kernels (with their __device__ helpers and every torch-free declaration) go through nvcc
    alone, with one host launch stub per kernel: no PyTorch header in that translation unit;
  - the wrappers, each `kernel<<<grid, block, shmem, stream>>>(args)` rewritten as a call of the
    kernel's stub, and the pybind11 module load_inline would generate go through g++ with a
    precompiled torch/extension.h (built once per PyTorch, compiler and flags, then reused);
  - both compile side by side and link with PyTorch's libraries into the module load_inline
    would have built.

plan(cuda_sources, cpp_sources, functions) says whether a call can be split and why not (template
kernels, namespaces, a kernel that itself needs PyTorch, launches it cannot rewrite, ...); a call
it refuses goes to load_inline as before (kb_runner.py). build(plan, ...) compiles.
"""
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile

TORCH_INCLUDE = re.compile(r"#\s*include\s*[<\"](torch/|ATen/|c10/|pybind11/|Python\.h)")
TORCH_WORDS = re.compile(r"\b(torch|at|c10|py|pybind11)::|\bTORCH_\w+|\bAT_\w+|\bC10_\w+|"
                         r"\bPYBIND11_\w+|\bTensor\b|\bscalar_t\b")
KERNEL_HEAD = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                         r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
SPLIT_VERSION = "1"


class SplitRefused(ValueError):
    """The sources are outside what the split build handles (the reason says what)."""


def strip_comments(src):
    """Comments out, string and character literals kept (C and C++ comments)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            out.append(" ")
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def top_level_items(src):
    """The source cut into top-level items: ('pp', line) for preprocessor lines, ('code', text)
    for a declaration or definition (up to its ';' or its closing brace)."""
    items, i, n = [], 0, len(src)
    cur, depth, paren = [], 0, 0
    at_line_start = True
    while i < n:
        c = src[i]
        if at_line_start and depth == 0 and paren == 0 and not "".join(cur).strip() and \
                src[i:].lstrip(" \t").startswith("#"):
            j = i
            while True:
                k = src.find("\n", j)
                if k < 0:
                    k = n
                if k > 0 and src[k - 1] == "\\":
                    j = k + 1
                    continue
                break
            items.append(("pp", src[i:k].strip()))
            cur = []
            i = k + 1
            at_line_start = True
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            cur.append(src[i:j + 1])
            i = j + 1
            at_line_start = False
            continue
        cur.append(c)
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and paren == 0:
                text = "".join(cur)
                # `struct S {...};` and `= {...};` end at their ';'
                rest = src[i + 1:]
                m = re.match(r"\s*;", rest)
                if m:
                    text += ";"
                    i += m.end()
                items.append(("code", text.strip()))
                cur = []
        elif c == ";" and depth == 0 and paren == 0:
            items.append(("code", "".join(cur).strip()))
            cur = []
        at_line_start = c == "\n"
        i += 1
    if "".join(cur).strip():
        items.append(("code", "".join(cur).strip()))
    if depth != 0 or paren != 0:
        raise SplitRefused("unbalanced braces or parentheses")
    return [(k, t) for k, t in items if t]


def _matching_paren(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    raise SplitRefused("unbalanced parentheses")


def _split_commas(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


class Kernel:
    def __init__(self, name, params):
        self.name, self.params = name, params  # params: list of (declaration, name)

    def stub_declaration(self):
        ps = ", ".join(["dim3 htam_grid", "dim3 htam_block", "size_t htam_shmem",
                        "cudaStream_t htam_stream"] + [d for d, _ in self.params])
        return "void htam_launch_%s(%s)" % (self.name, ps)

    def stub_definition(self):
        return "%s {\n    %s<<<htam_grid, htam_block, htam_shmem, htam_stream>>>(%s);\n}\n" % (
            self.stub_declaration(), self.name, ", ".join(n for _, n in self.params))


def _kernel_of(text):
    m = KERNEL_HEAD.search(text)
    if not m:
        return None
    if re.search(r"\btemplate\s*<", text[:m.start()]):
        raise SplitRefused("a template kernel (%s)" % m.group(1))
    close = _matching_paren(text, m.end() - 1)
    params = []
    for p in _split_commas(text[m.end():close]):
        if p in ("", "void"):
            continue
        if "=" in p or "[" in p or "&" in p:
            raise SplitRefused("kernel %s: parameter '%s' (defaults, arrays and references "
                               "are not split)" % (m.group(1), p))
        pm = re.search(r"(\w+)\s*$", p)
        words = re.findall(r"\w+", p)
        if not pm or len(words) < 2:
            raise SplitRefused("kernel %s: an unnamed parameter '%s'" % (m.group(1), p))
        params.append((p, pm.group(1)))
    return Kernel(m.group(1), params)


LAUNCH = re.compile(r"\b(\w+)\s*(<\s*[^<>;]*>\s*)?<<<")


def rewrite_launches(text, kernels):
    """Each `k<<<g, b[, sh[, st]]>>>(args)` of a known kernel as `htam_launch_k(g, b, sh, st,
    args)`."""
    out, pos = [], 0
    for m in LAUNCH.finditer(text):
        if m.start() < pos:
            continue
        name = m.group(1)
        if name not in kernels:
            raise SplitRefused("a launch of %s, which is not a kernel of these sources" % name)
        if m.group(2):
            raise SplitRefused("a launch with template arguments (%s%s)" % (name, m.group(2)))
        end_cfg = text.find(">>>", m.end())
        if end_cfg < 0:
            raise SplitRefused("a launch without >>>")
        cfg = _split_commas(text[m.end():end_cfg])
        if not 2 <= len(cfg) <= 4:
            raise SplitRefused("a launch configuration of %d values" % len(cfg))
        cfg += ["0", "0"][:4 - len(cfg)]
        open_at = text.find("(", end_cfg + 3)
        if open_at < 0 or text[end_cfg + 3:open_at].strip():
            raise SplitRefused("a launch without its arguments")
        close = _matching_paren(text, open_at)
        args = text[open_at + 1:close].strip()
        out.append(text[pos:m.start()])
        out.append("htam_launch_%s(%s%s)" % (name, ", ".join(
            ["dim3(%s)" % cfg[0], "dim3(%s)" % cfg[1], "(size_t)(%s)" % cfg[2],
             "(cudaStream_t)(%s)" % cfg[3]]), (", " + args) if args else ""))
        pos = close + 1
    out.append(text[pos:])
    return "".join(out)


class Plan:
    def __init__(self):
        self.kernel_tu = ""
        self.wrapper_tu_body = ""
        self.functions = []
        self.kernels = []


def _names(functions):
    if isinstance(functions, dict):
        return list(functions)
    if isinstance(functions, str):
        return [functions]
    return list(functions or [])


def plan(cuda_sources, cpp_sources, functions):
    """The split of one load_inline call; raises SplitRefused with the reason."""
    cuda = strip_comments("\n".join(cuda_sources if isinstance(cuda_sources, list)
                                    else [cuda_sources or ""]))
    cpp = strip_comments("\n".join(cpp_sources if isinstance(cpp_sources, list)
                                   else [cpp_sources or ""]))
    names = _names(functions)
    if not cuda.strip() or not names:
        raise SplitRefused("no CUDA sources or no functions to bind")
    if re.search(r"\bnamespace\b|\btemplate\s*<|__host__", cuda):
        raise SplitRefused("namespaces, templates or __host__ functions in the CUDA source")
    if "PYBIND11_MODULE" in cuda + cpp:
        raise SplitRefused("the sources define their own module")
    items = top_level_items(cuda)
    both, kernel_only, wrapper_only, declare = [], [], [], []
    kernels = {}
    for kind, text in items:
        if kind == "pp":
            if TORCH_INCLUDE.search(text):
                wrapper_only.append(text)
            elif re.match(r"#\s*(include|define|undef|pragma)\b", text):
                both.append(text)
            else:
                raise SplitRefused("a preprocessor line the split does not handle: %s" % text)
            continue
        k = _kernel_of(text)
        if k is not None:
            if TORCH_WORDS.search(text):
                raise SplitRefused("kernel %s uses PyTorch's types" % k.name)
            kernels[k.name] = k
            kernel_only.append(text)
        elif re.search(r"__device__|__constant__|__shared__|<<<", text) and \
                not TORCH_WORDS.search(text):
            if "<<<" in text:
                raise SplitRefused("a launch outside the functions that use PyTorch")
            kernel_only.append(text)
        elif TORCH_WORDS.search(text) or "<<<" in text:
            wrapper_only.append(text)
        elif "{" in text and "(" in text.split("{", 1)[0] and not text.startswith(
                ("struct", "class", "union", "enum", "typedef", "using")):
            head = text.split("{", 1)[0]
            if re.search(r"\b(static|inline)\b", head):
                both.append(text)  # internal linkage: each half gets its own copy
            else:
                # a torch-free host function: compiled with the kernels, declared to the wrappers
                kernel_only.append(text)
                declare.append(head.strip() + ";")
        else:
            both.append(text)  # types, constants, declarations
    if not kernels:
        raise SplitRefused("no __global__ kernel in the CUDA source")
    for name in names:
        if not re.search(r"\b%s\s*\(" % re.escape(name), "\n".join(wrapper_only + declare)):
            raise SplitRefused("function %s is not defined by the torch side" % name)
    p = Plan()
    p.functions = names
    p.kernels = list(kernels.values())
    p.kernel_tu = "\n".join([x for x in both if x.startswith("#")] +
                            ["#include <cuda_runtime.h>"] +
                            [x for x in both if not x.startswith("#")] + kernel_only +
                            [k.stub_definition() for k in kernels.values()]) + "\n"
    wrappers = [rewrite_launches(t, kernels) if not t.startswith("#") else t
                for t in wrapper_only]
    p.wrapper_tu_body = "\n".join(
        [x for x in both if x.startswith("#")] + ["#include <cuda_runtime.h>"] +
        [x for x in wrappers if x.startswith("#")] +
        [x for x in both if not x.startswith("#")] + declare +
        [k.stub_declaration() + ";" for k in kernels.values()] +
        [x for x in wrappers if not x.startswith("#")] + [cpp]) + "\n"
    return p


def module_source(p):
    defs = "\n".join('    m.def("%s", &%s, "%s");' % (f, f, f) for f in p.functions)
    return (p.wrapper_tu_body + "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + defs +
            "\n}\n")


class Toolchain:
    """Flags of this PyTorch (CUDA includes, ABI, libraries) and the device's architecture."""

    def __init__(self, nvcc, arch):
        import torch
        from torch.utils import cpp_extension as ce
        try:
            incs = ce.include_paths(device_type="cuda")
        except TypeError:
            incs = ce.include_paths(cuda=True)
        self.includes = list(incs) + [sysconfig.get_paths()["include"]]
        self.abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
        self.torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
        self.nvcc = nvcc
        self.arch = arch
        self.torch_version = torch.__version__

    def cxx_flags(self):
        """The flags of the precompiled header and of every module compiled with it."""
        return ["-O3", "-std=c++17", "-fPIC", "-DTORCH_API_INCLUDE_EXTENSION_H",
                "-D_GLIBCXX_USE_CXX11_ABI=%d" % self.abi] + ["-I" + i for i in self.includes]


def _run(cmd, cwd, timeout_s):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (os.path.basename(cmd[0]), p.returncode,
                                                         (p.stderr or p.stdout)[-2000:]))


def precompiled_header(tc, pch_root, timeout_s=600):
    """A directory holding torch_ext.h and its .gch for these flags (built once; concurrent
    builders each build privately and the first rename wins)."""
    flags = tc.cxx_flags()
    gxx = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256(("\0".join(flags) + gxx + tc.torch_version + SPLIT_VERSION)
                         .encode()).hexdigest()[:24]
    final = os.path.join(pch_root, "pch-" + key)
    if os.path.isfile(os.path.join(final, "torch_ext.h.gch")):
        return final
    os.makedirs(pch_root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="pch-", dir=pch_root)
    with open(os.path.join(tmp, "torch_ext.h"), "w") as f:
        f.write("#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n"
                "#include <cuda_runtime.h>\n")
    _run(["g++"] + flags + ["-x", "c++-header", "torch_ext.h", "-o", "torch_ext.h.gch"], tmp,
         timeout_s)
    os.chmod(tmp, 0o755)
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another builder won
    return final


def build(p, name, tc, build_dir, pch_root, extra_cuda_cflags=(), extra_cflags=(),
          extra_ldflags=(), timeout_s=600):
    """Compiles the split (both halves side by side) and links name.so in build_dir."""
    import concurrent.futures
    os.makedirs(build_dir, exist_ok=True)
    with open(os.path.join(build_dir, "kernels.cu"), "w") as f:
        f.write(p.kernel_tu)
    with open(os.path.join(build_dir, "module.cpp"), "w") as f:
        f.write(module_source(p))
    nv = [tc.nvcc, "-O3", "-std=c++17", "--compiler-options", "-fPIC", "-gencode",
          "arch=compute_%s,code=sm_%s" % (tc.arch, tc.arch)] + list(extra_cuda_cflags) + \
        ["-c", "kernels.cu", "-o", "kernels.o"]

    def torch_half():
        pch = precompiled_header(tc, pch_root, timeout_s)
        # The module's name is defined after the header: torch's headers do not use it.
        _run(["g++"] + tc.cxx_flags() + ["-DTORCH_EXTENSION_NAME=%s" % name, "-I" + pch,
                                         "-include", "torch_ext.h", "-Winvalid-pch"] +
             list(extra_cflags) +
             ["-c", "module.cpp", "-o", "module.o"], build_dir, timeout_s)

    # nvcc on the kernels beside the header and the torch half
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for fut in [pool.submit(_run, nv, build_dir, timeout_s), pool.submit(torch_half)]:
            fut.result()
    cuda_lib = os.path.join(os.path.dirname(os.path.dirname(tc.nvcc)), "lib64")
    _run(["g++", "-shared", "kernels.o", "module.o", "-o", name + ".so",
          "-L" + tc.torch_lib, "-Wl,-rpath," + tc.torch_lib, "-L" + cuda_lib,
          "-lc10", "-lc10_cuda", "-ltorch", "-ltorch_cpu", "-ltorch_cuda", "-ltorch_python",
          "-lcudart"] + list(extra_ldflags), build_dir, timeout_s)
    return os.path.join(build_dir, name + ".so")
