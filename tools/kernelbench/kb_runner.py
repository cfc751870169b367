#!/usr/bin/python3
"""The runner's side of a KernelBench candidate (language "kernelbench"): a Python file defining
`class ModelNew(nn.Module)`, built and run with KernelBench's semantics (docs/backends.md,
"KernelBench candidates (ModelNew)").

The runner (daemon/eval/kernelbench/kb_candidate.h) starts this script as its child, inside
its own sandbox (hidden directories, unprivileged user, seccomp), with a connected Unix socket as
fd N:

  kb_runner.py --fd N

Requests and answers are frames (4-byte big-endian length, JSON body), as between verifier and
runner; an answer that carries tensors carries them in a memfd passed with SCM_RIGHTS beside the
frame (several memfds of the file-size limit each for a large answer: "chunk_bytes"). This
process never sees golden data: it generates inputs from the seeds it is given (the
problem's get_inputs() under torch.manual_seed(seed), as the verifier's kb_golden.py does),
returns what the candidate computed, and the verifier's kb_golden.py compares on the device.

  {"op": "kb_load", "source", "problem", "device", "build_cache", "work_dir", "threads",
   "fast_path", "nvcc"}
      Patches torch.utils.cpp_extension.load_inline with the fast path and the build cache
      (below), makes `import htam` give htam.load_cuda (kb_fastpath.py), runs the
      problem file without its Model (get_inputs, get_init_inputs), imports the candidate, and
      builds ModelNew(*get_init_inputs()) under torch.manual_seed(0) (the seed the golden Model
      was built with). Answer {"ok": true, "seconds", "builds": [...]} or {"ok": false, "class":
      "CompileError"|"Crash"|"InfraError", "message"}. With "construct": false it stops after
      the import (and its builds: host work, for which the verifier holds no turn on the device)
      and kb_init builds ModelNew.
  {"op": "kb_init"}
      ModelNew(*get_init_inputs()) of the imported candidate, as kb_load does by default.
  {"op": "kb_trial", "seed", "record_ops"}
      One forward on get_inputs() of `seed`. Answer: outputs (dtype, shape, bytes in the memfd),
      a digest of every input before and after the call (digest(), computed on the device), the PyTorch functions the call used
      (record_ops), Python threads left running.
  {"op": "kb_time", "seeds", "warmup_reps", "warmup_ms", "repetitions", "min_timed_ms",
   "flush_bytes"}
      Warms up (untimed calls over the rotating sets until both warmup_reps calls and warmup_ms
      have passed; Python's garbage collector off until the end), then times forward over rotating
      input sets (each repetition copies its set into one of two
      staging sets outside the timed window, and touches `flush_bytes` to flush caches). CUDA:
      events around the call, then a whole-device synchronize, and the wall clock from before
      the call to after that synchronize (work left on another stream shows there), and the
      wall clock of an empty window (sync_us); CPU: the wall clock. Answer: rep_us, wall_us,
      sync_us, and the outputs of the last timed call of every set.
  {"op": "kb_time_inputs", "seeds"}
      Makes kb_time's input sets and staging copies ahead of it (the verifier asks while it
      shares the device, and kb_time while it has the device to itself); the next kb_time with
      the same seeds uses them, any other makes its own.

Fast path (kb_fastpath.py; "fast_path": true, the default): a load_inline call on a CUDA device
whose sources need no PyTorch headers (no torch/ATen/c10/pybind11 include or name) and whose
`functions` are declared there in htam.load_cuda's convention is compiled by nvcc alone and bound
with ctypes, cached as <build_cache>/fast-<key>.so; if that build fails, the call goes on to
PyTorch's load_inline below (its record says why the fast path was not taken).

Split build (kb_split.py; "split_build": true; off unless asked, until it is measured on a GPU
against load_inline): on a CUDA device, a load_inline call
whose CUDA source needs PyTorch's headers is split — the kernels through nvcc alone with a launch
stub each, the torch::Tensor wrappers and the module through g++ with a precompiled
torch/extension.h, side by side — and cached like load_inline's own builds; a call the split
refuses or fails to build goes on to PyTorch's load_inline (its record says why).

Build cache: load_inline(name, sources, flags...) is keyed by the SHA-256 of its arguments (all
but build_directory and verbose), the PyTorch and Python versions and the device. A hit imports
<build_cache>/<key>.so, built earlier from the identical arguments; a miss builds in this job's
private directory and publishes the library there under its key (write-once: a link that never
replaces). The directory is not listable by candidates (docs say how htamd sets it up): a
candidate finds only the build of its own sources.
"""
import gc
import hashlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import socket
import statistics
import struct
import sys
import threading
import time
import traceback
import types

# PyTorch's CPU threads never wait for each other by spinning, unless the caller says otherwise:
# OpenMP's waiting threads sleep, and OpenBLAS (Debian's, with threads of its own) computes a
# matrix product on one thread. Both are read once, when PyTorch loads them: so before any import
# of torch. With spinning waits a CPU-bound neighbour on the host made each meeting of the threads
# last a scheduler time slice: KernelBench's VanillaRNNHidden took 7-8 s a call beside two busy
# processes on 2 cores, 22-31 ms alone, and 43 ms beside them with these settings (kb_helper.py
# and kb_golden.py, which imports this file, do the same; docs/backends.md says what it costs).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import kb_fastpath  # noqa: E402

DTYPE_NAMES = None  # torch dtype -> htam name, filled once torch is imported
torch = None


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def recv_frame(sock):
    head = recv_exact(sock, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    body = recv_exact(sock, n)
    if body is None:
        return None
    return json.loads(body.decode())


MAX_FDS = 250  # descriptors one frame may carry (the verifier's bound, exec.cc)


def chunk_bytes():
    """The size of one memfd of a payload: this process's file-size limit (RLIMIT_FSIZE, which a
    memfd obeys; the runner's sandbox sets it), at most 1 GiB, in whole MiB."""
    import resource
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    c = 1 << 30 if soft == resource.RLIM_INFINITY else min(1 << 30, soft)
    return max(1 << 20, c - c % (1 << 20))


def send_frame(sock, obj, payload=None):
    """A frame; `payload` (bytes, or a list of them, back to back) in memfds of chunk_bytes()
    each (the last one shorter) beside it: obj["chunk_bytes"] says their size, so that byte o of
    the payload is at o % chunk_bytes in memfd o // chunk_bytes."""
    fds = []
    try:
        if payload is not None:
            size = chunk_bytes()
            obj = dict(obj, chunk_bytes=size)
            blobs = payload if isinstance(payload, list) else [payload]
            fd, room = -1, 0
            for blob in blobs:
                view = memoryview(blob).cast("B")
                while view:
                    if room == 0:
                        if len(fds) >= MAX_FDS:
                            raise CandidateError("InfraError", "the outputs need more than %d "
                                                 "memfds of %d bytes" % (MAX_FDS, size))
                        fd = os.memfd_create("kb-outputs", os.MFD_CLOEXEC)
                        fds.append(fd)
                        room = size
                    w = os.write(fd, view[:room])
                    view, room = view[w:], room - w
            if not fds:
                fds.append(os.memfd_create("kb-outputs", os.MFD_CLOEXEC))
        body = json.dumps(obj).encode()
        msg = struct.pack(">I", len(body)) + body
        if fds:
            sent = sock.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                         struct.pack("i" * len(fds), *fds))])
            if sent < len(msg):
                sock.sendall(msg[sent:])
        else:
            sock.sendall(msg)
    finally:
        for fd in fds:
            os.close(fd)


class CandidateError(Exception):
    """A failure of the candidate: its outcome class and the reason."""

    def __init__(self, cls, message):
        super().__init__(message)
        self.cls = cls


def where_in_candidate(tb):
    """" (candidate.py line N)" for the innermost frame in the candidate's file."""
    line = None
    for fr in traceback.extract_tb(tb):
        if fr.filename.endswith("candidate.py"):
            line = fr.lineno
    return " (candidate.py line %d)" % line if line else ""


def describe(e):
    text = str(e).strip()
    if len(text) > 3000:
        text = "..." + text[-3000:]
    return "%s: %s" % (type(e).__name__, text) if text else type(e).__name__


# ---- build cache ---------------------------------------------------------------------------

def split_build(a, name, build_dir, work_dir):
    """load_inline's call through kb_split.py (kernels through nvcc alone, the torch::Tensor
    wrappers through g++ with a precompiled torch/extension.h): the built module's path, or
    raises kb_split.SplitRefused / RuntimeError / OSError (the caller goes on to load_inline)."""
    import kb_split
    p = kb_split.plan(a.get("cuda_sources"), a.get("cpp_sources"), a.get("functions"))
    if a.get("extra_include_paths"):
        raise kb_split.SplitRefused("extra include paths")
    tc = kb_split.Toolchain(kb_fastpath.find_nvcc(), kb_fastpath.device_arch()[len("sm_"):])
    # The precompiled header stays in this job's directory: one that a candidate's runner built
    # is not trusted by another candidate's build.
    return kb_split.build(p, name, tc, build_dir, os.path.join(work_dir, "kb-pch"),
                          extra_cuda_cflags=a.get("extra_cuda_cflags") or [],
                          extra_cflags=a.get("extra_cflags") or [],
                          extra_ldflags=a.get("extra_ldflags") or [])


def install_build_cache(cache_dir, work_dir, device, builds, fast_path=True, split=True):
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import torch.utils.cpp_extension as ce  # says which ROCm/CUDA it found: not news
    original = ce.load_inline
    sig = inspect.signature(original)

    def load_inline(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        a = dict(bound.arguments)
        name = a["name"]
        fallback = ""
        if fast_path:
            decls, why = kb_fastpath.fast_inline_plan(a, device)
            if decls:
                try:
                    return kb_fastpath.load_inline_fast(a, decls)
                except (kb_fastpath.BuildError, kb_fastpath.SignatureError, OSError) as e:
                    fallback = str(e).strip().splitlines()[0][:200] if str(e).strip() else \
                        type(e).__name__
        keyed = {k: v for k, v in a.items() if k not in ("build_directory", "verbose")}
        keyed["torch"] = torch.__version__
        keyed["python"] = sys.version
        keyed["device"] = device
        if device.startswith("cuda"):
            keyed["capability"] = list(torch.cuda.get_device_capability())
            keyed["arch_list"] = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
        key = hashlib.sha256(json.dumps(keyed, sort_keys=True, default=str).encode()).hexdigest()
        t0 = time.monotonic()
        record = {"name": name, "key": key[:16], "hit": False}
        if fallback:
            record["fast_failed"] = fallback
        cached = os.path.join(cache_dir, key + ".so") if cache_dir else ""
        if cached and a.get("is_python_module", True) and os.path.isfile(cached):
            loader = importlib.machinery.ExtensionFileLoader(name, cached)
            spec = importlib.util.spec_from_file_location(name, cached, loader=loader)
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
            record.update(hit=True, seconds=round(time.monotonic() - t0, 3))
            builds.append(record)
            return mod
        build_dir = os.path.join(work_dir, "kb-build", key[:32])
        os.makedirs(build_dir, exist_ok=True)
        if split and device.startswith("cuda") and a.get("is_python_module", True) and \
                a.get("cuda_sources"):
            try:
                built = split_build(a, name, build_dir, work_dir)
                loader = importlib.machinery.ExtensionFileLoader(name, built)
                spec = importlib.util.spec_from_file_location(name, built, loader=loader)
                mod = importlib.util.module_from_spec(spec)
                loader.exec_module(mod)
                record.update(via="load_inline (split build)",
                              seconds=round(time.monotonic() - t0, 3))
                builds.append(record)
                if cached:
                    publish(built, cached)
                return mod
            except Exception as e:  # noqa: BLE001 - any failure: PyTorch's load_inline decides
                record["split_failed"] = (str(e).strip().splitlines() or [type(e).__name__])[0][
                    :200]
                t0 = time.monotonic()
        a["build_directory"] = build_dir
        a["verbose"] = False
        mod = original(**a)
        record["seconds"] = round(time.monotonic() - t0, 3)
        builds.append(record)
        built = os.path.join(build_dir, name + ".so")
        if cached and a.get("is_python_module", True) and os.path.isfile(built):
            publish(built, cached)
        return mod

    ce.load_inline = load_inline


def publish(built, cached):
    """Write-once: a private temporary name, then a hard link that never replaces an entry."""
    tmp = "%s.tmp-%s" % (cached, os.urandom(8).hex())
    try:
        with open(built, "rb") as src, open(tmp, "xb") as dst:
            dst.write(src.read())
        os.chmod(tmp, 0o444)
        try:
            os.link(tmp, cached)
        except FileExistsError:
            pass
    except OSError as e:
        sys.stderr.write("kb_runner: build cache not written (%s)\n" % e)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


# ---- tensors -------------------------------------------------------------------------------

def host_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dim() == 0:
        t = t.reshape(1)
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def as_tensor_input(x):
    """Python scalars as one-element tensors (f64, i64, bool), as kb_helper.py stores them."""
    if isinstance(x, torch.Tensor):
        return x
    for t, dtype in ((bool, torch.bool), (int, torch.int64), (float, torch.float64)):
        if type(x) is t:  # noqa: E721 - bool is an int subclass
            return torch.tensor([x], dtype=dtype)
    raise CandidateError("InfraError", "get_inputs() returned a %s" % type(x).__name__)


DIGEST_CHUNK = 1 << 24  # 32-bit words hashed at a time
_DIGEST_WEIGHTS = {}


def _digest_weights(device):
    """Per chunk position q: 2q + 1, and q * 0x5851F42D + 1 (int64, on `device`; made once)."""
    import torch as t_
    key = str(device)
    if key not in _DIGEST_WEIGHTS:
        q = t_.arange(DIGEST_CHUNK, dtype=t_.int64, device=device)
        _DIGEST_WEIGHTS[key] = (2 * q + 1, q * 0x5851F42D + 1)
    return _DIGEST_WEIGHTS[key]


def digest(x):
    """A digest of an input's bytes (with dtype and shape) computed where the tensor lives, no copy
    to the host: on the CPU the SHA-256 of its bytes; on a GPU two 64-bit sums of its 32-bit
    words, each weighted by an odd number that depends on the word's position, so that any
    change of a word changes the first. Exact integer arithmetic (modulo 2**64): the same on
    every run over the same bytes, whatever the order of the additions. kb_golden.py computes
    the same for its inputs."""
    import torch as t_
    if not isinstance(x, t_.Tensor):  # a Python scalar, as as_tensor_input() makes it
        kinds = ((bool, t_.bool), (int, t_.int64), (float, t_.float64))
        x = t_.tensor([x], dtype=[d for k, d in kinds if type(x) is k][0])  # noqa: E721
    flat = x.detach().contiguous().reshape(-1)
    if flat.dtype == t_.bool:
        flat = flat.view(t_.uint8)
    b = flat.view(t_.uint8) if flat.numel() else flat.new_zeros(0, dtype=t_.uint8)
    head = "%s%s:" % (str(x.dtype).replace("torch.", ""), list(x.shape))
    if b.device.type == "cpu":  # SHA-256 of the bytes in place: faster than the sums on a CPU
        return head + hashlib.sha256(memoryview(b.numpy())).hexdigest()
    if b.numel() % 4:
        b = t_.cat([b, b.new_zeros(4 - b.numel() % 4)])
    w = b.view(t_.int32)
    odd, mix = _digest_weights(w.device)
    mask = (1 << 64) - 1
    h1 = h2 = 0
    for j, i in enumerate(range(0, w.numel(), DIGEST_CHUNK)):
        c = w[i:i + DIGEST_CHUNK].to(t_.int64)
        n = c.numel()
        # position p = i + q: sum(c * (2p + 1)) = sum(c * (2q + 1)) + 2i * sum(c)
        h1 = (h1 + int(c.mul(odd[:n]).sum()) + 2 * i * int(c.sum())) & mask
        h2 = (h2 + (2 * j + 1) * int(c.bitwise_xor(mix[:n]).mul_(c.add_(0x9E3779B9)).sum())) & mask
    return head + "%016x%016x" % (h1, h2)


def outputs_of(y):
    ys = list(y) if isinstance(y, (list, tuple)) else [y]
    for i, t in enumerate(ys):
        if not isinstance(t, torch.Tensor):
            raise CandidateError("Incorrect", "ModelNew.forward's output %d is a %s, not a "
                                 "tensor" % (i, type(t).__name__))
    return ys


def describe_outputs(ys):
    meta, blobs = [], []
    for t in ys:
        if t.dtype not in DTYPE_NAMES:
            raise CandidateError("Incorrect", "ModelNew.forward returned a tensor of dtype %s"
                                 % t.dtype)
        b = host_bytes(t)
        meta.append({"dtype": DTYPE_NAMES[t.dtype],
                     "shape": list(t.shape) if t.dim() > 0 else [1], "nbytes": len(b)})
        blobs.append(b)
    return meta, blobs


# ---- the harness ---------------------------------------------------------------------------

class Harness:
    def __init__(self):
        self.model = None
        self.model_class = None
        self.timing_sets = None  # (seeds, sets, staging copies) of kb_time_inputs
        self.device = "cpu"

    def sync(self):
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()

    def inputs(self, seed):
        torch.manual_seed(seed)
        try:
            xs = self.get_inputs()
        except Exception as e:  # noqa: BLE001
            raise CandidateError("InfraError", "get_inputs() raised %s" % describe(e))
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in xs]

    def load(self, r):
        global torch, DTYPE_NAMES
        t0 = time.monotonic()
        try:
            import torch as _torch
        except Exception as e:  # noqa: BLE001
            raise CandidateError("InfraError", "PyTorch is not importable by %s (%s)" %
                                 (sys.executable, e))
        torch = _torch
        DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
                       torch.float64: "f64", torch.int32: "i32", torch.int64: "i64",
                       torch.uint8: "u8", torch.int8: "i8", torch.bool: "bool"}
        self.device = r.get("device", "cpu")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise CandidateError("InfraError", "this PyTorch (%s) has no usable CUDA" %
                                 sys.executable)
        torch.set_num_threads(int(r.get("threads") or max(1, min(4, os.cpu_count() or 1))))
        # fp32 means fp32, as the golden outputs were computed (kb_helper.py golden).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        work = r.get("work_dir") or os.getcwd()
        self.builds = []
        install_build_cache(r.get("build_cache", ""), work, self.device, self.builds,
                            bool(r.get("fast_path", True)), bool(r.get("split_build", False)))
        # `import htam` in the candidate: htam.load_cuda, building into the same cache.
        kb_fastpath.configure(cache_dir=r.get("build_cache", ""), work_dir=work,
                              nvcc=r.get("nvcc", ""), builds=self.builds)
        sys.modules["htam"] = kb_fastpath.htam_module()
        # The problem's input generators, without its reference Model.
        problem = types.ModuleType("kb_problem")
        try:
            exec(compile(r.get("problem", ""), "problem.py", "exec"), problem.__dict__)
        except Exception as e:  # noqa: BLE001
            raise CandidateError("InfraError", "the problem file raised %s" % describe(e))
        self.get_inputs = problem.__dict__.get("get_inputs")
        self.get_init_inputs = problem.__dict__.get("get_init_inputs")
        if not callable(self.get_inputs) or not callable(self.get_init_inputs):
            raise CandidateError("InfraError", "the problem file defines no get_inputs / "
                                 "get_init_inputs")
        problem.__dict__.pop("Model", None)
        # The candidate, as a module of its own file (tracebacks name its lines).
        path = os.path.join(work, "candidate.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(r.get("source", ""))
        try:
            compile(r.get("source", ""), "candidate.py", "exec")
        except SyntaxError as e:
            raise CandidateError("CompileError", "candidate.py line %s: syntax error: %s" %
                                 (e.lineno, e.msg))
        spec = importlib.util.spec_from_file_location("kb_candidate", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["kb_candidate"] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException as e:  # noqa: BLE001 - load_inline failures, import errors
            failed_build = "Error building extension" in str(e) or \
                type(e).__name__ in ("CalledProcessError",)
            failed_fast = isinstance(e, (kb_fastpath.BuildError, kb_fastpath.SignatureError))
            raise CandidateError("CompileError", "%s%s%s" % (
                "load_cuda failed: " if failed_fast else
                "load_inline failed: " if failed_build else "importing the candidate raised ",
                describe(e), where_in_candidate(sys.exc_info()[2])))
        cls = getattr(mod, "ModelNew", None)
        if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
            raise CandidateError("CompileError", "the candidate defines no class ModelNew "
                                 "(a torch.nn.Module)")
        self.model_class = cls
        # "construct": false: the import only (its builds: CPU work, no turn on the device); the
        # verifier asks kb_init for ModelNew(*get_init_inputs()) once it holds its turn.
        if r.get("construct", True):
            self.construct()
        return {"ok": True, "seconds": round(time.monotonic() - t0, 3),
                "builds": self.builds}, None

    def construct(self):
        t0 = time.monotonic()
        cls = self.model_class
        init = self.get_init_inputs()
        torch.manual_seed(0)
        try:
            model = cls(*init)
            model = model.to(self.device).eval()
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("Crash", "ModelNew(*get_init_inputs()) raised %s%s" % (
                describe(e), where_in_candidate(sys.exc_info()[2])))
        self.model = model
        self.sync()
        return {"ok": True, "seconds": round(time.monotonic() - t0, 3)}, None

    def call(self, xs, what):
        try:
            with torch.no_grad():
                y = self.model(*xs)
            self.sync()
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("Crash", "ModelNew.forward raised %s%s (%s)" % (
                describe(e), where_in_candidate(sys.exc_info()[2]), what))
        return outputs_of(y)

    def trial(self, r):
        seed = int(r["seed"])
        xs = self.inputs(seed)
        before = [digest(x) for x in xs]
        threads = threading.active_count()
        ops = []
        if r.get("record_ops"):
            from torch.overrides import TorchFunctionMode
            seen = set()

            torch_dir = os.path.dirname(torch.__file__)

            class Record(TorchFunctionMode):
                def __torch_function__(self, func, types, args=(), kwargs=None):
                    name = getattr(func, "__name__", "")
                    mod = getattr(func, "__module__", "") or ""
                    # Called by the candidate's own code, or by a torch.nn layer it kept.
                    via, f = "candidate", sys._getframe(1)
                    while f is not None and (f.f_code.co_filename.startswith(torch_dir) or
                                             f.f_code.co_filename == __file__):
                        if "/nn/modules/" in f.f_code.co_filename:
                            via = "layer"
                        f = f.f_back
                    if (mod, name, via) not in seen:
                        seen.add((mod, name, via))
                        ops.append([mod, name, via])
                    return func(*args, **(kwargs or {}))

            with Record():
                ys = self.call(xs, "input seed %d" % seed)
        else:
            ys = self.call(xs, "input seed %d" % seed)
        after = [digest(x) for x in xs]
        meta, blobs = describe_outputs(ys)
        return {"ok": True, "outputs": meta, "inputs_before": before, "inputs_after": after,
                "ops": ops, "threads_left": threading.active_count() - threads}, blobs

    def time_inputs(self, r):
        """The timing's input sets and staging copies, made before the timed phase (making
        large inputs is host work: it need not hold the device to itself)."""
        self.timing_sets = None
        seeds = [int(s) for s in r["seeds"]]
        sets = [self.inputs(s) for s in seeds]
        stage = [[x.clone() if isinstance(x, torch.Tensor) else x for x in sets[0]]
                 for _ in range(2)]
        self.sync()
        self.timing_sets = (seeds, sets, stage)
        return {"ok": True}, None

    def time(self, r):
        cuda = self.device.startswith("cuda")
        if self.timing_sets is None or self.timing_sets[0] != [int(s) for s in r["seeds"]]:
            self.time_inputs(r)
        _, sets, stage = self.timing_sets
        self.timing_sets = None

        def fill(rep):
            dst, src = stage[rep % 2], sets[rep % len(sets)]
            out = []
            for d, s in zip(dst, src):
                if isinstance(d, torch.Tensor):
                    d.copy_(s)
                    out.append(d)
                else:
                    out.append(s)
            return out

        flush = torch.empty(max(1, int(r.get("flush_bytes", 0)) // 4), dtype=torch.float32,
                            device=self.device)
        reps = max(len(sets), int(r.get("repetitions", 30)))
        # Past `reps`, timed calls go on until their wall time adds up to min_timed_ms (a short
        # kernel's median then rests on thousands of calls, not 50), at most 100000 calls.
        min_timed_s = float(r.get("min_timed_ms", 0)) / 1e3
        warmup, warmup_s = int(r.get("warmup_reps", 3)), float(r.get("warmup_ms", 0)) / 1e3
        # Python's collector stays out of the timed window (its pauses land on random calls).
        gc.collect()
        gc_was = gc.isenabled()
        gc.disable()
        try:
            return self._time(r, sets, fill, flush, reps, warmup, warmup_s, cuda, min_timed_s)
        finally:
            if gc_was:
                gc.enable()

    def _time(self, r, sets, fill, flush, reps, warmup, warmup_s, cuda, min_timed_s=0.0):
        # Warm-up: the device and the host kept busy with the candidate's own calls (rotating
        # sets, as timed) until both warmup_reps calls and warmup_ms have passed, so that clocks
        # are at their steady state when the first timed call starts.
        t0 = time.monotonic()
        t_end = t0 + warmup_s
        i = 0
        while i < warmup or (time.monotonic() < t_end and i < 100000):
            self.call(fill(i), "warm-up")
            i += 1
        warmup_took = time.monotonic() - t0
        # The wall clock's own cost on an empty window (events, synchronize): subtracted from
        # the wall clock by the verifier, which counts max(events, wall - this) per call.
        sync_us = 0.0
        if cuda:
            empty = []
            for _ in range(20):
                a = torch.cuda.Event(enable_timing=True)
                b = torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                a.record()
                b.record()
                torch.cuda.synchronize()
                empty.append((time.perf_counter_ns() - t0) / 1000.0)
            sync_us = statistics.median(empty)
        rep_us, wall_us = [], []
        last = [None] * len(sets)
        prev = []
        timed_s, k = 0.0, -1
        while True:
            k += 1
            if k >= reps and (timed_s >= min_timed_s or k >= 100000):
                break
            xs = fill(k)
            flush.zero_()
            self.sync()
            if cuda:
                e0 = torch.cuda.Event(enable_timing=True)
                e1 = torch.cuda.Event(enable_timing=True)
            try:
                with torch.no_grad():
                    t0 = time.perf_counter_ns()
                    if cuda:
                        e0.record()
                    y = self.model(*xs)
                    if cuda:
                        e1.record()
                    self.sync()
                    t1 = time.perf_counter_ns()
            except BaseException as e:  # noqa: BLE001
                raise CandidateError("Crash", "ModelNew.forward raised %s%s (timed call %d)" % (
                    describe(e), where_in_candidate(sys.exc_info()[2]), k))
            ys = outputs_of(y)
            wall = (t1 - t0) / 1000.0
            timed_s += wall * 1e-6
            wall_us.append(wall)
            rep_us.append(e0.elapsed_time(e1) * 1000.0 if cuda else wall)
            inputs = {x.data_ptr() for x in xs if isinstance(x, torch.Tensor)}
            for t in ys:
                if t.data_ptr() in inputs:
                    continue
                if any(t.data_ptr() == p.data_ptr() for p in prev):
                    raise CandidateError("Incorrect", "a timed call returned the output tensor "
                                         "of the call before it (a result kept across calls)")
            prev = ys
            last[k % len(sets)] = [t.clone() for t in ys]
        meta, blobs = [], []
        for ys in last:
            m, b = describe_outputs(ys)
            meta.append(m)
            blobs += b
        return {"ok": True, "rep_us": rep_us, "wall_us": wall_us, "sync_us": sync_us,
                "outputs": meta, "warmup_done": i, "warmup_s": round(warmup_took, 4)}, blobs

    def handle(self, r):
        op = r.get("op", "")
        if op == "kb_load":
            return self.load(r)
        if op == "kb_init":
            if self.model_class is None:
                raise CandidateError("InfraError", "no ModelNew imported")
            return self.construct()
        if self.model is None:
            raise CandidateError("InfraError", "no ModelNew loaded")
        if op == "kb_time_inputs":
            return self.time_inputs(r)
        if op == "kb_trial":
            return self.trial(r)
        if op == "kb_time":
            return self.time(r)
        raise CandidateError("InfraError", "unknown request %s" % op)


def main():
    # load_inline runs ninja, installed beside the interpreter (pip) more often than on the
    # runner's short PATH.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    if "--fd" not in sys.argv:
        sys.stderr.write("usage: kb_runner.py --fd N\n")
        sys.exit(2)
    fd = int(sys.argv[sys.argv.index("--fd") + 1])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
    h = Harness()
    while True:
        req = recv_frame(sock)
        if req is None:
            return
        payload = None
        try:
            reply, payload = h.handle(req)
        except CandidateError as e:
            reply = {"ok": False, "class": e.cls, "message": str(e)}
        except BaseException as e:  # noqa: BLE001 - the harness answers every request
            reply = {"ok": False, "class": "Crash", "message": "the harness failed: %s" %
                     describe(e)}
        try:
            send_frame(sock, reply, payload)
        except CandidateError as e:
            reply = {"ok": False, "class": e.cls, "message": str(e)}
            send_frame(sock, reply)
        except OSError as e:  # no memory for the memfds
            reply = {"ok": False, "class": "ResourceLimit",
                     "message": "the outputs cannot be handed over: %s" % e}
            send_frame(sock, reply)
        if not reply.get("ok"):
            return


if __name__ == "__main__":
    main()
