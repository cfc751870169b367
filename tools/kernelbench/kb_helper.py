#!/usr/bin/python3
"""KernelBench problem files as htam tasks (docs/backends.md, "KernelBench tasks").

A KernelBench problem file is a Python module with `class Model(torch.nn.Module)`,
`get_inputs()` (a list of tensors) and `get_init_inputs()` (constructor arguments). This helper
is the only place where PyTorch runs: the evaluation worker starts it as a subprocess and never
imports torch itself.

  kb_helper.py import PROBLEM.py OUT_DIR [--name NAME] [--rtol R] [--atol A] [--timeout S]
      Copies the problem to OUT_DIR/problem.py and writes OUT_DIR/task.json: inputs = the
      values of get_inputs() (named after forward's parameters; a Python float, int or bool is a
      one-element f64, i64 or bool tensor marked "python": "float"|"int"|"bool"), then every
      state_dict entry in order (named as in the state_dict), outputs = forward's outputs.
      Dtypes and shapes come from a probe that does not run the problem at full size: first on
      meta tensors (every tensor factory called by get_inputs, the constructor and forward makes
      a meta tensor: no data, no compute), else a run with the batch dimension scaled down
      (batch 2 and 3, output dimensions extrapolated), else a full run on the CPU (bounded by
      --timeout, default 120 s).

  kb_helper.py import-many OUT_ROOT PATH... [--jobs N] [--timeout S] [--rtol R] [--atol A]
      Imports every problem file named or found under the directories named (recursively,
      *.py; only KernelBench's numbered N_Name.py files where a directory has any) into
      OUT_ROOT/<task name>, PyTorch imported once, each problem in a forked child
      (N at a time, default the core count; each bounded by --timeout). Task names are
      kb_<stem>, or kb_<dir>_<stem> when the file sits in a directory named level<N>. One JSON
      line per problem (task_dir, probe = meta|scaled|full, seconds, or error), then a summary
      line; exit status 3 when some problem failed.

  kb_helper.py golden --problem P --out DIR --device cpu|cuda --seeds 0,1,2
                      [--time-seeds 1000,1001] [--reps 30] [--warmup 3] [--flush-bytes N]
                      [--no-compile | --defer-compile]
      For every seed: torch.manual_seed(seed); model = Model(*get_init_inputs()) (under
      torch.manual_seed(0): the parameters are one fixed set per task); inputs = get_inputs();
      outputs = model(*inputs). Writes DIR/seed_<seed>.bin (format below) and, with
      --time-seeds, DIR/baseline.json: PyTorch eager timed over the --time-seeds input sets the
      way the gate times a candidate, and torch.compile where it works. --defer-compile: eager
      only, baseline.json says "compile_pending": true (the caller measures torch.compile later
      with `baseline --compile-only`); an existing baseline.json is then left as it is.

  kb_helper.py baseline --problem P --out DIR --device cpu|cuda --time-seeds 1000,1001
                        [--reps 30] [--warmup 3] [--flush-bytes N] [--no-compile | --compile-only]
                        [--timing-lock FILE]
      Only DIR/baseline.json (no golden file), so that a caller can compute the baseline apart
      from the golden data a verdict needs (torch.compile alone can take a minute).
      --compile-only keeps the eager figures of DIR/baseline.json (timed again when it has none)
      and adds torch.compile's, clearing "compile_pending".
      --timing-lock: every timing repetition loop runs holding FILE exclusive (flock), waiting as
      long as it takes; verifiers hold it shared while they time a candidate, so this run (in the
      background) never times on the device at the same time. torch.compile's compile (its first
      call) runs before, outside the lock. A FILE that cannot be opened: no lock.
      --device-lock FILE [--device-lock-wait S] (golden and baseline): every timing repetition
      loop also holds the device's turn exclusive (daemon/eval/gate/timing_lock.h DeviceLock:
      FILE.turn, then FILE), so that nothing of another evaluation runs on the device while
      PyTorch is timed, and only while it is: making the inputs and importing PyTorch hold no
      turn. A wait past S seconds goes on without it and says so in baseline.json
      ("eager_note").

  kb_helper.py baseline-note --out DIR --note TEXT
      Ends a pending torch.compile measurement that did not finish (killed at its time limit,
      crashed): DIR/baseline.json keeps its eager figures, "compile_pending" becomes false and
      "compile_note" TEXT. Nothing happens when baseline.json is missing or not pending.

  kb_helper.py check CANDIDATE.py --problem PROBLEM.py [--task task.json]
      The static checks of a ModelNew file (kb_static.py beside this file: fallbacks to the
      reference, inheritance, caching, streams, the task's "kernelbench_policy"). Prints
      kb_static's JSON report; exit status 0 accepted, 1 rejected.

Golden file format (little-endian):
  magic "HTAMGLD1" (8 bytes), u32 tensor count, then per tensor:
  u32 role (0 input, 1 output), u32 name length, name (utf-8), u32 dtype name length, dtype name
  ("f32", "f16", "bf16", "f64", "i32", "i64", "u8", "i8", "bool"), u32 ndim, i64 dims[ndim],
  u64 byte count, raw row-major data.

Errors: one line on stderr starting with "kernelbench: " and exit status 3 (problem file) or 2
(usage); the worker reports that line.
"""
import argparse
import contextlib
import fcntl
import importlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import statistics
import struct
import signal
import sys
import tempfile
import threading
import time
import traceback
from math import prod

MAGIC = b"HTAMGLD1"


class ProblemError(Exception):
    """What is wrong, as the one "kernelbench: ..." line, and the exit status."""

    def __init__(self, msg, code=3):
        super().__init__(msg.replace("\n", " "))
        self.code = code


def fail(msg, code=3):
    raise ProblemError(msg, code)


def report_and_exit(e):
    sys.stderr.write("kernelbench: %s\n" % e)
    sys.stderr.flush()
    sys.exit(e.code)


# No spinning waits between PyTorch's CPU threads, as in the runner (kb_runner.py says why):
# set before torch loads its OpenMP and BLAS.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure is reported the same way
    report_and_exit(ProblemError("PyTorch is not importable by %s (%s); install python3-torch"
                                 % (sys.executable, e), 4))
from torch.overrides import TorchFunctionMode  # noqa: E402

DTYPES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8", torch.int8: "i8",
    torch.bool: "bool",
}
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i32": 4, "i64": 8, "u8": 1, "i8": 1,
               "bool": 1}


def load_problem(path):
    if not os.path.isfile(path):
        fail("problem file %s not found" % path)
    spec = importlib.util.spec_from_file_location("kb_problem", path)
    mod = importlib.util.module_from_spec(spec)
    # Level-4 problems build pretrained Hugging Face models at import. Only files already in the
    # local Hugging Face cache are used: a problem never downloads (nor waits on a network).
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(key, "1")
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        fail("%s: syntax error at line %s: %s" % (os.path.basename(path), e.lineno, e.msg))
    except ModuleNotFoundError as e:
        name = os.path.basename(path)
        if e.name == "transformers":
            fail("%s: needs the Hugging Face transformers package (a pretrained model, as in "
                 "KernelBench's level 4), which %s cannot import; refused"
                 % (name, sys.executable))
        fail("%s: importing it raised ModuleNotFoundError: %s" % (name, e))
    except Exception as e:  # noqa: BLE001
        name = os.path.basename(path)
        if os.environ.get("HF_HUB_OFFLINE") == "1" and "transformers" in sys.modules and \
                isinstance(e, (OSError, ValueError)):
            fail("%s: its pretrained model is not in the local Hugging Face cache and problems "
                 "never download (HF_HUB_OFFLINE=1); put the model's files in the cache "
                 "(HF_HOME) to evaluate it; refused (%s: %s)" % (name, type(e).__name__, e))
        fail("%s: importing it raised %s: %s" % (name, type(e).__name__, e))
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, name):
            fail("%s: defines no %s (a KernelBench problem needs Model, get_inputs and "
                 "get_init_inputs)" % (os.path.basename(path), name))
    if not (inspect.isclass(mod.Model) and issubclass(mod.Model, torch.nn.Module)):
        fail("%s: Model is not a torch.nn.Module subclass" % os.path.basename(path))
    return mod


def call(what, fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        tb = traceback.extract_tb(sys.exc_info()[2])
        line = tb[-1].lineno if tb else "?"
        fail("%s raised %s: %s (line %s)" % (what, type(e).__name__, e, line))


def build(mod, device):
    torch.manual_seed(0)
    init = call("get_init_inputs()", mod.get_init_inputs)
    model = call("Model(*get_init_inputs())", lambda: mod.Model(*init))
    return model.to(device).eval()


# Python values get_inputs() may return beside tensors: passed to forward as they are, carried in
# task.json and the golden files as one-element tensors marked with their Python type.
SCALARS = {bool: ("bool", torch.bool), int: ("int", torch.int64), float: ("float", torch.float64)}


def python_kind(x):
    """"float", "int" or "bool" for a Python scalar input, None for a tensor; fails otherwise."""
    if isinstance(x, torch.Tensor):
        return None
    for t, (kind, _) in SCALARS.items():
        if type(x) is t:  # noqa: E721 - bool is an int subclass: the exact type decides
            return kind
    fail("get_inputs() returned a %s: inputs must be tensors or Python float, int or bool "
         "values" % type(x).__name__)


def as_tensor_input(x):
    kind = python_kind(x)
    if kind is None:
        return x
    dtype = [d for k, d in SCALARS.values() if k == kind][0]
    return torch.tensor([x], dtype=dtype)


def make_inputs(mod, seed, device):
    """get_inputs() under torch.manual_seed(seed): tensors moved to `device`, scalars kept."""
    torch.manual_seed(seed)
    xs = call("get_inputs()", mod.get_inputs)
    if not isinstance(xs, (list, tuple)):
        fail("get_inputs() returned %s, not a list of tensors" % type(xs).__name__)
    return [x.to(device) if python_kind(x) is None else x for x in xs]


def as_outputs(y):
    ys = list(y) if isinstance(y, (list, tuple)) else [y]
    for i, t in enumerate(ys):
        if not isinstance(t, torch.Tensor):
            fail("forward's output %d is a %s, not a tensor" % (i, type(t).__name__))
    return ys


def input_names(mod, n):
    try:
        params = [p for p in inspect.signature(mod.Model.forward).parameters.values()
                  if p.name != "self" and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in params]
    except (TypeError, ValueError):
        names = []
    if len(names) != n or len(set(names)) != n:
        names = ["x%d" % i for i in range(n)]
    return names


def tensors_of(mod, model, seed, device):
    """[(role, name, tensor)] of one seed: inputs, state_dict entries, outputs."""
    xs = make_inputs(mod, seed, device)
    with torch.no_grad():
        ys = as_outputs(call("Model.forward", model, *xs))
    names = input_names(mod, len(xs))
    state = list(model.state_dict().items())
    taken = set(names)
    for k, _ in state:
        if k in taken:
            fail("state_dict entry '%s' has the name of an input of forward" % k)
    outs = ["out"] if len(ys) == 1 else ["out%d" % i for i in range(len(ys))]
    rows = [(0, n, as_tensor_input(x)) for n, x in zip(names, xs)]
    rows += [(0, k, v) for k, v in state]
    rows += [(1, n, y) for n, y in zip(outs, ys)]
    for role, name, t in rows:
        if t.dtype not in DTYPES:
            fail("tensor '%s' has dtype %s, which htam does not support" % (name, t.dtype))
    return rows


def host_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dim() == 0:
        t = t.reshape(1)
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: move the raw 16-bit words
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def shape_of(t):
    return list(t.shape) if t.dim() > 0 else [1]


def write_golden(path, rows):
    """Atomically: a temporary name of this process, renamed once complete; a disk that cannot
    take it (full, read-only) fails this run alone, leaving nothing behind."""
    tmp = path + ".tmp%d" % os.getpid()
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            f.write(struct.pack("<I", len(rows)))
            for role, name, t in rows:
                data = host_bytes(t)
                nb = name.encode()
                db = DTYPES[t.dtype].encode()
                dims = shape_of(t)
                f.write(struct.pack("<II", role, len(nb)) + nb)
                f.write(struct.pack("<I", len(db)) + db)
                f.write(struct.pack("<I", len(dims)) + struct.pack("<%dq" % len(dims), *dims))
                f.write(struct.pack("<Q", len(data)))
                f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        fail("cannot write the golden file %s: %s" % (path, e.strerror or e), 5)


# ---- import: shapes and dtypes without running the problem at full size -------------------------

# Tensor factories: under the meta probe they make meta tensors (no data, no compute).
FACTORIES = frozenset((
    "empty", "empty_strided", "zeros", "ones", "full", "rand", "randn", "randint", "randperm",
    "arange", "linspace", "logspace", "eye", "tensor", "as_tensor", "scalar_tensor", "normal",
    "tril_indices", "triu_indices"))
SIZED = frozenset(("empty", "zeros", "ones", "full", "rand", "randn", "randint", "normal"))
SCALED_BATCHES = (2, 3)


def _is_device(x):
    return isinstance(x, (str, torch.device))


class Probe(TorchFunctionMode):
    """Rewrites calls for a probe: tensors stay on the probe's device (.cuda(), .cpu() and
    .to(device) keep them where they are), factories make meta tensors (meta=True) and, with
    batch=(B, b), factories asked for a leading dimension B make it b."""

    def __init__(self, meta, batch=None):
        super().__init__()
        self.meta = meta
        self.batch = batch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        args, kwargs = list(args), dict(kwargs or {})
        if name in ("cuda", "cpu", "pin_memory") and args and isinstance(args[0], torch.Tensor):
            return args[0]
        if name == "to":
            kwargs.pop("device", None)
            args = [x for i, x in enumerate(args) if i == 0 or not _is_device(x)]
            if len(args) == 1 and not kwargs:
                return args[0]
        elif name in FACTORIES:
            if self.meta and (name in ("tensor", "as_tensor") or
                              not any(isinstance(x, torch.Tensor) for x in args)):
                kwargs["device"] = "meta"
            elif "device" in kwargs and kwargs["device"] is not None:
                kwargs["device"] = "cpu"
            if self.batch and name in SIZED:
                self._scale(name, args, kwargs)
        return func(*args, **kwargs)

    def _scale(self, name, args, kwargs):
        big, small = self.batch
        if isinstance(kwargs.get("size"), (tuple, list, torch.Size)):
            sz = kwargs["size"]
            if len(sz) and sz[0] == big:
                kwargs["size"] = (small,) + tuple(sz[1:])
            return
        for i, x in enumerate(args):
            if isinstance(x, (tuple, list, torch.Size)):
                if len(x) and x[0] == big:
                    args[i] = (small,) + tuple(x[1:])
                return
        if name != "randint" and args and type(args[0]) is int and args[0] == big:
            args[0] = small


def _spec(role, name, value):
    """(role, name, dtype name, shape, python kind) of a tensor or Python scalar."""
    kind = python_kind(value) if role == 0 else None
    t = as_tensor_input(value) if kind else value
    if t.dtype not in DTYPES:
        fail("tensor '%s' has dtype %s, which htam does not support" % (name, t.dtype))
    return (role, name, DTYPES[t.dtype], shape_of(t), kind)


def _inputs(mod, probe):
    torch.manual_seed(0)
    with probe:
        xs = call("get_inputs()", mod.get_inputs)
    if not isinstance(xs, (list, tuple)):
        fail("get_inputs() returned %s, not a list of tensors" % type(xs).__name__)
    for x in xs:
        python_kind(x)
    return list(xs)


def _run(mod, xs, probe):
    torch.manual_seed(0)
    with probe:
        init = call("get_init_inputs()", mod.get_init_inputs)
        model = call("Model(*get_init_inputs())", lambda: mod.Model(*init))
        model.eval()
        with torch.no_grad():
            ys = as_outputs(call("Model.forward", model, *xs))
    return model, ys


def _rows(mod, xs, model, out_specs):
    names = input_names(mod, len(xs))
    state = list(model.state_dict().items())
    for k, _ in state:
        if k in names:
            fail("state_dict entry '%s' has the name of an input of forward" % k)
    rows = [_spec(0, n, x) for n, x in zip(names, xs)] + [_spec(0, k, v) for k, v in state]
    outs = ["out"] if len(out_specs) == 1 else ["out%d" % i for i in range(len(out_specs))]
    return rows + [(1, n, d, sh, None) for n, (d, sh) in zip(outs, out_specs)]


def _out_specs(ys):
    return [(_spec(1, "out", y)[2], shape_of(y)) for y in ys]


def _all_meta(what, tensors):
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            fail("%s made a tensor on %s, not through a factory the probe sees" %
                 (what, t.device))


def probe_meta(mod):
    xs = _inputs(mod, Probe(meta=True))
    _all_meta("get_inputs()", xs)  # e.g. torch.from_numpy: a real run would be full size
    model, ys = _run(mod, xs, Probe(meta=True))
    _all_meta("the model", list(model.state_dict().values()) + ys)
    return _rows(mod, xs, model, _out_specs(ys))


def probe_scaled(mod):
    """Real runs at batch 2 and 3 (the leading dimension of the first tensor input, in every
    tensor input that has it); output dimensions that change are extrapolated linearly."""
    full = _inputs(mod, Probe(meta=True))
    tensors = [x for x in full if isinstance(x, torch.Tensor) and x.dim() > 0]
    if not tensors or tensors[0].shape[0] <= max(SCALED_BATCHES):
        fail("no batch dimension to scale")
    big = tensors[0].shape[0]
    runs = []
    for b in SCALED_BATCHES:
        xs = _inputs(mod, Probe(meta=False, batch=(big, b)))
        for f, x in zip(full, xs):
            if isinstance(f, torch.Tensor):
                want = list(f.shape)
                if want and want[0] == big:
                    want[0] = b
                if list(x.shape) != want:
                    fail("get_inputs() at batch %d gave shape %s where %s was expected" %
                         (b, list(x.shape), want))
        model, ys = _run(mod, xs, Probe(meta=False))
        runs.append(_out_specs(ys))
    (b1, b2), (r1, r2) = SCALED_BATCHES, runs
    outs = []
    for (d1, s1), (d2, s2) in zip(r1, r2):
        if d1 != d2 or len(s1) != len(s2):
            fail("outputs differ in dtype or rank between batch %d and %d" % (b1, b2))
        shape = []
        for u, v in zip(s1, s2):
            slope = (v - u) // (b2 - b1)
            if slope * (b2 - b1) != v - u or u - slope * b1 < 0:
                fail("an output dimension is not linear in the batch size")
            shape.append(slope * big + u - slope * b1)
        outs.append((d1, shape))
    return _rows(mod, full, model, outs)


def probe_full(mod):
    xs = _inputs(mod, Probe(meta=False))
    model, ys = _run(mod, xs, Probe(meta=False))
    return _rows(mod, xs, model, _out_specs(ys))


class Watchdog:
    """Ends the process with a "kernelbench: ..." line after `seconds` (a long operator holds
    a Python signal handler back; this thread runs while the operator holds no GIL)."""

    def __init__(self, seconds, what):
        self.what = what
        self.timer = threading.Timer(seconds, self.expire) if seconds > 0 else None
        self.seconds = seconds

    def expire(self):
        sys.stderr.write("kernelbench: %s ran past %g s\n" % (self.what, self.seconds))
        sys.stderr.flush()
        os._exit(3)

    def __enter__(self):
        if self.timer:
            self.timer.daemon = True
            self.timer.start()
        return self

    def __exit__(self, *exc):
        if self.timer:
            self.timer.cancel()


def probe(mod):
    """(rows, method): the cheapest probe that works. A problem's own error (its get_inputs
    raising, a missing name) comes from the full run, the last one tried."""
    for method, fn in (("meta", probe_meta), ("scaled", probe_scaled)):
        try:
            return fn(mod), method
        except Exception:  # noqa: BLE001 - an operator without a meta kernel, and the like
            pass
    return probe_full(mod), "full"


def task_name(problem, given=""):
    if given:
        return given
    stem = os.path.splitext(os.path.basename(problem))[0]
    parent = os.path.basename(os.path.dirname(os.path.abspath(problem)))
    if parent.startswith("level") and parent[5:].isdigit():
        return "kb_%s_%s" % (parent, stem)
    return "kb_" + stem


def import_one(problem, out_dir, name, rtol, atol, timeout_s):
    t0 = time.monotonic()
    with Watchdog(timeout_s, "importing %s" % os.path.basename(problem)):
        mod = load_problem(problem)
        rows, method = probe(mod)
    os.makedirs(out_dir, exist_ok=True)
    dst = os.path.join(out_dir, "problem.py")
    if os.path.abspath(problem) != os.path.abspath(dst):
        shutil.copyfile(problem, dst)

    def entry(n, d, sh, kind):
        e = {"name": n, "dtype": d, "shape": sh}
        if kind:
            e["python"] = kind
        return e

    nbytes = sum(DTYPE_BYTES[d] * prod(sh) for _, _, d, sh, _ in rows)
    task = {
        "name": name,
        "category": "kernelbench",
        "description": "KernelBench problem %s: inputs are get_inputs() then the model's "
                       "state_dict entries; outputs are forward's" % os.path.basename(problem),
        "dims": [],
        "inputs": [entry(n, d, sh, k) for r, n, d, sh, k in rows if r == 0],
        "outputs": [entry(n, d, sh, k) for r, n, d, sh, k in rows if r == 1],
        "shapes": {"seen": [{}]},
        "tolerance": {"rtol": rtol, "atol": atol, "bad_budget": 0.0},
        "flops": "0",
        "bytes": str(nbytes),
        "kernelbench": "problem.py",
        "references": {},
    }
    tmp = os.path.join(out_dir, "task.json.tmp%d" % os.getpid())
    with open(tmp, "w") as f:
        json.dump(task, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(out_dir, "task.json"))
    return {"task_dir": out_dir, "name": name, "inputs": len(task["inputs"]),
            "outputs": len(task["outputs"]), "probe": method,
            "seconds": round(time.monotonic() - t0, 3)}


def cmd_import(a):
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    r = import_one(a.problem, a.out_dir, task_name(a.problem, a.name), a.rtol, a.atol, a.timeout)
    print(json.dumps(r))


def problem_files(paths):
    """Files named, and the *.py files under directories named. Where a directory holds
    KernelBench's numbered problem files (19_ReLU.py), only those: KernelBench's repository
    also holds its own scripts."""
    found = []
    for p in paths:
        if not os.path.isdir(p):
            found.append(p)
            continue
        under = []
        for root, dirs, files in os.walk(p):
            dirs.sort()
            under += [os.path.join(root, f) for f in sorted(files)
                      if f.endswith(".py") and not f.startswith("__")]
        numbered = [f for f in under if re.match(r"\d+_", os.path.basename(f))]
        found += numbered or under
    return found


def _child(problem, out_dir, name, a, result_path):
    """A forked child: imports one problem, writes its result, never returns."""
    code = 0
    err = os.open(result_path + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    try:
        r = import_one(problem, out_dir, name, a.rtol, a.atol, a.timeout)
    except ProblemError as e:
        r, code = {"error": "kernelbench: %s" % e}, e.code
    except BaseException as e:  # noqa: BLE001 - a child reports everything and exits
        r, code = {"error": "kernelbench: import failed: %s: %s" % (type(e).__name__, e)}, 3
    with open(result_path, "w") as f:
        json.dump(r, f)
    os._exit(code)


def warm_imports():
    """What PyTorch 2.x imports lazily on the first operators on meta tensors (its Python meta
    kernels, decompositions, symbolic shapes and sympy: 879 modules in PyTorch 2.11, about 4 s
    where no bytecode cache can be written), done once before forking so that no child pays for
    it again. Meta tensors only: no data, no compute, so no thread pool starts in the parent."""
    try:
        x = torch.empty(2, 3, 8, 8, device="meta")
        w = torch.empty(4, 3, 3, 3, device="meta")
        y = torch.nn.functional.conv2d(x, w, padding=1).flatten(1)
        z = torch.nn.functional.relu(y @ torch.empty(y.shape[1], 5, device="meta"))
        torch.softmax(z, dim=-1).sum()
    except Exception:  # noqa: BLE001 - an older PyTorch without some meta kernel: nothing to warm
        pass


def cmd_import_many(a):
    """PyTorch imported once; each problem in a forked child (isolation, a hard time limit)."""
    problems = problem_files(a.paths)
    if not problems:
        fail("no problem files under %s" % " ".join(a.paths), 2)
    names = [task_name(p) for p in problems]
    seen = set()
    for p, n in zip(problems, names):
        if n in seen:
            fail("two problems would be imported as %s (%s): import them separately" % (n, p), 2)
        seen.add(n)
    os.makedirs(a.out_root, exist_ok=True)
    warm_imports()
    scratch = tempfile.mkdtemp(prefix="kb-import-")
    t0 = time.monotonic()
    jobs = max(1, a.jobs or os.cpu_count() or 1)
    pending = list(enumerate(problems))
    running = {}  # pid -> (index, start)
    failed = 0
    sys.stdout.flush()
    while pending or running:
        while pending and len(running) < jobs:
            i, p = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(p, os.path.join(a.out_root, names[i]), names[i], a,
                       os.path.join(scratch, "%d.json" % i))
            running[pid] = (i, time.monotonic())
        pid, st = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for cpid, (i, start) in running.items():
                if now - start > a.timeout + 10:  # the child's own watchdog missed it
                    os.kill(cpid, signal.SIGKILL)
            time.sleep(0.005)
            continue
        i, start = running.pop(pid)
        path = os.path.join(scratch, "%d.json" % i)
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            why = ("killed by signal %d" % os.WTERMSIG(st) if os.WIFSIGNALED(st)
                   else "exit status %d" % os.WEXITSTATUS(st))
            r = {"error": "kernelbench: the import process ended (%s) without a result" % why}
            try:
                with open(path + ".err") as f:
                    said = [x.strip() for x in f if x.startswith("kernelbench: ")]
                if said:
                    r["error"] = said[-1]
            except OSError:
                pass
        r = dict({"problem": problems[i]}, **r)
        if "error" in r:
            failed += 1
            r["seconds"] = round(time.monotonic() - start, 3)
        print(json.dumps(r), flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"imported": len(problems) - failed, "failed": failed,
                      "seconds": round(time.monotonic() - t0, 2), "jobs": jobs}), flush=True)
    if failed:
        sys.exit(3)


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_fn(fn, sets, device, reps, warmup, flush_bytes):
    """Median and IQR in microseconds: rotating input sets, cache flush outside the window; CUDA
    events on a GPU, the monotonic clock on the CPU."""
    flush = torch.empty(max(1, flush_bytes // 4), dtype=torch.float32, device=device)
    with torch.no_grad():
        for i in range(warmup):
            fn(*sets[i % len(sets)])
        sync(device)
        times = []
        for r in range(reps):
            xs = sets[r % len(sets)]
            flush.zero_()
            if device.startswith("cuda"):
                a = torch.cuda.Event(enable_timing=True)
                b = torch.cuda.Event(enable_timing=True)
                a.record()
                fn(*xs)
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1000.0)
            else:
                t0 = time.perf_counter_ns()
                fn(*xs)
                times.append((time.perf_counter_ns() - t0) / 1000.0)
    q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
    return statistics.median(times), q[2] - q[0], len(times)


def cuda_check(device):
    if device.startswith("cuda") and not torch.cuda.is_available():
        fail("device %s requested but this PyTorch has no usable CUDA" % device, 4)


PENDING_NOTE = "torch.compile: being measured in the background"


def open_lock_file(path, mode):
    """A descriptor of the lock file `path` (made with `mode` if missing; read-only where it
    cannot be written: flock needs no write access), or -1."""
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            return os.open(path, flags | os.O_CLOEXEC, mode)
        except OSError:
            pass
    return -1


@contextlib.contextmanager
def timing_lock(path):
    """Holds the host-wide timing lock FILE exclusive (see --timing-lock); yields whether it is
    held. No path, a file that cannot be opened or a file system without flock: not held."""
    fd = open_lock_file(path, 0o644) if path else -1
    if fd >= 0:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            os.close(fd)
            fd = -1
    try:
        yield fd >= 0
    finally:
        if fd >= 0:
            os.close(fd)  # releases the lock


@contextlib.contextmanager
def device_turn(path, wait_s):
    """The device's turn, exclusive (see --device-lock); yields "" when held or absent, else why
    the timing went on without it. The protocol of DeviceLock::Turn(LOCK_EX): the turn file
    exclusive, so that shared takers arriving later wait behind this one, then the lock file
    exclusive, then the turn file released."""
    fds = [fd for fd in (open_lock_file(f, 0o666) for f in ((path + ".turn", path) if path else ()))
           if fd >= 0]
    if len(fds) != 2:  # no lock
        for fd in fds:
            os.close(fd)
        yield ""
        return

    def take(fd, deadline):
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.002)
            except OSError:
                return False

    deadline = time.monotonic() + max(0.0, wait_s)
    turn, lock = fds
    held = take(turn, deadline) and take(lock, deadline)
    try:
        fcntl.flock(turn, fcntl.LOCK_UN)
    except OSError:
        pass
    try:
        yield "" if held else ("timed without the device to itself: another evaluation kept it "
                               "longer than %g s" % wait_s)
    finally:
        for fd in fds:
            os.close(fd)  # releases the lock


def read_baseline(out):
    try:
        with open(os.path.join(out, "baseline.json")) as f:
            base = json.load(f)
        return base if isinstance(base, dict) else None
    except (OSError, ValueError):
        return None


def save_baseline(out, base, replace=True):
    """Atomically (temporary file + rename); replace=False leaves an existing file as it is."""
    tmp = os.path.join(out, "baseline.json.tmp%d" % os.getpid())
    with open(tmp, "w") as f:
        json.dump(base, f)
    final = os.path.join(out, "baseline.json")
    if replace:
        os.replace(tmp, final)
        return
    try:
        os.link(tmp, final)  # fails when another run wrote baseline.json first
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


# The precision every figure of baseline.json is timed in: the one a candidate runs in
# (kb_runner.py: TF32 off), so that a speedup compares like with like. The daemon recomputes a
# baseline.json without it (kernelbench.cc kBaselinePrecision): one timed with PyTorch's defaults,
# where cuDNN's TF32 made a convolution 2-9x faster than the same code as a candidate.
BASELINE_PRECISION = "fp32"


@contextlib.contextmanager
def full_fp32():
    """fp32 means fp32 (no TF32 in matmuls or cuDNN) inside; the settings before restored after."""
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def write_baseline(a, mod, model, device):
    with full_fp32():
        _write_baseline(a, mod, model, device)


def _write_baseline(a, mod, model, device):
    sets = [make_inputs(mod, int(s), device) for s in a.time_seeds.split(",") if s != ""]
    old = read_baseline(a.out) if getattr(a, "compile_only", False) else None
    if (old and old.get("device") == device and old.get("eager_us", 0) > 0
            and old.get("precision") == BASELINE_PRECISION):
        base = old
    else:
        base = {"device": device, "torch": torch.__version__, "reps": a.reps,
                "method": "cuda events" if device.startswith("cuda") else "monotonic clock",
                "precision": BASELINE_PRECISION}
        with timing_lock(getattr(a, "timing_lock", "")), \
                device_turn(a.device_lock, a.device_lock_wait) as missed:
            med, iqr, n = time_fn(model, sets, device, a.reps, a.warmup, a.flush_bytes)
        base.update(eager_us=med, eager_spread_us=iqr)
        if missed:
            base["eager_note"] = missed
    base["compile_pending"] = False
    base.pop("compile_note", None)
    compiled = getattr(torch, "compile", None)
    if getattr(a, "defer_compile", False):
        base["compile_pending"] = True
        base["compile_note"] = PENDING_NOTE
    elif getattr(a, "no_compile", False):
        base["compile_note"] = "torch.compile not timed (--no-compile)"
    elif compiled is None:
        base["compile_note"] = "torch.compile unavailable in torch %s" % torch.__version__
    else:
        try:
            cm = compiled(model)
            with torch.no_grad():  # torch.compile compiles at the first call: outside the lock
                cm(*sets[0])
            sync(device)
            with timing_lock(getattr(a, "timing_lock", "")), \
                    device_turn(a.device_lock, a.device_lock_wait):
                cmed, ciqr, _ = time_fn(cm, sets, device, a.reps, a.warmup, a.flush_bytes)
            base.update(compile_us=cmed, compile_spread_us=ciqr)
        except Exception as e:  # noqa: BLE001 - torch.compile fails in many ways
            base["compile_note"] = "torch.compile failed: %s: %s" % (
                type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    # A deferred first figure leaves a baseline.json another run wrote first, unless that one was
    # timed in another precision (written before BASELINE_PRECISION was recorded).
    there = read_baseline(a.out)
    stale = not there or there.get("precision") != BASELINE_PRECISION
    save_baseline(a.out, base, replace=not getattr(a, "defer_compile", False) or stale)


def cmd_golden(a):
    mod = load_problem(a.problem)
    device = a.device
    cuda_check(device)
    model = build(mod, device)
    os.makedirs(a.out, exist_ok=True)
    seeds = [int(s) for s in a.seeds.split(",") if s != ""]
    # Golden outputs in full precision (no TF32 on a GPU); the baseline below is timed so too.
    with full_fp32():
        for s in seeds:
            write_golden(os.path.join(a.out, "seed_%d.bin" % s), tensors_of(mod, model, s, device))
    if a.time_seeds:
        write_baseline(a, mod, model, device)


def cmd_baseline(a):
    if a.compile_only and not os.path.isdir(a.out):
        fail("baseline: %s: no such directory" % a.out, 2)  # the cache was removed meanwhile
    mod = load_problem(a.problem)
    cuda_check(a.device)
    model = build(mod, a.device)
    if not a.compile_only:
        os.makedirs(a.out, exist_ok=True)
    write_baseline(a, mod, model, a.device)


def cmd_baseline_note(a):
    base = read_baseline(a.out)
    if not base or not base.get("compile_pending"):
        return
    base["compile_pending"] = False
    base["compile_note"] = a.note
    save_baseline(a.out, base)


def cmd_check(a):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kb_static
    try:
        with open(a.candidate, encoding="utf-8") as f:
            src = f.read()
        with open(a.problem, encoding="utf-8") as f:
            problem = f.read()
        task = {}
        if a.task:
            with open(a.task, encoding="utf-8") as f:
                task = json.load(f)
        policy = kb_static.policy_from_task(task)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        fail("check: %s" % e, 2)
    r = kb_static.check(src, problem, policy)
    print(json.dumps(r.as_dict()))
    if not r.ok:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd")
    i = sub.add_parser("import")
    i.add_argument("problem")
    i.add_argument("out_dir")
    i.add_argument("--name", default="")
    m = sub.add_parser("import-many")
    m.add_argument("out_root")
    m.add_argument("paths", nargs="+")
    m.add_argument("--jobs", type=int, default=0)
    for x in (i, m):
        x.add_argument("--rtol", type=float, default=1e-4)
        x.add_argument("--atol", type=float, default=1e-4)
        x.add_argument("--timeout", type=float, default=120.0)
    g = sub.add_parser("golden")
    g.add_argument("--seeds", required=True)
    g.add_argument("--time-seeds", default="")
    gc = g.add_mutually_exclusive_group()
    gc.add_argument("--no-compile", action="store_true")
    gc.add_argument("--defer-compile", action="store_true")
    b = sub.add_parser("baseline")
    b.add_argument("--time-seeds", required=True)
    bc = b.add_mutually_exclusive_group()
    bc.add_argument("--no-compile", action="store_true")
    bc.add_argument("--compile-only", action="store_true")
    b.add_argument("--timing-lock", default="")
    n = sub.add_parser("baseline-note")
    n.add_argument("--out", required=True)
    n.add_argument("--note", required=True)
    for x in (g, b):
        x.add_argument("--problem", required=True)
        x.add_argument("--out", required=True)
        x.add_argument("--device", default="cpu")
        x.add_argument("--reps", type=int, default=30)
        x.add_argument("--warmup", type=int, default=3)
        x.add_argument("--flush-bytes", type=int, default=8 << 20)
        x.add_argument("--device-lock", default="")
        x.add_argument("--device-lock-wait", type=float, default=600.0)
    c = sub.add_parser("check")
    c.add_argument("candidate")
    c.add_argument("--problem", required=True)
    c.add_argument("--task", default="")
    a = p.parse_args()
    # import-many forks children after importing torch: no operator (and no thread pool) before.
    if a.cmd in ("golden", "baseline"):
        torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    cmds = {"import": cmd_import, "import-many": cmd_import_many, "golden": cmd_golden,
            "baseline": cmd_baseline, "baseline-note": cmd_baseline_note, "check": cmd_check}
    if a.cmd not in cmds:
        p.print_help(sys.stderr)
        sys.exit(2)
    try:
        cmds[a.cmd](a)
    except ProblemError as e:
        report_and_exit(e)


if __name__ == "__main__":
    main()
