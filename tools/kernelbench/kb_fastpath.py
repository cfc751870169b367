"""htam's fast compile path for ModelNew candidates: CUDA sources compiled by nvcc alone (no
PyTorch headers, no pybind11: about a second instead of a minute), cached by content, loaded with
ctypes and called with torch tensors (docs/backends.md, "The fast path: htam.load_cuda").

Inside the evaluation runner this module is what `import htam` gives a candidate
(kb_runner.py registers it); there `htam.load_cuda(...)` is the explicit form, and a
`load_inline` call whose sources need no PyTorch headers takes the same path transparently.

Signature convention (one C++ declaration per bound function, as a candidate would write it):
  functions=["void relu(const float* x, float* y, int64_t n, cudaStream_t stream)"]
  - pointer parameters (`T*`, `const T*`, `T* __restrict__`) take a CUDA tensor (contiguous, on
    the current device, of T's dtype; `void*` takes any dtype), an int address, or None (NULL);
  - scalar parameters take Python numbers: bool, char/short/int/long and their fixed-width and
    unsigned forms, size_t, float, double;
  - a last parameter of type `cudaStream_t` is filled by htam with PyTorch's current stream
    (torch.cuda.current_stream().cuda_stream); the caller does not pass it and cannot choose
    another (the harness times the current stream). Without one, the function's launches go to
    the legacy default stream;
  - return type: void, a scalar (returned), or cudaError_t (non-zero raises).
A generated extern "C" wrapper calls the function and then cudaGetLastError(); a launch error
(bad configuration, too much shared memory, missing kernel image) raises RuntimeError naming the
function. Errors that surface only later (an illegal address) appear at PyTorch's next
synchronization, as with load_inline.

Cache: one file per content key, <cache_dir>/fast-<sha256>.so, key = SHA-256 of the sources, the
bound declarations, every flag, the nvcc version and the target architecture. A build happens in
a private directory and is published with a hard link that never replaces an entry, so builders
that race on one key each get a complete library and the directory never holds a partial file.
"""
import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import types

GENERATOR_VERSION = 1  # part of every key: a change of the generated wrapper rebuilds


class BuildError(RuntimeError):
    """nvcc failed (the message carries its output) or no nvcc was found."""


class SignatureError(ValueError):
    """A declaration outside the fast path's convention."""


# ---- which sources need PyTorch's headers ---------------------------------------------------

_TORCH_PATTERNS = [
    (re.compile(r'#\s*include\s*[<"]\s*(torch|ATen|c10|pybind11|THC|caffe2)/'), "includes %s/"),
    (re.compile(r'#\s*include\s*[<"]\s*(Python\.h|pybind11\.h)'), "includes %s"),
    (re.compile(r'\b(torch|at|c10|py|pybind11)\s*::'), "uses %s::"),
    (re.compile(r'\busing\s+namespace\s+(torch|at|c10|pybind11)\b'), "uses namespace %s"),
    (re.compile(r'\b((?:TORCH|PYBIND11|AT|C10)_[A-Z0-9_]+)'), "uses %s"),
    (re.compile(r'\b(PyObject|PyMODINIT_FUNC)\b'), "uses %s"),
]
_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/', re.S)


def strip_comments(src):
    return _COMMENT.sub(" ", src or "")


def torch_dependency(*sources):
    """Why these sources need PyTorch's headers ("" = they do not): the first include or name of
    torch, ATen, c10, pybind11 or CPython found outside comments."""
    for src in sources:
        text = strip_comments(src)
        for pat, why in _TORCH_PATTERNS:
            m = pat.search(text)
            if m:
                return why % m.group(1)
    return ""


# ---- declarations ---------------------------------------------------------------------------

# C++ scalar spellings -> (ctypes type, kind); kind "i" integer, "f" floating, "b" bool.
_SCALARS = {
    "bool": (ctypes.c_bool, "b"),
    "char": (ctypes.c_byte, "i"), "signed char": (ctypes.c_byte, "i"),
    "unsigned char": (ctypes.c_ubyte, "i"),
    "short": (ctypes.c_short, "i"), "unsigned short": (ctypes.c_ushort, "i"),
    "int": (ctypes.c_int, "i"), "unsigned": (ctypes.c_uint, "i"),
    "unsigned int": (ctypes.c_uint, "i"), "long": (ctypes.c_long, "i"),
    "unsigned long": (ctypes.c_ulong, "i"), "long long": (ctypes.c_longlong, "i"),
    "unsigned long long": (ctypes.c_ulonglong, "i"),
    "int8_t": (ctypes.c_int8, "i"), "uint8_t": (ctypes.c_uint8, "i"),
    "int16_t": (ctypes.c_int16, "i"), "uint16_t": (ctypes.c_uint16, "i"),
    "int32_t": (ctypes.c_int32, "i"), "uint32_t": (ctypes.c_uint32, "i"),
    "int64_t": (ctypes.c_int64, "i"), "uint64_t": (ctypes.c_uint64, "i"),
    "size_t": (ctypes.c_size_t, "i"), "ssize_t": (ctypes.c_ssize_t, "i"),
    "ptrdiff_t": (ctypes.c_ssize_t, "i"),
    "float": (ctypes.c_float, "f"), "double": (ctypes.c_double, "f"),
}
# Pointee spellings -> torch dtype name (None: any dtype).
_POINTEES = {
    "void": None, "float": "float32", "float2": "float32", "float4": "float32",
    "double": "float64", "double2": "float64",
    "half": "float16", "__half": "float16", "half2": "float16", "__half2": "float16",
    "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "__nv_bfloat162": "bfloat16",
    "int": "int32", "int32_t": "int32", "unsigned": "int32", "unsigned int": "int32",
    "uint32_t": "int32", "int2": "int32", "int4": "int32",
    "long": "int64", "long long": "int64", "int64_t": "int64", "uint64_t": "int64",
    "short": "int16", "int16_t": "int16", "char": "int8", "signed char": "int8",
    "int8_t": "int8", "unsigned char": "uint8", "uint8_t": "uint8", "bool": "bool",
}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct"}
_PREFIXES = {"extern", '"C"', "static", "inline", "__host__", "__forceinline__", "__inline__"}
_IDENT = re.compile(r'[A-Za-z_]\w*$')
_TYPE_WORDS = {"int", "char", "short", "long", "float", "double", "bool", "unsigned", "signed",
               "void", "cudaStream_t"} | set(_SCALARS) | set(_POINTEES)


class Param:
    __slots__ = ("kind", "ctype", "text", "name", "pointee", "dtype", "scalar_kind")

    def __init__(self, kind, ctype, text, name, pointee=None, dtype=None, scalar_kind=None):
        self.kind, self.ctype, self.text, self.name = kind, ctype, text, name
        self.pointee, self.dtype, self.scalar_kind = pointee, dtype, scalar_kind


class Signature:
    """A parsed declaration: ret (None = void, "error" = cudaError_t, else a scalar spelling),
    name, params (Param: kind "pointer", "scalar" or "stream"), decl (normalized text)."""

    def __init__(self, ret, name, params):
        self.ret, self.name, self.params = ret, name, params
        ret_text = "void" if ret is None else ("cudaError_t" if ret == "error" else ret)
        self.ret_text = ret_text
        self.decl = "%s %s(%s)" % (ret_text, name, ", ".join(p.text for p in params))

    @property
    def has_stream(self):
        return bool(self.params) and self.params[-1].kind == "stream"


def _words(text):
    return re.findall(r'"C"|[A-Za-z_]\w*|::|\*|&|\S', text)


def _parse_type(words, where):
    """(base spelling, pointer depth, const pointee) of a type given as words, qualifiers out."""
    depth = words.count("*")
    if "&" in words:
        raise SignatureError("%s: references are not supported (use a pointer)" % where)
    const = "const" in words[:words.index("*")] if depth else False
    base = [w for w in words if w not in _QUALIFIERS and w != "*" and w not in ("std", "::")]
    if not base:
        raise SignatureError("%s: no type" % where)
    return " ".join(base), depth, const


def parse_signature(decl):
    """Parses one declaration of the convention ("void f(const float* x, int n)"); raises
    SignatureError saying what is outside it."""
    text = strip_comments(decl).strip().rstrip(";").strip()
    m = re.match(r'^(.*?)\b([A-Za-z_]\w*)\s*\((.*)\)\s*(noexcept)?\s*$', text, re.S)
    if not m:
        raise SignatureError("not a function declaration: %r" % decl)
    head, name, args = m.group(1), m.group(2), m.group(3).strip()
    if "__global__" in head:
        raise SignatureError("%s is a __global__ kernel: bind the host function that launches it"
                             % name)
    if "<" in head or "<" in args or "template" in head:
        raise SignatureError("%s: templates are not supported" % name)
    ret_words = [w for w in _words(head) if w not in _PREFIXES]
    ret_base, ret_depth, _ = _parse_type(ret_words, name + " return type") if ret_words else \
        (None, 0, False)
    if ret_base is None:
        raise SignatureError("%s: no return type" % name)
    if ret_depth:
        raise SignatureError("%s: a pointer return type is not supported" % name)
    if ret_base == "void":
        ret = None
    elif ret_base == "cudaError_t":
        ret = "error"
    elif ret_base in _SCALARS:
        ret = ret_base
    else:
        raise SignatureError("%s: return type %s is not supported" % (name, ret_base))
    params = []
    if args and args != "void":
        pieces = [p.strip() for p in args.split(",")]
        for i, piece in enumerate(pieces):
            where = "%s parameter %d" % (name, i + 1)
            if "=" in piece:
                raise SignatureError("%s: default arguments are not supported" % where)
            if "[" in piece or "(" in piece:
                raise SignatureError("%s: arrays and function pointers are not supported" % where)
            words = _words(piece)
            pname = ""
            if len(words) > 1 and _IDENT.match(words[-1]) and words[-1] not in _QUALIFIERS \
                    and words[-1] not in _TYPE_WORDS:
                pname, words = words[-1], words[:-1]  # "int n", "const float* x"
            base, depth, const = _parse_type(words, where)
            pname = pname or "arg%d" % i
            if base == "cudaStream_t" and depth == 0:
                if i != len(pieces) - 1:
                    raise SignatureError("%s: cudaStream_t must be the last parameter" % where)
                params.append(Param("stream", ctypes.c_void_p, "cudaStream_t", pname))
            elif depth == 1:
                if base not in _POINTEES:
                    raise SignatureError("%s: pointer to %s is not supported" % (where, base))
                params.append(Param("pointer", ctypes.c_void_p,
                                    "%s%s*" % ("const " if const else "", base), pname,
                                    pointee=base, dtype=_POINTEES[base]))
            elif depth == 0 and base in _SCALARS:
                ct, k = _SCALARS[base]
                params.append(Param("scalar", ct, base, pname, scalar_kind=k))
            else:
                raise SignatureError("%s: type %s%s is not supported" % (where, base, "*" * depth))
    return Signature(ret, name, params)


def find_declaration(name, *sources):
    """The declaration of host function `name` in the sources (first found, the earlier sources
    first), as text, or "" when none."""
    pat = re.compile(r'(?:^|[;{}\n])\s*([A-Za-z_][\w\s\*:"]*?\b' + re.escape(name) +
                     r'\s*\([^;{}()]*\))\s*(?:noexcept\s*)?[;{]', re.S)
    for src in sources:
        for m in pat.finditer(strip_comments(src)):
            d = m.group(1).strip()
            if "__global__" in d or "__device__" in d or d.startswith(("return ", "else ")):
                continue
            return d
    return ""


# ---- the generated wrapper ------------------------------------------------------------------

def wrapper_source(sigs):
    """extern "C" entry points htam_fast_<name>(params..., ret* out) -> cudaError_t as int."""
    out = ["", "// ---- generated by htam (kb_fastpath.py): C entry points for ctypes ----",
           "#include <cuda_runtime.h>"]
    for s in sigs:
        params = ["%s p%d" % (p.text, i) for i, p in enumerate(s.params)]
        ret_param = [] if s.ret is None else ["%s* htam_ret" % s.ret_text]
        call = "%s(%s)" % (s.name, ", ".join("p%d" % i for i in range(len(s.params))))
        out.append("%s;" % s.decl)
        out.append('extern "C" int htam_fast_%s(%s) {' % (s.name, ", ".join(params + ret_param)
                                                         or "void"))
        out.append("  (void)cudaGetLastError();")
        if s.ret == "error":
            out.append("  cudaError_t e = %s;" % call)
            out.append("  *htam_ret = e;")
            out.append("  if (e != cudaSuccess) return (int)e;")
        elif s.ret is None:
            out.append("  %s;" % call)
        else:
            out.append("  *htam_ret = %s;" % call)
        out.append("  return (int)cudaGetLastError();")
        out.append("}")
    out.append('extern "C" const char* htam_fast_error_string(int e) {')
    out.append("  return cudaGetErrorString((cudaError_t)e);")
    out.append("}")
    return "\n".join(out) + "\n"


# ---- nvcc and the cache ---------------------------------------------------------------------

_NVCC_VERSIONS = {}


def find_nvcc(nvcc=""):
    """nvcc as configured, else $CUDA_HOME/bin/nvcc, nvcc on PATH, /usr/local/cuda/bin/nvcc."""
    cands = [nvcc] if nvcc else []
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            cands.append(os.path.join(os.environ[env], "bin", "nvcc"))
    cands += [shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"]
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    raise BuildError("no nvcc found (%s): set eval.kernelbench_nvcc or CUDA_HOME" %
                     (nvcc or "CUDA_HOME, PATH, /usr/local/cuda/bin"))


def nvcc_version(nvcc):
    v = _NVCC_VERSIONS.get(nvcc)
    if v is None:
        try:
            v = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                               timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            raise BuildError("%s --version failed: %s" % (nvcc, e))
        _NVCC_VERSIONS[nvcc] = v
    return v


def device_arch():
    """sm_XY of PyTorch's current CUDA device; sm_90 (an H100) where none is visible."""
    try:
        import torch
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return "sm_%d%d" % (major, minor)
    except Exception:  # noqa: BLE001 - no torch, no driver: the fallback
        pass
    return "sm_90"


_ARCH_FLAGS = ("-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code",
               "--gpu-code")


def nvcc_command(nvcc, arch, cu, cpp, out, cuda_cflags, cflags, ldflags, include_paths):
    cmd = [nvcc, "-shared", "-Xcompiler", "-fPIC"]
    if not any(f.split("=")[0] in _ARCH_FLAGS for f in cuda_cflags):
        num = arch[3:] if arch.startswith("sm_") else arch
        cmd += ["-gencode", "arch=compute_%s,code=sm_%s" % (num, num)]
    cmd += ["-I" + p for p in include_paths]
    cmd += list(cuda_cflags)
    for f in cflags:
        cmd += ["-Xcompiler", f]
    cmd += [cu] + ([cpp] if cpp else []) + ["-o", out]
    cmd += list(ldflags) + ["-Xlinker", "--no-undefined"]
    return cmd


class Build:
    """What one fast-path build is made of; key() is its content key."""

    def __init__(self, cuda_sources, cpp_sources, sigs, arch, nvcc, cuda_cflags=(), cflags=(),
                 ldflags=(), include_paths=()):
        self.cuda, self.cpp, self.sigs, self.arch, self.nvcc = cuda_sources, cpp_sources, sigs, \
            arch, nvcc
        self.cuda_cflags, self.cflags = list(cuda_cflags or []), list(cflags or [])
        self.ldflags, self.include_paths = list(ldflags or []), list(include_paths or [])

    def key(self):
        keyed = {"generator": GENERATOR_VERSION, "cuda": self.cuda, "cpp": self.cpp,
                 "functions": [s.decl for s in self.sigs], "arch": self.arch,
                 "nvcc": nvcc_version(self.nvcc), "cuda_cflags": self.cuda_cflags,
                 "cflags": self.cflags, "ldflags": self.ldflags,
                 "include_paths": self.include_paths}
        return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()

    def compile(self, out_dir, timeout_s=None):
        """Writes the sources and runs nvcc in out_dir; returns the library's path."""
        cu = os.path.join(out_dir, "fast.cu")
        with open(cu, "w") as f:
            f.write("#include <cuda.h>\n#include <cuda_runtime.h>\n#include <cstdint>\n"
                    "#include <cstddef>\n")
            f.write(self.cuda)
            f.write("\n")
            f.write(wrapper_source(self.sigs))
        cpp = ""
        if self.cpp.strip():
            cpp = os.path.join(out_dir, "fast_host.cpp")
            with open(cpp, "w") as f:
                f.write("#include <cuda_runtime.h>\n#include <cstdint>\n#include <cstddef>\n")
                f.write(self.cpp)
                f.write("\n")
        lib = os.path.join(out_dir, "fast.so")
        cmd = nvcc_command(self.nvcc, self.arch, cu, cpp, lib, self.cuda_cflags, self.cflags,
                           self.ldflags, self.include_paths)
        try:
            p = subprocess.run(cmd, cwd=out_dir, capture_output=True, text=True,
                               timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BuildError("nvcc ran past %s s" % timeout_s)
        except OSError as e:
            raise BuildError("cannot run %s: %s" % (self.nvcc, e))
        if p.returncode != 0 or not os.path.isfile(lib):
            log = (p.stderr + p.stdout).strip().replace(out_dir + "/", "")
            if len(log) > 4000:
                log = log[:4000] + "\n..."
            raise BuildError("nvcc failed (exit %d):\n%s" % (p.returncode, log))
        return lib


def publish(built, cached):
    """Write-once: a private temporary name, then a hard link that never replaces an entry."""
    tmp = "%s.tmp-%s" % (cached, os.urandom(8).hex())
    try:
        shutil.copyfile(built, tmp)
        os.chmod(tmp, 0o444)
        try:
            os.link(tmp, cached)
        except FileExistsError:
            pass
        return True
    except OSError:
        return False
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def default_cache_dir():
    return os.environ.get("HTAM_LOAD_CUDA_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "htam", "load_cuda")


def build_cached(build, cache_dir, work_dir=None, timeout_s=None):
    """The library of `build`: from the cache when there, else compiled (in a private directory
    under work_dir) and published. Returns (path, hit, key)."""
    key = build.key()
    cached = os.path.join(cache_dir, "fast-%s.so" % key) if cache_dir else ""
    if cached and os.path.isfile(cached):
        return cached, True, key
    if cache_dir:
        try:
            os.makedirs(cache_dir, exist_ok=True)
        except OSError:
            cached = ""
    tmp = tempfile.mkdtemp(prefix="htam-fast-", dir=work_dir)
    lib = build.compile(tmp, timeout_s)
    if cached and publish(lib, cached):
        shutil.rmtree(tmp, ignore_errors=True)
        return cached, False, key
    return lib, False, key  # no cache: the private build stays (it is loaded from there)


# ---- calling ------------------------------------------------------------------------------

class FastFunction:
    """One bound function: call it with tensors (pointers), numbers (scalars)."""

    def __init__(self, lib, sig, module):
        self.sig, self.module = sig, module
        self.__name__ = sig.name
        self.__doc__ = sig.decl
        self._fn = getattr(lib, "htam_fast_" + sig.name)
        argtypes = [p.ctype for p in sig.params]
        self._ret = None
        if sig.ret is not None:
            self._ret_type = ctypes.c_int if sig.ret == "error" else _SCALARS[sig.ret][0]
            argtypes.append(ctypes.POINTER(self._ret_type))
        self._fn.argtypes = argtypes
        self._fn.restype = ctypes.c_int
        self._errstr = lib.htam_fast_error_string
        self._errstr.argtypes = [ctypes.c_int]
        self._errstr.restype = ctypes.c_char_p
        self._explicit = [p for p in sig.params if p.kind != "stream"]

    def __repr__(self):
        return "<htam fast-path function %s>" % self.sig.decl

    def _fail(self, msg):
        raise TypeError("%s.%s: %s (declared %s)" % (self.module, self.sig.name, msg,
                                                     self.sig.decl))

    def _pointer(self, p, v):
        if v is None:
            return None
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        data_ptr = getattr(v, "data_ptr", None)
        if data_ptr is None:
            self._fail("%s takes a tensor, an int address or None, not a %s" %
                       (p.name, type(v).__name__))
        dev = getattr(v, "device", None)
        if dev is not None and dev.type != "cuda":
            self._fail("%s is a tensor on %s; it must be on the GPU" % (p.name, dev))
        if not v.is_contiguous():
            self._fail("%s is not contiguous (call .contiguous() first)" % p.name)
        if p.dtype is not None:
            got = str(getattr(v, "dtype", "?")).replace("torch.", "")
            if got != p.dtype:
                self._fail("%s is %s but the parameter is %s*" % (p.name, got, p.pointee))
        if dev is not None and dev.index is not None:
            import torch
            if dev.index != torch.cuda.current_device():
                self._fail("%s is on %s but the current device is cuda:%d" %
                           (p.name, dev, torch.cuda.current_device()))
        return data_ptr()

    def _scalar(self, p, v):
        if not isinstance(v, (int, float)) and hasattr(v, "item") and \
                not hasattr(v, "data_ptr"):
            v = v.item()  # numpy scalars
        if p.scalar_kind == "f":
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
        elif p.scalar_kind == "b":
            if isinstance(v, (bool, int)):
                return bool(v)
        elif isinstance(v, int):
            return int(v)
        self._fail("%s (%s) takes a Python %s, not a %s" % (
            p.name, p.text, {"f": "float", "b": "bool"}.get(p.scalar_kind, "int"),
            type(v).__name__))

    def __call__(self, *args):
        ps = self.sig.params
        n_explicit = len(self._explicit)
        if len(args) != n_explicit:
            self._fail("takes %d arguments, %d given%s" % (
                n_explicit, len(args), " (the cudaStream_t is PyTorch's current stream, filled "
                "in by htam)" if self.sig.has_stream else ""))
        values = []
        for i, p in enumerate(ps):
            if p.kind == "stream":
                values.append(current_stream())
            elif p.kind == "pointer":
                values.append(self._pointer(p, args[i]))
            else:
                values.append(self._scalar(p, args[i]))
        if self.sig.ret is not None:
            out = self._ret_type()
            values.append(ctypes.byref(out))
        rc = self._fn(*values)
        if rc != 0:
            raise RuntimeError("%s.%s: CUDA error %d (%s)" % (
                self.module, self.sig.name, rc,
                (self._errstr(rc) or b"?").decode(errors="replace")))
        if self.sig.ret is None or self.sig.ret == "error":
            return None
        return out.value


def current_stream():
    """PyTorch's current CUDA stream as a handle (tests replace this)."""
    import torch
    return torch.cuda.current_stream().cuda_stream


def bind(path, sigs, module_name):
    """A module named module_name whose attributes call the library's functions."""
    lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0) | getattr(os, "RTLD_NOW", 2))
    mod = types.ModuleType(module_name)
    mod.__file__ = path
    for s in sigs:
        setattr(mod, s.name, FastFunction(lib, s, module_name))
    mod._htam_library = lib
    return mod


# ---- entry points -------------------------------------------------------------------------

_CONTEXT = {"cache_dir": None, "work_dir": None, "nvcc": "", "timeout_s": None, "builds": None}


def configure(cache_dir=None, work_dir=None, nvcc="", timeout_s=None, builds=None):
    """Where load_cuda builds and caches (the runner sets this before importing a candidate);
    `builds`, a list, receives one record per call ({name, key, hit, seconds, fast})."""
    _CONTEXT.update(cache_dir=cache_dir, work_dir=work_dir, nvcc=nvcc, timeout_s=timeout_s,
                    builds=builds)


def _as_list(x):
    if x is None:
        return []
    if isinstance(x, str):
        return [x]
    return list(x)


def load_cuda(name, cuda_sources, functions, extra_cuda_cflags=None, extra_cflags=None,
              extra_ldflags=None, extra_include_paths=None, cpp_sources="", verbose=False,
              _via="load_cuda"):
    """Compiles cuda_sources (and optional host-only cpp_sources) with nvcc alone and returns a
    module whose attributes are `functions` (C++ declarations, see the file comment) callable
    with torch tensors and numbers. Cached by content (fast-<key>.so). Raises BuildError with
    nvcc's output, SignatureError for a declaration outside the convention."""
    t0 = time.monotonic()
    decls = _as_list(functions)
    if not decls:
        raise SignatureError("load_cuda(%r): no functions to bind" % name)
    sigs = [parse_signature(d) for d in decls]
    cuda = "\n".join(_as_list(cuda_sources))
    cpp = "\n".join(_as_list(cpp_sources))
    ctx = _CONTEXT
    nvcc = find_nvcc(ctx["nvcc"])
    b = Build(cuda, cpp, sigs, device_arch(), nvcc, _as_list(extra_cuda_cflags),
              _as_list(extra_cflags), _as_list(extra_ldflags), _as_list(extra_include_paths))
    cache = ctx["cache_dir"] if ctx["cache_dir"] is not None else default_cache_dir()
    path, hit, key = build_cached(b, cache, ctx["work_dir"], ctx["timeout_s"])
    mod = bind(path, sigs, name)
    rec = {"name": name, "key": key[:16], "hit": hit, "fast": True, "via": _via,
           "seconds": round(time.monotonic() - t0, 3)}
    if ctx["builds"] is not None:
        ctx["builds"].append(rec)
    if verbose:
        print("htam.load_cuda: %s (%s, %.2f s)" % (name, "cache hit" if hit else "built",
                                                    rec["seconds"]))
    return mod


def inline_declarations(functions, cpp_sources, cuda_sources):
    """The declarations of load_inline's `functions` (names, a str, or a dict name -> doc) found
    in its sources; raises SignatureError when one is missing or outside the convention."""
    if isinstance(functions, dict):
        names = list(functions)
    else:
        names = _as_list(functions)
    if not names:
        raise SignatureError("no functions to bind")
    decls = []
    for n in names:
        d = find_declaration(n, cpp_sources, cuda_sources)
        if not d:
            raise SignatureError("no declaration of %s in the sources" % n)
        parse_signature(d)
        decls.append(d)
    return decls


def fast_inline_plan(args, device):
    """For the arguments of one load_inline call (a dict of them, defaults applied): the
    declarations to bind through the fast path, or (None, why not)."""
    if not device.startswith("cuda"):
        return None, "not on a CUDA device"
    if not args.get("is_python_module", True) or args.get("is_standalone", False):
        return None, "not a Python module"
    cuda = "\n".join(_as_list(args.get("cuda_sources")))
    cpp = "\n".join(_as_list(args.get("cpp_sources")))
    if not cuda.strip():
        return None, "no CUDA sources"
    why = torch_dependency(cpp, cuda)
    if why:
        return None, "needs PyTorch's headers (%s)" % why
    try:
        return inline_declarations(args.get("functions"), cpp, cuda), ""
    except SignatureError as e:
        return None, str(e)


def load_inline_fast(args, decls):
    """load_inline through the fast path (fast_inline_plan said yes)."""
    return load_cuda(args["name"], args.get("cuda_sources"), decls,
                     extra_cuda_cflags=args.get("extra_cuda_cflags"),
                     extra_cflags=args.get("extra_cflags"),
                     extra_ldflags=args.get("extra_ldflags"),
                     extra_include_paths=args.get("extra_include_paths"),
                     cpp_sources=_strip_declarations(args.get("cpp_sources"), decls),
                     _via="load_inline")


def _strip_declarations(cpp_sources, decls):
    """load_inline's cpp_sources usually only declare the bound functions for pybind11; those
    declarations (repeated by the generated wrapper) need no host translation unit of their own."""
    cpp = "\n".join(_as_list(cpp_sources))
    rest = strip_comments(cpp)
    for d in decls:
        rest = re.sub(re.escape(d) + r"\s*;", "", rest)
    return cpp if rest.strip() else ""


def htam_module():
    """The module a candidate gets for `import htam` inside the runner."""
    m = types.ModuleType("htam")
    m.__doc__ = "htam's fast compile path for ModelNew candidates (load_cuda)."
    m.load_cuda = load_cuda
    m.BuildError = BuildError
    m.SignatureError = SignatureError
    return m
