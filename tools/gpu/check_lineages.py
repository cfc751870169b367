#!/usr/bin/env python3
"""Check and time the CUDA lineages of the task suite on a GPU machine.

Self-contained: needs nvcc, g++, PyTorch with CUDA (and optionally pynvml for clocks). For every
task in configs/tasks/<name>/ that has a lineage.json for the cuda backend it
  1. compiles reference.cu and every variant into a shared library (nvcc -arch=sm_90, in
     parallel), and reference.cpp with g++;
  2. checks every candidate against reference.cu on every seen and held-out shape, two seeds each,
     with fresh random inputs drawn from task.json: outputs poisoned (NaN / sentinel) and framed by
     guard elements, candidate run before the reference, inputs compared after the run, NaN/Inf
     rejected, all-zero outputs rejected, task tolerance with its bad-element budget, a second run
     compared with the first;
  3. checks reference.cu itself against an independent PyTorch formula (float64 where it matters)
     and reference.cpp against reference.cu on the smallest shape;
  4. times every candidate that ran, and the reference, on every shape: warm-up, L2 flushed
     (a write of >= 2x the L2 size) before every repetition outside the timed window, CUDA events
     around the call only, three rotating input sets where memory allows, median and IQR;
     SM and memory clocks are read (never set) right after each timing loop.
Each task runs in its own worker process, so a crashing or hanging candidate loses only itself:
the parent restarts the worker for the remaining candidates.

Usage: check_lineages.py [--tasks configs/tasks] [--out DIR] [--only a,b] [--sdk sdk/include]
Writes DIR/results.json and prints a table.
"""
import argparse
import concurrent.futures as cf
import ctypes
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

# ----------------------------------------------------------------------------- compile


def nvcc_cmd(src, so, sdk):
    return ["nvcc", "-arch=sm_90", "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC",
            "-I", sdk, "-o", so, src]


def gxx_cmd(src, so, sdk):
    return ["g++", "-O2", "-std=c++17", "-shared", "-fPIC", "-I", sdk, "-o", so, src]


def compile_one(job):
    cmd = job["cmd"]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        rc, log = p.returncode, (p.stdout + p.stderr)
    except subprocess.TimeoutExpired:
        rc, log = -1, "compile timeout"
    return dict(job, rc=rc, log=log[-4000:], compile_s=round(time.time() - t0, 2))


def discover(tasks_dir, only):
    tasks = []
    for name in sorted(os.listdir(tasks_dir)):
        d = os.path.join(tasks_dir, name)
        lp = os.path.join(d, "lineage.json")
        tp = os.path.join(d, "task.json")
        if not (os.path.isfile(lp) and os.path.isfile(tp)):
            continue
        if only and name not in only:
            continue
        with open(tp) as f:
            task = json.load(f)
        with open(lp) as f:
            lineage = json.load(f)
        if lineage.get("backend") != "cuda" or "cuda" not in task.get("references", {}):
            continue
        tasks.append((name, d, task, lineage))
    return tasks


# ----------------------------------------------------------------------------- worker (GPU)

DTYPES = None


def torch_dtypes(torch):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
            "f64": torch.float64, "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8,
            "i8": torch.int8, "bool": torch.bool}


ABI_DTYPE = {"f32": 0, "f16": 1, "bf16": 2, "f64": 3, "i32": 4, "i64": 5, "u8": 6, "i8": 7,
             "bool": 8}


class HtamTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]


def make_abi(tensors, dts):
    arr = (HtamTensor * max(1, len(tensors)))()
    for k, (t, dt) in enumerate(zip(tensors, dts)):
        arr[k].data = t.data_ptr()
        arr[k].dtype = ABI_DTYPE[dt]
        arr[k].ndim = t.dim()
        for i, s in enumerate(t.shape):
            arr[k].shape[i] = s
        for i, s in enumerate(t.stride()):
            arr[k].strides[i] = s
    return arr


def load_kernel(so):
    lib = ctypes.CDLL(so, mode=os.RTLD_LOCAL | getattr(os, "RTLD_NOW", 2))
    fn = lib.htam_kernel
    fn.argtypes = [ctypes.POINTER(HtamTensor), ctypes.c_int, ctypes.POINTER(HtamTensor),
                   ctypes.c_int, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return lib, fn


def dims_of(shape_spec, dims):
    return [int(dims[s]) if isinstance(s, str) else int(s) for s in shape_spec]


def gen_input(torch, spec, dims, gen, device):
    dt = torch_dtypes(torch)[spec["dtype"]]
    shape = dims_of(spec["shape"], dims)
    init = spec.get("init", {"dist": "normal", "mean": 0.0, "std": 1.0})
    dist = init.get("dist", "normal")
    if dist == "normal":
        t = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
        t = t * float(init.get("std", 1.0)) + float(init.get("mean", 0.0))
    elif dist == "uniform":
        lo, hi = float(init.get("low", 0.0)), float(init.get("high", 1.0))
        t = torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * (hi - lo) + lo
    elif dist == "randint":
        t = torch.randint(int(init["low"]), int(init["high"]), shape, generator=gen,
                          device=device, dtype=torch.int64)
    else:
        raise ValueError("unknown dist " + dist)
    special = init.get("special")
    if special:
        frac = float(init.get("special_fraction", 0.001))
        mask = torch.rand(shape, generator=gen, device=device) < frac
        pick = torch.randint(0, len(special), shape, generator=gen, device=device)
        vals = torch.tensor(special, device=device, dtype=t.dtype)[pick]
        t = torch.where(mask, vals, t)
    return t.to(dt).contiguous()


GUARD = 64  # elements of guard before and after each output


def alloc_output(torch, spec, dims, device):
    dt = torch_dtypes(torch)[spec["dtype"]]
    shape = dims_of(spec["shape"], dims)
    n = math.prod(shape)
    buf = torch.empty(n + 2 * GUARD, dtype=dt, device=device)
    # guards hold a recognizable value, the output itself is poisoned (NaN or a sentinel)
    if dt.is_floating_point:
        buf.fill_(-7777.25)
        poison = float("nan")
    elif dt == torch.bool:
        buf.fill_(False)
        poison = True
    else:
        buf.fill_(99)
        poison = -123456789 if dt in (torch.int32, torch.int64) else 77
    guard_val = buf[:GUARD].clone()
    view = buf[GUARD:GUARD + n]
    view.fill_(poison)
    return buf, view.view(shape), guard_val


def guards_intact(torch, buf, guard_val):
    return bool(torch.equal(buf[:GUARD], guard_val) and torch.equal(buf[-GUARD:], guard_val))


def compare(torch, cand, ref, tol):
    """returns (ok, info)"""
    info = {}
    c = cand.double() if cand.dtype != torch.bool else cand.to(torch.float64)
    r = ref.double() if ref.dtype != torch.bool else ref.to(torch.float64)
    if cand.dtype.is_floating_point:
        nonfinite = int((~torch.isfinite(c)).sum().item())
        info["nonfinite"] = nonfinite
        if nonfinite:
            return False, info
    diff = (c - r).abs()
    bound = float(tol.get("atol", 0.0)) + float(tol.get("rtol", 0.0)) * r.abs()
    bad = int((diff > bound).sum().item())
    n = c.numel()
    info["max_abs_err"] = float(diff.max().item()) if n else 0.0
    info["max_rel_err"] = float((diff / r.abs().clamp_min(1e-30)).max().item()) if n else 0.0
    info["bad_fraction"] = bad / max(1, n)
    ok = info["bad_fraction"] <= float(tol.get("bad_budget", 0.0))
    if ok and n and bool((c == 0).all().item()) and not bool((r == 0).all().item()):
        info["all_zero"] = True
        ok = False
    return ok, info


def oracle(torch, name, ins, dims):
    """Independent formula for the reference itself (None: no oracle for this task)."""
    F = torch.nn.functional
    d = lambda t: t.double()
    if name == "gelu":
        return [F.gelu(d(ins[0]))]
    if name == "rowsum":
        return [d(ins[0]).sum(1)]
    if name == "softmax":
        return [torch.softmax(d(ins[0]), 1)]
    if name == "rmsnorm":
        x = d(ins[0])
        return [x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6) * d(ins[1])]
    if name == "transpose":
        return [ins[0].t().contiguous()]
    if name == "sgemm":
        return [d(ins[0]) @ d(ins[1])]
    if name == "bf16_gemm":
        return [(d(ins[0]) @ d(ins[1])).to(torch.bfloat16)]
    if name == "gemm_bias_gelu":
        return [F.gelu(d(ins[0]) @ d(ins[1]) + d(ins[2]))]
    if name == "stencil2d":
        x = F.pad(d(ins[0]), (1, 1, 1, 1))
        c = x[1:-1, 1:-1]
        return [0.5 * c + 0.125 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])]
    if name == "scan":
        return [torch.cumsum(ins[0].long(), 0).to(torch.int32)]
    return None


class Worker:
    def __init__(self, name, task, args):
        import torch
        self.torch = torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.name, self.task, self.args = name, task, args
        self.dev = torch.device("cuda")
        self.stream = torch.cuda.Stream()
        props = torch.cuda.get_device_properties(0)
        self.l2 = int(getattr(props, "L2_cache_size", 50 * 1024 * 1024))
        self.flush = torch.empty(max(2 * self.l2, 128 * 1024 * 1024) // 4, dtype=torch.float32,
                                 device=self.dev)
        self.nvml = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = (pynvml, pynvml.nvmlDeviceGetHandleByIndex(
                torch.cuda.current_device() if "CUDA_VISIBLE_DEVICES" not in os.environ else 0))
        except Exception:  # noqa: BLE001 - clocks are optional
            self.nvml = None
        self.in_dt = [s["dtype"] for s in task["inputs"]]
        self.out_dt = [s["dtype"] for s in task["outputs"]]
        self.shapes = [("seen", s) for s in task["shapes"]["seen"]] + \
                      [("held_out", s) for s in task["shapes"]["held_out"]]
        self.tol = task["tolerance"]
        self.ref = None
        self.ref_times = {}

    def clocks(self):
        if self.nvml is None:
            return None, None
        p, h = self.nvml
        try:
            return (p.nvmlDeviceGetClockInfo(h, p.NVML_CLOCK_SM),
                    p.nvmlDeviceGetClockInfo(h, p.NVML_CLOCK_MEM))
        except Exception:  # noqa: BLE001
            return None, None

    def inputs(self, dims, seed):
        g = self.torch.Generator(device=self.dev)
        g.manual_seed(seed)
        return [gen_input(self.torch, s, dims, g, self.dev) for s in self.task["inputs"]]

    def call(self, fn, ins, outs):
        torch = self.torch
        a_in = make_abi(ins, self.in_dt)
        a_out = make_abi(outs, self.out_dt)
        with torch.cuda.stream(self.stream):
            rc = fn(a_in, len(ins), a_out, len(outs), ctypes.c_void_p(self.stream.cuda_stream))
        self.stream.synchronize()
        return rc

    def run_outputs(self, fn, ins, dims):
        allocs = [alloc_output(self.torch, s, dims, self.dev) for s in self.task["outputs"]]
        self.torch.cuda.synchronize()
        rc = self.call(fn, ins, [a[1] for a in allocs])
        return rc, allocs

    def check(self, fn, is_ref=False):
        """Correctness on every shape and two seeds. Returns (status, details)."""
        torch = self.torch
        details = []
        status = "ok"
        for si, (kind, dims) in enumerate(self.shapes):
            for seed in (1000 + si, 2000 + si):
                ins = self.inputs(dims, seed)
                keep = [t.clone() for t in ins]
                rc, outs = self.run_outputs(fn, ins, dims)
                rec = {"set": kind, "dims": dims, "seed": seed, "rc": rc}
                if rc != 0:
                    rec["error"] = "non-zero return %d" % rc
                    details.append(rec)
                    return "crash", details
                if not all(torch.equal(a, b) for a, b in zip(ins, keep)):
                    rec["error"] = "inputs modified"
                    details.append(rec)
                    return "incorrect", details
                if not all(guards_intact(torch, b, g) for b, _, g in outs):
                    rec["error"] = "write outside the output buffer"
                    details.append(rec)
                    return "incorrect", details
                rc2, outs2 = self.run_outputs(fn, ins, dims)
                if is_ref:
                    orc = oracle(torch, self.name, ins, dims)
                    refs = orc
                else:
                    rcr, refo = self.run_outputs(self.ref, ins, dims)
                    refs = [o[1] for o in refo]
                if refs is None:
                    rec["oracle"] = "none"
                    details.append(rec)
                    continue
                for k, (o, r) in enumerate(zip(outs, refs)):
                    ok, info = compare(torch, o[1], r.to(o[1].device), self.tol)
                    rec["out%d" % k] = info
                    if not ok:
                        rec["error"] = "output %d outside tolerance" % k
                        details.append(rec)
                        return "incorrect", details
                same = all(torch.equal(a[1], b[1]) if not a[1].dtype.is_floating_point else
                           torch.equal(a[1].nan_to_num(), b[1].nan_to_num())
                           for a, b in zip(outs, outs2))
                rec["bitwise_repeatable"] = bool(same) and rc2 == 0
                if not same:
                    for k, (o, r) in enumerate(zip(outs2, refs)):
                        ok, info = compare(torch, o[1], r.to(o[1].device), self.tol)
                        if not ok:
                            rec["error"] = "second run differs and is outside tolerance"
                            details.append(rec)
                            return "nondeterministic", details
                details.append(rec)
        return status, details

    def time(self, fn, dims):
        torch = self.torch
        sets = [self.inputs(dims, 7000 + k) for k in range(1)]
        nbytes = sum(t.numel() * t.element_size() for t in sets[0])
        nsets = 3 if nbytes * 3 < 3 * 1024 ** 3 else 1
        sets += [self.inputs(dims, 7001 + k) for k in range(nsets - 1)]
        outs = [alloc_output(torch, s, dims, self.dev)[1] for s in self.task["outputs"]]
        abis = [(make_abi(s, self.in_dt), len(s)) for s in sets]
        a_out = make_abi(outs, self.out_dt)
        sp = ctypes.c_void_p(self.stream.cuda_stream)
        torch.cuda.synchronize()
        # warm-up: at least 3 calls and about 25 ms
        t0 = time.time()
        k = 0
        while k < 3 or time.time() - t0 < 0.025:
            a, n = abis[k % len(abis)]
            if fn(a, n, a_out, len(outs), sp) != 0:
                return None
            self.stream.synchronize()
            k += 1
        est = (time.time() - t0) / k
        reps = int(min(100, max(10, 0.2 / max(est, 1e-6))))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        with torch.cuda.stream(self.stream):
            for i in range(reps):
                self.flush.zero_()
                a, n = abis[i % len(abis)]
                starts[i].record(self.stream)
                fn(a, n, a_out, len(outs), sp)
                ends[i].record(self.stream)
        torch.cuda.synchronize()
        sm, mem = self.clocks()
        ts = sorted(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends))
        q = lambda p: ts[min(len(ts) - 1, int(p * (len(ts) - 1) + 0.5))]
        return {"median_us": q(0.5), "iqr_us": q(0.75) - q(0.25), "reps": reps,
                "sm_clock_mhz": sm, "mem_clock_mhz": mem}

    def cpu_crosscheck(self, cpu_so):
        torch = self.torch
        kind, dims = min(self.shapes, key=lambda s: math.prod(
            math.prod(dims_of(i["shape"], s[1])) for i in self.task["inputs"]))
        ins = self.inputs(dims, 4242)
        _, outs = self.run_outputs(self.ref, ins, dims)
        lib, fn = load_kernel(cpu_so)
        cins = [t.cpu() for t in ins]
        couts = [torch.empty(dims_of(s["shape"], dims), dtype=torch_dtypes(torch)[s["dtype"]])
                 for s in self.task["outputs"]]
        t0 = time.time()
        rc = fn(make_abi(cins, self.in_dt), len(cins), make_abi(couts, self.out_dt), len(couts),
                None)
        res = {"dims": dims, "rc": rc, "cpu_s": round(time.time() - t0, 3)}
        if rc != 0:
            res["status"] = "crash"
            return res
        ok = True
        for k, (c, o) in enumerate(zip(couts, outs)):
            good, info = compare(torch, c, o[1].cpu(), self.tol)
            res["out%d" % k] = info
            ok = ok and good
        res["status"] = "ok" if ok else "incorrect"
        return res


def worker_main(args):
    name = args.worker
    d = os.path.join(args.tasks, name)
    with open(os.path.join(d, "task.json")) as f:
        task = json.load(f)
    plan = json.loads(args.plan)  # {"ref": so, "cpu": so|None, "variants": [[id, so], ...]}
    out = open(args.results, "a")

    def emit(rec):
        out.write(json.dumps(rec) + "\n")
        out.flush()

    w = Worker(name, task, args)
    _, w.ref = load_kernel(plan["ref"])
    emit({"start": "reference"})
    st, det = w.check(w.ref, is_ref=True)
    ref_rec = {"task": name, "id": "reference", "status": st, "checks": det, "times": []}
    for kind, dims in w.shapes:
        t = w.time(w.ref, dims)
        w.ref_times[json.dumps(dims, sort_keys=True)] = t
        ref_rec["times"].append({"set": kind, "dims": dims, **(t or {})})
    if plan.get("cpu"):
        try:
            ref_rec["cpu_crosscheck"] = w.cpu_crosscheck(plan["cpu"])
        except Exception as e:  # noqa: BLE001
            ref_rec["cpu_crosscheck"] = {"status": "error", "error": repr(e)}
    if plan.get("emit_ref", True):
        emit(ref_rec)
    for vid, so in plan["variants"]:
        emit({"start": vid})
        rec = {"task": name, "id": vid}
        try:
            _, fn = load_kernel(so)
            st, det = w.check(fn)
            rec["status"], rec["checks"] = st, det
            rec["times"] = []
            if st in ("ok", "incorrect", "nondeterministic"):
                for kind, dims in w.shapes:
                    t = w.time(fn, dims)
                    r = w.ref_times.get(json.dumps(dims, sort_keys=True))
                    e = {"set": kind, "dims": dims, **(t or {})}
                    if t and r:
                        e["ref_median_us"] = r["median_us"]
                        e["speedup"] = r["median_us"] / t["median_us"]
                    rec["times"].append(e)
        except Exception as e:  # noqa: BLE001 - a sticky CUDA error ends this worker
            rec["status"] = "crash"
            rec["error"] = repr(e)[:2000]
            emit(rec)
            out.close()
            os._exit(3)
        emit(rec)
    out.close()


# ----------------------------------------------------------------------------- parent


def summarize(rec):
    times = [t for t in rec.get("times", []) if t.get("median_us")]
    sp = [t["speedup"] for t in times if t.get("speedup")]
    s = {"status": rec["status"]}
    if times:
        prim = times[0]
        s["shape"] = prim["dims"]
        s["median_us"] = round(prim["median_us"], 2)
        s["iqr_us"] = round(prim.get("iqr_us", 0.0), 2)
        s["reps"] = prim.get("reps")
        if prim.get("speedup"):
            s["speedup"] = round(prim["speedup"], 3)
        if sp:
            s["speedup_geomean_all_shapes"] = round(math.exp(sum(map(math.log, sp)) / len(sp)), 3)
        sms = [t["sm_clock_mhz"] for t in times if t.get("sm_clock_mhz")]
        mems = [t["mem_clock_mhz"] for t in times if t.get("mem_clock_mhz")]
        if sms:
            s["sm_clock_mhz"] = sorted(sms)[len(sms) // 2]
        if mems:
            s["mem_clock_mhz"] = sorted(mems)[len(mems) // 2]
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default=os.path.join(ROOT, "configs", "tasks"))
    ap.add_argument("--sdk", default=os.path.join(ROOT, "sdk", "include"))
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/check_lineages"))
    ap.add_argument("--build", default="/tmp/check_lineages_build")
    ap.add_argument("--only", default="")
    ap.add_argument("--worker", default="")
    ap.add_argument("--plan", default="")
    ap.add_argument("--results", default="")
    ap.add_argument("--task-timeout", type=int, default=300)
    args = ap.parse_args()
    if args.worker:
        worker_main(args)
        return
    only = set(x for x in args.only.split(",") if x)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.build, exist_ok=True)
    tasks = discover(args.tasks, only)
    device = "unknown"
    try:
        device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,"
                                 "clocks.max.mem", "--format=csv,noheader"], capture_output=True,
                                text=True, timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    print("device:", device, flush=True)

    jobs = []
    for name, d, task, lineage in tasks:
        bd = os.path.join(args.build, name)
        os.makedirs(bd, exist_ok=True)
        src = os.path.join(d, task["references"]["cuda"])
        jobs.append({"task": name, "id": "reference", "src": src,
                     "so": os.path.join(bd, "reference.so"),
                     "cmd": nvcc_cmd(src, os.path.join(bd, "reference.so"), args.sdk)})
        if "cpu" in task["references"]:
            src = os.path.join(d, task["references"]["cpu"])
            jobs.append({"task": name, "id": "reference_cpu", "src": src,
                         "so": os.path.join(bd, "reference_cpu.so"),
                         "cmd": gxx_cmd(src, os.path.join(bd, "reference_cpu.so"), args.sdk)})
        for v in lineage["variants"]:
            src = os.path.join(d, v["file"])
            so = os.path.join(bd, v["id"] + ".so")
            jobs.append({"task": name, "id": v["id"], "src": src, "so": so,
                         "cmd": nvcc_cmd(src, so, args.sdk)})
    t0 = time.time()
    with cf.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as ex:
        compiled = list(ex.map(compile_one, jobs))
    print("compiled %d sources in %.1f s" % (len(compiled), time.time() - t0), flush=True)
    comp = {(c["task"], c["id"]): c for c in compiled}

    results = {"device": device, "tool": "check_lineages.py", "tasks": {}}
    for name, d, task, lineage in tasks:
        tres = {"variants": {}}
        results["tasks"][name] = tres
        ref = comp[(name, "reference")]
        if ref["rc"] != 0:
            tres["error"] = "reference does not compile: " + ref["log"]
            print(name, "REFERENCE DOES NOT COMPILE", ref["log"][-800:], flush=True)
            continue
        cpu = comp.get((name, "reference_cpu"))
        pending = []
        for v in lineage["variants"]:
            c = comp[(name, v["id"])]
            if c["rc"] != 0:
                tres["variants"][v["id"]] = {"task": name, "id": v["id"],
                                             "status": "compile_error",
                                             "compile_log": c["log"][-1500:]}
            else:
                pending.append([v["id"], c["so"]])
        resf = os.path.join(args.build, name + ".results.jsonl")
        first = True
        while True:
            if os.path.exists(resf):
                os.remove(resf)
            plan = {"ref": ref["so"], "cpu": cpu["so"] if cpu and cpu["rc"] == 0 else None,
                    "variants": pending, "emit_ref": first}
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--tasks",
                   args.tasks, "--plan", json.dumps(plan), "--results", resf]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True,
                                   timeout=args.task_timeout)
                rc, err = p.returncode, p.stderr[-3000:]
            except subprocess.TimeoutExpired:
                rc, err = "timeout", "worker timed out"
            started, done = None, set()
            if os.path.exists(resf):
                for line in open(resf):
                    r = json.loads(line)
                    if "start" in r:
                        started = r["start"]
                        continue
                    done.add(r["id"])
                    if r["id"] == "reference":
                        tres["reference"] = r
                    else:
                        tres["variants"][r["id"]] = r
            first = False
            if rc == 0:
                break
            if started is None or (started == "reference" and "reference" not in done):
                tres["error"] = "worker failed before the reference finished: %s %s" % (rc, err)
                print(name, "WORKER FAILED", rc, err[-1500:], flush=True)
                break
            if started not in done:
                tres["variants"][started] = {"task": name, "id": started,
                                             "status": "timeout" if rc == "timeout" else "crash",
                                             "error": err[-1500:]}
                done.add(started)
            pending = [p for p in pending if p[0] not in done]
            if not pending:
                break
        # one line per variant
        ref_rec = tres.get("reference", {})
        rs = summarize(ref_rec) if ref_rec else {}
        tres["reference_summary"] = rs
        cc = ref_rec.get("cpu_crosscheck", {})
        print("\n== %s: reference %s (oracle check), %.1f us, cpu cross-check %s" % (
            name, ref_rec.get("status"), rs.get("median_us", float("nan")),
            cc.get("status")), flush=True)
        for v in lineage["variants"]:
            r = tres["variants"].get(v["id"], {"status": "missing"})
            s = summarize(r)
            r["summary"] = s
            print("  %-4s %-34s expected %-14s measured %-16s %9s us  x%-7s (all shapes x%s)" % (
                v["id"], os.path.basename(v["file"]), v.get("expected"), s["status"],
                s.get("median_us", "-"), s.get("speedup", "-"),
                s.get("speedup_geomean_all_shapes", "-")), flush=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
    print("\nwrote", os.path.join(args.out, "results.json"))


if __name__ == "__main__":
    main()
