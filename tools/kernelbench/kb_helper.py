#!/usr/bin/python3
"""KernelBench problem files as htam tasks (docs/backends.md, "KernelBench tasks").

A KernelBench problem file is a Python module with `class Model(torch.nn.Module)`,
`get_inputs()` (a list of tensors) and `get_init_inputs()` (constructor arguments). This helper
is the only place where PyTorch runs: the evaluation worker starts it as a subprocess and never
imports torch itself.

  kb_helper.py import PROBLEM.py OUT_DIR [--name NAME] [--rtol R] [--atol A]
      Copies the problem to OUT_DIR/problem.py and writes OUT_DIR/task.json: inputs = the
      tensors of get_inputs() (named after forward's parameters), then every state_dict entry
      in order (named as in the state_dict), outputs = forward's outputs; dtypes and shapes come
      from a probe run on the CPU.

  kb_helper.py golden --problem P --out DIR --device cpu|cuda --seeds 0,1,2
                      [--time-seeds 1000,1001] [--reps 30] [--warmup 3] [--flush-bytes N]
      For every seed: torch.manual_seed(seed); model = Model(*get_init_inputs()) (under
      torch.manual_seed(0): the parameters are one fixed set per task); inputs = get_inputs();
      outputs = model(*inputs). Writes DIR/seed_<seed>.bin (format below) and, with
      --time-seeds, DIR/baseline.json: PyTorch eager timed over the --time-seeds input sets the
      way the gate times a candidate, and torch.compile where it works.

Golden file format (little-endian):
  magic "HTAMGLD1" (8 bytes), u32 tensor count, then per tensor:
  u32 role (0 input, 1 output), u32 name length, name (utf-8), u32 dtype name length, dtype name
  ("f32", "f16", "bf16", "f64", "i32", "i64", "u8", "i8", "bool"), u32 ndim, i64 dims[ndim],
  u64 byte count, raw row-major data.

Errors: one line on stderr starting with "kernelbench: " and exit status 3 (problem file) or 2
(usage); the worker reports that line.
"""
import argparse
import importlib.util
import inspect
import json
import os
import shutil
import statistics
import struct
import sys
import time
import traceback

MAGIC = b"HTAMGLD1"


def fail(msg, code=3):
    sys.stderr.write("kernelbench: " + msg.replace("\n", " ") + "\n")
    sys.exit(code)


try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure is reported the same way
    fail("PyTorch is not importable by %s (%s); install python3-torch" % (sys.executable, e), 4)

DTYPES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8", torch.int8: "i8",
    torch.bool: "bool",
}


def load_problem(path):
    if not os.path.isfile(path):
        fail("problem file %s not found" % path)
    spec = importlib.util.spec_from_file_location("kb_problem", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        fail("%s: syntax error at line %s: %s" % (os.path.basename(path), e.lineno, e.msg))
    except Exception as e:  # noqa: BLE001
        fail("%s: importing it raised %s: %s" % (os.path.basename(path), type(e).__name__, e))
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


def make_inputs(mod, seed, device):
    torch.manual_seed(seed)
    xs = call("get_inputs()", mod.get_inputs)
    if not isinstance(xs, (list, tuple)):
        fail("get_inputs() returned %s, not a list of tensors" % type(xs).__name__)
    out = []
    for i, x in enumerate(xs):
        if not isinstance(x, torch.Tensor):
            fail("get_inputs()[%d] is a %s: only tensor inputs are supported" %
                 (i, type(x).__name__))
        out.append(x.to(device))
    return out


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
    rows = [(0, n, x) for n, x in zip(names, xs)] + [(0, k, v) for k, v in state]
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
    tmp = path + ".tmp%d" % os.getpid()
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


def cmd_import(a):
    mod = load_problem(a.problem)
    model = build(mod, "cpu")
    rows = tensors_of(mod, model, 0, "cpu")
    os.makedirs(a.out_dir, exist_ok=True)
    dst = os.path.join(a.out_dir, "problem.py")
    if os.path.abspath(a.problem) != os.path.abspath(dst):
        shutil.copyfile(a.problem, dst)
    name = a.name or "kb_" + os.path.splitext(os.path.basename(a.problem))[0]
    nbytes = sum(len(host_bytes(t)) for _, _, t in rows)
    task = {
        "name": name,
        "category": "kernelbench",
        "description": "KernelBench problem %s: inputs are get_inputs() then the model's "
                       "state_dict entries; outputs are forward's" % os.path.basename(a.problem),
        "dims": [],
        "inputs": [{"name": n, "dtype": DTYPES[t.dtype], "shape": shape_of(t)}
                   for r, n, t in rows if r == 0],
        "outputs": [{"name": n, "dtype": DTYPES[t.dtype], "shape": shape_of(t)}
                    for r, n, t in rows if r == 1],
        "shapes": {"seen": [{}]},
        "tolerance": {"rtol": a.rtol, "atol": a.atol, "bad_budget": 0.0},
        "flops": "0",
        "bytes": str(nbytes),
        "kernelbench": "problem.py",
        "references": {},
    }
    with open(os.path.join(a.out_dir, "task.json"), "w") as f:
        json.dump(task, f, indent=2)
        f.write("\n")
    print(json.dumps({"task_dir": a.out_dir, "inputs": len(task["inputs"]),
                      "outputs": len(task["outputs"])}))


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


def cmd_golden(a):
    mod = load_problem(a.problem)
    device = a.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        fail("device %s requested but this PyTorch has no usable CUDA" % device, 4)
    model = build(mod, device)
    os.makedirs(a.out, exist_ok=True)
    seeds = [int(s) for s in a.seeds.split(",") if s != ""]
    # Golden outputs in full precision (no TF32 on a GPU); the baseline below keeps the defaults.
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for s in seeds:
        write_golden(os.path.join(a.out, "seed_%d.bin" % s), tensors_of(mod, model, s, device))
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    if a.time_seeds:
        sets = [make_inputs(mod, int(s), device) for s in a.time_seeds.split(",") if s != ""]
        base = {"device": device, "torch": torch.__version__, "reps": a.reps,
                "method": "cuda events" if device.startswith("cuda") else "monotonic clock"}
        med, iqr, n = time_fn(model, sets, device, a.reps, a.warmup, a.flush_bytes)
        base.update(eager_us=med, eager_spread_us=iqr)
        compiled = getattr(torch, "compile", None)
        if compiled is None:
            base["compile_note"] = "torch.compile unavailable in torch %s" % torch.__version__
        else:
            try:
                cm = compiled(model)
                cmed, ciqr, _ = time_fn(cm, sets, device, a.reps, a.warmup, a.flush_bytes)
                base.update(compile_us=cmed, compile_spread_us=ciqr)
            except Exception as e:  # noqa: BLE001 - torch.compile fails in many ways
                base["compile_note"] = "torch.compile failed: %s: %s" % (
                    type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        tmp = os.path.join(a.out, "baseline.json.tmp")
        with open(tmp, "w") as f:
            json.dump(base, f)
        os.replace(tmp, os.path.join(a.out, "baseline.json"))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd")
    i = sub.add_parser("import")
    i.add_argument("problem")
    i.add_argument("out_dir")
    i.add_argument("--name", default="")
    i.add_argument("--rtol", type=float, default=1e-4)
    i.add_argument("--atol", type=float, default=1e-4)
    g = sub.add_parser("golden")
    g.add_argument("--problem", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--device", default="cpu")
    g.add_argument("--seeds", required=True)
    g.add_argument("--time-seeds", default="")
    g.add_argument("--reps", type=int, default=30)
    g.add_argument("--warmup", type=int, default=3)
    g.add_argument("--flush-bytes", type=int, default=8 << 20)
    a = p.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    if a.cmd == "import":
        cmd_import(a)
    elif a.cmd == "golden":
        cmd_golden(a)
    else:
        p.print_help(sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
