#!/usr/bin/python3
"""The verifier's side of a KernelBench candidate (language "kernelbench"): the golden data of
one job, generated, kept and compared on the device (docs/backends.md, "KernelBench candidates
(ModelNew)").

The verifier (daemon/eval/kernelbench/kb_candidate.cc) starts this script as its child, outside
the runner's sandbox, with a connected Unix socket as fd N:

  kb_golden.py --fd N

Requests and answers are frames as between the verifier and kb_runner.py (4-byte big-endian
length, JSON body; a memfd beside a frame with SCM_RIGHTS). Nothing of the golden data is written
to a file: per seed, the problem's own get_inputs() under torch.manual_seed(seed) runs here, on
the device, the reference Model (built once under torch.manual_seed(0), TF32 off) computes the
outputs there, and the candidate's outputs (the runner's memfd, forwarded by the verifier) are
uploaded and compared there, a chunk at a time. The candidate's process never holds a handle on
this one's memory.

  {"op": "kb_load", "problem_path", "device", "threads"}
      Imports PyTorch and the problem, builds Model. Answer: {"ok": true, "free_bytes",
      "total_bytes", "memory": "what they measure"}: the device's memory (CUDA:
      torch.cuda.mem_get_info) or, on the CPU, the host's available memory within this
      process's memory cgroup and address-space limit.
  {"op": "kb_check", "seed", "outputs": [{dtype, shape, nbytes}], "offset", "atol", "rtol",
   "bad_budget", "where", "chunk_bytes", ["inputs_before", "inputs_after"]} + the runner's
   memfds (its payload, chunk_bytes each)
      The golden case of `seed`: the runner's input digests (kb_runner.digest) against this
      process's inputs of the same seed (before the call: the same get_inputs(); after it:
      unchanged), then the candidate's outputs (at `offset` in the payload) against the reference
      outputs: count, dtype, shape, NaN/Inf where the reference has none, all zeros where the
      reference is not, elements outside atol + rtol * |expected| (at least 1e-2 for 16-bit
      outputs) beyond bad_budget of them. Answer {"ok": true, "why": "" | reason, "stage":
      "inputs" | "outputs"}; a reason starting "infra: " is not the candidate's doing.

Errors of this process (the problem fails, the device is out of memory) answer {"ok": false,
"class": "InfraError", "message"}.
"""
import os
import resource
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb_runner  # noqa: E402 - framing and the input digest, shared with the runner

torch = None
helper = None
CHUNK = 1 << 24  # elements compared at a time (bounds the temporaries on the device)


class GoldenError(Exception):
    pass


def host_memory():
    """(available, total) bytes for this process on the host: MemAvailable/MemTotal, within its
    memory cgroup (v2 memory.max, v1 limit_in_bytes) and its address-space limit."""
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            info[k] = int(v.split()[0]) * 1024
    total = info.get("MemTotal", 0)
    avail = info.get("MemAvailable", info.get("MemFree", 0))
    what = "host memory (MemAvailable)"
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                parts = line.strip().split(":", 2)
                if len(parts) != 3:
                    continue
                if parts[0] == "0" and parts[1] == "":
                    base = "/sys/fs/cgroup" + parts[2]
                    files = ("memory.max", "memory.current")
                elif "memory" in parts[1].split(","):
                    base = "/sys/fs/cgroup/memory" + parts[2]
                    files = ("memory.limit_in_bytes", "memory.usage_in_bytes")
                else:
                    continue
                try:
                    with open(os.path.join(base, files[0])) as g:
                        lim = g.read().strip()
                    with open(os.path.join(base, files[1])) as g:
                        used = int(g.read().strip())
                except OSError:
                    continue
                if lim.isdigit() and int(lim) < total:
                    total = int(lim)
                    if total - used < avail:
                        avail = max(0, total - used)
                        what = "the memory cgroup's limit"
    except OSError:
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        vm = 0
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    vm = int(line.split()[1]) * 1024
        if soft - vm < avail:
            avail = max(0, soft - vm)
            what = "the address-space limit (RLIMIT_AS)"
        total = min(total, soft)
    return avail, total, what


def read_tensor(fds, chunk, offset, dtype, shape, nbytes):
    """A tensor of the runner's payload at `offset` (memfds of `chunk` bytes each), on the host."""
    buf = torch.empty(nbytes, dtype=torch.uint8)
    view = memoryview(buf.numpy())
    got = 0
    while got < nbytes:
        k, at = divmod(offset + got, chunk)
        if k >= len(fds):
            raise GoldenError("the runner's outputs are shorter than they say")
        n = os.preadv(fds[k], [view[got:got + min(nbytes - got, chunk - at)]], at)
        if n <= 0:
            raise GoldenError("the runner's outputs are shorter than they say")
        got += n
    return buf.view(dtype).reshape(shape)


def fmt(x):
    return "%.6g" % x


def shape_text(s):
    return "[" + ", ".join(str(int(d)) for d in s) + "]"


def compare(c, r, name, atol, rtol, budget, where):
    """"" when the candidate's `c` matches the golden `r` (same dtype and shape, on the device)."""
    if r.dtype in (torch.float16, torch.bfloat16):
        atol, rtol = max(atol, 1e-2), max(rtol, 1e-2)
    cf, rf = c.reshape(-1), r.reshape(-1)
    n = rf.numel()
    all_zero, ref_nonzero = True, False
    bad, first_bad = 0, -1
    for b0 in range(0, n, CHUNK):
        cc = cf[b0:b0 + CHUNK].double()
        rr = rf[b0:b0 + CHUNK].double()
        if all_zero and bool(cc.ne(0).any()):
            all_zero = False
        if not ref_nonzero and bool(rr.ne(0).any()):
            ref_nonzero = True
        finite = torch.isfinite(cc)
        if not bool(finite.all()):
            same = (torch.isnan(cc) & torch.isnan(rr)) | (torch.isinf(cc) & cc.eq(rr))
            wrong = (~finite) & (~same)
            if bool(wrong.any()):
                i = int(wrong.nonzero()[0, 0])
                return "output '%s' has %s at element %d where the reference has %s%s" % (
                    name, "NaN" if bool(torch.isnan(cc[i])) else "Inf", b0 + i,
                    fmt(float(rr[i])), where)
        out = finite & (~torch.isfinite(rr) | ((cc - rr).abs() > atol + rtol * rr.abs()))
        k = int(out.sum())
        if k:
            if first_bad < 0:
                first_bad = b0 + int(out.nonzero()[0, 0])
            bad += k
    if all_zero and ref_nonzero:
        return "output '%s' is all zeros where the reference is not%s" % (name, where)
    if bad > budget * n:
        return ("%d of %d elements of '%s' outside tolerance (rtol %s, atol %s); first at element "
                "%d: got %s, expected %s%s" % (
                    bad, n, name, fmt(rtol), fmt(atol), first_bad, fmt(float(cf[first_bad])),
                    fmt(float(rf[first_bad])), where))
    return ""


class Golden:
    def __init__(self):
        self.mod = None
        self.model = None
        self.device = "cpu"

    def load(self, r):
        global torch, helper
        import torch as _torch
        torch = _torch
        import kb_helper
        helper = kb_helper
        self.device = r.get("device", "cpu")
        try:
            helper.cuda_check(self.device)
            torch.set_num_threads(int(r.get("threads") or max(1, min(4, os.cpu_count() or 1))))
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            self.mod = helper.load_problem(r["problem_path"])
            self.model = helper.build(self.mod, self.device)
        except helper.ProblemError as e:
            raise GoldenError("kernelbench: %s" % e)
        if self.device.startswith("cuda"):
            free, total = torch.cuda.mem_get_info()
            what = "device memory of %s (%s)" % (self.device, torch.cuda.get_device_name())
        else:
            free, total, what = host_memory()
        return {"ok": True, "free_bytes": int(free), "total_bytes": int(total), "memory": what}

    def check(self, r, fds):
        seed = int(r["seed"])
        chunk = int(r.get("chunk_bytes") or (1 << 62))
        where = r.get("where", "")
        try:
            xs = helper.make_inputs(self.mod, seed, self.device)
        except helper.ProblemError as e:
            raise GoldenError("kernelbench: %s" % e)
        if "inputs_before" in r:
            names = helper.input_names(self.mod, len(xs))
            before, after = r.get("inputs_before") or [], r.get("inputs_after") or []
            if len(before) != len(xs) or len(after) != len(xs):
                return {"ok": True, "stage": "inputs", "why": "the runner reports %d inputs; the "
                        "task has %d" % (len(before), len(xs))}
            for i, x in enumerate(xs):
                want = kb_runner.digest(x)
                if before[i] != want:
                    return {"ok": True, "stage": "inputs", "why": (
                        "infra: the runner's get_inputs() made a different input '%s' than the "
                        "verifier's for the same seed (another PyTorch version?)%s" % (
                            names[i], where))}
                if after[i] != before[i]:
                    return {"ok": True, "stage": "inputs", "why": (
                        "ModelNew.forward modified its input '%s' (inputs are read-only)%s" % (
                            names[i], where))}
        try:
            with torch.no_grad():
                ys = helper.as_outputs(helper.call("Model.forward", self.model, *xs))
        except helper.ProblemError as e:
            raise GoldenError("kernelbench: %s" % e)
        del xs
        meta = r.get("outputs")
        if not isinstance(meta, list):
            return {"ok": True, "stage": "outputs", "why": "the runner's answer has no outputs"}
        if len(meta) != len(ys):
            return {"ok": True, "stage": "outputs", "why": (
                "ModelNew.forward returned %d output(s); the reference returns %d%s" % (
                    len(meta), len(ys), where))}
        names = ["out"] if len(ys) == 1 else ["out%d" % i for i in range(len(ys))]
        by_name = {v: k for k, v in helper.DTYPES.items()}
        offset = int(r.get("offset", 0))
        for i, (m, y) in enumerate(zip(meta, ys)):
            dt = by_name.get(m.get("dtype"))
            shape = [int(d) for d in m.get("shape", [])]
            want_dt = helper.DTYPES.get(y.dtype, str(y.dtype))
            if dt is None:
                return {"ok": True, "stage": "outputs", "why": "bad dtype from the runner"}
            if dt != y.dtype:
                return {"ok": True, "stage": "outputs", "why": (
                    "output %d has dtype %s where the reference has %s%s" % (
                        i, m.get("dtype"), want_dt, where))}
            if shape != helper.shape_of(y):
                return {"ok": True, "stage": "outputs", "why": (
                    "output %d has shape %s where the reference has %s%s" % (
                        i, shape_text(shape), shape_text(helper.shape_of(y)), where))}
            nbytes = y.numel() * y.element_size()
            if int(m.get("nbytes", -1)) != nbytes:
                return {"ok": True, "stage": "outputs",
                        "why": "malformed output description from the runner"}
            if not fds:
                return {"ok": True, "stage": "outputs", "why": "no outputs from the runner"}
            c = read_tensor(fds, chunk, offset, dt, shape, nbytes).to(self.device)
            offset += nbytes
            why = compare(c, y.reshape(shape), names[i], float(r.get("atol", 1e-4)),
                          float(r.get("rtol", 1e-4)), float(r.get("bad_budget", 0)), where)
            del c
            if why:
                return {"ok": True, "stage": "outputs", "why": why}
        return {"ok": True, "stage": "outputs", "why": "", "end": offset}

    def handle(self, r, fds):
        op = r.get("op", "")
        if op == "kb_load":
            return self.load(r)
        if self.model is None:
            raise GoldenError("no problem loaded")
        if op == "kb_check":
            try:
                return self.check(r, fds)
            finally:
                # The device memory of this case back to the device: the runner's calls come next.
                if self.device.startswith("cuda"):
                    torch.cuda.empty_cache()
        raise GoldenError("unknown request %s" % op)


def recv_frame_fds(sock):
    """A frame and the descriptors that came with its first bytes."""
    import array
    import struct
    fds = array.array("i")
    msg, anc, _, _ = sock.recvmsg(4, socket.CMSG_SPACE(kb_runner.MAX_FDS * fds.itemsize))
    if not msg:
        return None, []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - (len(data) % fds.itemsize)])
    head = msg + (kb_runner.recv_exact(sock, 4 - len(msg)) or b"") if len(msg) < 4 else msg
    if len(head) < 4:
        return None, list(fds)
    (n,) = struct.unpack(">I", head)
    body = kb_runner.recv_exact(sock, n)
    if body is None:
        return None, list(fds)
    import json
    return json.loads(body.decode()), list(fds)


def main():
    if "--fd" not in sys.argv:
        sys.stderr.write("usage: kb_golden.py --fd N\n")
        sys.exit(2)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM,
                         fileno=int(sys.argv[sys.argv.index("--fd") + 1]))
    g = Golden()
    while True:
        req, fds = recv_frame_fds(sock)
        if req is None:
            return
        try:
            reply = g.handle(req, fds)
        except (GoldenError, RuntimeError, MemoryError, OSError) as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            if "out of memory" in msg.lower() or isinstance(e, MemoryError):
                msg = "out of memory while computing the golden data on %s: %s" % (g.device, msg)
            reply = {"ok": False, "class": "InfraError", "message": msg}
        finally:
            for f in fds:
                os.close(f)
        kb_runner.send_frame(sock, reply)
        if not reply.get("ok"):
            return


if __name__ == "__main__":
    main()
