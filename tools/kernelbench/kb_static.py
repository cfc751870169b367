#!/usr/bin/python3
"""Static checks of a KernelBench candidate (a Python file defining `class ModelNew`) before it
runs: the shortcuts that pass a correctness check without a custom kernel, read from the source
with Python's `ast` (docs/backends.md, "KernelBench tasks", "Static checks of ModelNew files").

  kb_static.py CANDIDATE.py [--problem PROBLEM.py] [--task task.json] [--json]
      Exit status 0: accepted (warnings may be printed); 1: rejected, one reason a line
      ("kb_static: line N: [check] why"); 2: usage or unreadable files.
  kb_static.py CANDIDATE.py --runtime-ops OPS.json [--task task.json] [--json]
      The same policy applied to what ModelNew.forward actually called: OPS.json is a list of
      [module, name, via] of the PyTorch functions one forward used (kb_runner.py records
      them under a TorchFunctionMode; via = "layer" inside a torch.nn layer, else
      "candidate"). Calls inside layers fall under "layers", the candidate's own
      torch.nn.functional calls under "functional" and its compute operators (TORCH_COMPUTE,
      METHOD_COMPUTE) under "torch_ops": a forward that runs the
      reference's operators where the task forbids them is rejected even when the source hides
      them from the static checks.

As a module: check(candidate_source, problem_source="", policy=None) -> Report.

Always errors (no task can allow them):
  syntax        the file does not parse, or defines no ModelNew with its own forward
  fallback      an except branch that does anything but raise (the reference's ops in a
                handler are the usual way to pass when the custom kernel fails)
  inheritance   ModelNew calls Model / super().forward / Model.forward, imports Model, derives
                from Model without a forward of its own, or its forward is empty (`pass`, `...`);
                deriving from Model with its own forward is a warning
  caching       state kept across calls: `global`, module-level containers written by the
                forward pass, outputs stored on self or returned from self, functools caches
  threads       threading, multiprocessing, concurrent.futures, os.fork
  patching      assigning to attributes of torch, time or triton (timers, the reference's ops),
                torch.Tensor subclasses, _make_subclass (torch.backends settings: a warning)
  dynamic       exec, eval, compile, __import__, importlib, getattr on a module: code the
                checks cannot read
Per-task policy (task.json "kernelbench_policy"; each "forbid", "warn" or "allow"):
  functional    torch.nn.functional calls (however imported: F.relu), anywhere in the file.
                Default "warn".
  layers        torch.nn layers other than containers (Module, ModuleList, ModuleDict,
                Sequential), Parameter and init: nn.Conv2d(...) kept from the reference.
                Default "warn".
  torch_ops     PyTorch compute operators (matmul, conv, activations, norms, reductions,
                losses; as torch.X(...), as tensor methods, or `@`) outside ModelNew.__init__.
                Default "warn".
  streams       custom CUDA source or Python code that creates or selects another CUDA stream,
                or waits across streams (the timing counts every stream either way).
                Default "warn".
  precision     half precision inside the candidate (.half(), .to(torch.float16),
                __float2half, ...). Default "warn".
  require_kernel  true: the file must define a custom kernel (CUDA source with __global__
                compiled through load_inline, cpp_extension or htam.load_cuda, or a
                @triton.jit / @triton.autotune function). Default true.
The defaults accept what KernelBench's own checker (kernel_static_checker.py) accepts and warn
where it warns; the always-errors above are the ways to be judged correct without a kernel doing
the work that its patterns let through (tests/kernelbench/kb_parity_test.py).
"""
import argparse
import ast
import json
import re
import sys

DEFAULT_POLICY = {"functional": "warn", "layers": "warn", "torch_ops": "warn", "streams": "warn",
                  "precision": "warn", "require_kernel": True}
LEVELS = ("forbid", "warn", "allow")

NN_ALLOWED = {"Module", "ModuleList", "ModuleDict", "Sequential", "Parameter", "ParameterList",
              "ParameterDict", "init", "parameter"}
TORCH_COMPUTE = {
    "mm", "bmm", "matmul", "einsum", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot",
    "tensordot", "linear", "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "convolution", "avg_pool1d", "avg_pool2d",
    "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d", "adaptive_avg_pool1d",
    "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_max_pool3d", "relu", "relu_", "relu6", "hardtanh", "elu", "selu", "celu",
    "leaky_relu", "gelu", "softsign", "softplus", "softmax", "log_softmax", "tanh", "sigmoid",
    "hardsigmoid", "hardswish", "silu", "mish", "prelu", "rrelu", "threshold", "batch_norm",
    "group_norm", "layer_norm", "instance_norm", "rms_norm", "normalize", "norm", "cross_entropy",
    "nll_loss", "kl_div", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "triplet_margin_loss", "cosine_similarity", "hinge_embedding_loss", "margin_ranking_loss",
    "logsumexp", "clamp", "clip", "dropout", "cumsum", "cumprod", "sum", "mean", "prod", "amax",
    "amin", "max", "min", "argmax", "argmin", "var", "std", "exp", "log", "scaled_dot_product_attention",
    "lstm", "gru", "rnn_tanh", "rnn_relu", "cdist", "pdist",
}
METHOD_COMPUTE = {"mm", "bmm", "matmul", "relu", "relu_", "softmax", "log_softmax", "sigmoid",
                  "tanh", "logsumexp", "cumsum", "cumprod", "conv2d", "norm", "clamp", "clamp_",
                  "addmm", "baddbmm", "einsum"}
STREAM_PY = {"torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream",
             "torch.cuda.ExternalStream", "torch.cuda.StreamContext", "torch.Stream"}
STREAM_PY_METHODS = {"wait_stream", "record_stream"}
THREAD_MODULES = ("threading", "_thread", "multiprocessing", "concurrent")
DYNAMIC_CALLS = {"exec", "eval", "compile", "__import__", "importlib.import_module",
                 "importlib.__import__", "builtins.exec", "builtins.eval"}
PATCHED_ROOTS = ("torch", "time", "triton", "builtins")
LOGGING_CALLS = {"print", "warnings.warn", "logging.warning", "logging.error", "logging.info",
                 "logging.debug", "logging.exception"}
PRECISION_CUDA = re.compile(r"__float2half(?:_rn)?\s*\(|\(\s*__half\s*\)\s*[\w(]|"
                            r"static_cast\s*<\s*(?:__half|half)\s*>\s*\(|"
                            r"NumericConverter\s*<\s*half_t\s*,\s*float\s*>")
KERNEL_COMPILERS = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load",
                    "htam.load_cuda", "cupy.RawKernel", "cupy.RawModule"}


class Finding:
    def __init__(self, check, line, message):
        self.check, self.line, self.message = check, line, message

    def text(self):
        where = "line %d: " % self.line if self.line else ""
        return "%s[%s] %s" % (where, self.check, self.message)

    def as_dict(self):
        return {"check": self.check, "line": self.line, "message": self.message}


class Report:
    def __init__(self):
        self.errors, self.warnings = [], []

    @property
    def ok(self):
        return not self.errors

    def as_dict(self):
        return {"ok": self.ok, "errors": [e.as_dict() for e in self.errors],
                "warnings": [w.as_dict() for w in self.warnings]}


def policy_from_task(task):
    """The task's "kernelbench_policy" over the defaults; ValueError names a bad field."""
    p = dict(DEFAULT_POLICY)
    given = task.get("kernelbench_policy", {}) if isinstance(task, dict) else {}
    if not isinstance(given, dict):
        raise ValueError("kernelbench_policy: must be an object")
    for k, v in given.items():
        if k not in DEFAULT_POLICY:
            raise ValueError("kernelbench_policy.%s: unknown (%s)" % (k, ", ".join(DEFAULT_POLICY)))
        if k == "require_kernel":
            if not isinstance(v, bool):
                raise ValueError("kernelbench_policy.require_kernel: must be true or false")
        elif v not in LEVELS:
            raise ValueError("kernelbench_policy.%s: '%s' is not forbid, warn or allow" % (k, v))
        p[k] = v
    return p


class Names:
    """Import aliases: resolves `F.relu` to torch.nn.functional.relu, `from torch import mm` to
    torch.mm; names bound at module level (for state kept across calls)."""

    def __init__(self, tree):
        self.alias = {}
        self.module_level = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.alias[(a.asname or a.name).split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.alias[a.asname or a.name] = node.module + "." + a.name
        for node in tree.body:
            for t in _assigned(node):
                if isinstance(t, ast.Name):
                    self.module_level.add(t.id)

    def dotted(self, node):
        """'torch.nn.functional.relu' for F.relu, None where it is not a plain dotted name."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        head = self.alias.get(node.id, node.id)
        return ".".join([head] + parts[::-1])


def _assigned(node):
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def _calls(node):
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)]


def _is_self_attr(node):
    """self.x, self.x[...], self.x.y: state on the module instance."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "self":
            return True
        node = node.value
    return False


def _root_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _names_in(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class Checker:
    def __init__(self, source, problem_source, policy):
        self.src = source
        self.policy = policy
        self.report = Report()
        # Only the reference class itself: helper classes of a level-3 problem may be copied and
        # changed by an honest candidate.
        self.problem_classes = {"Model"}
        self.reference_forward = None
        if problem_source:
            try:
                for n in ast.parse(problem_source).body:
                    if isinstance(n, ast.ClassDef) and n.name == "Model":
                        for m in n.body:
                            if isinstance(m, ast.FunctionDef) and m.name == "forward":
                                self.reference_forward = m
            except SyntaxError:
                pass

    def error(self, check, node, msg):
        self.report.errors.append(Finding(check, getattr(node, "lineno", 0), msg))

    def by_policy(self, key, check, node, msg):
        level = self.policy[key]
        if level == "forbid":
            self.error(check, node, msg)
        elif level == "warn":
            self.report.warnings.append(Finding(check, getattr(node, "lineno", 0), msg))

    def run(self):
        try:
            tree = ast.parse(self.src)
        except SyntaxError as e:
            self.report.errors.append(Finding("syntax", e.lineno or 0, "does not parse: %s" %
                                              e.msg))
            return self.report
        # A test harness under `if __name__ == "__main__":` never runs when the file is imported.
        tree.body = [n for n in tree.body if not _is_main_guard(n)]
        self.tree = tree
        self.names = Names(tree)
        classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        cls = classes.get("ModelNew")
        if cls is None:
            self.error("syntax", None, "defines no class ModelNew")
            return self.report
        self.cls = cls
        self.methods = {n.name: n for n in cls.body
                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.check_inheritance(classes)
        self.check_fallback()
        self.check_caching()
        self.check_streams()
        self.check_threads_patching_dynamic()
        self.check_torch_use()
        self.check_precision()
        if self.policy["require_kernel"]:
            self.check_kernel()
        return self.report

    # -- bypasses --------------------------------------------------------------------------
    def _derives_from_reference(self, cls, classes, seen=()):
        for b in cls.bases:
            name = self.names.dotted(b) or ""
            short = name.split(".")[-1]
            if short in self.problem_classes and short != "ModelNew":
                return short
            if short in classes and short not in seen:
                got = self._derives_from_reference(classes[short], classes, seen + (short,))
                if got:
                    return got
        return None

    def check_inheritance(self, classes):
        base = self._derives_from_reference(self.cls, classes)
        fwd = self.methods.get("forward")
        if base and fwd is not None:
            # Its own forward replaces the reference's; calls back into the reference are
            # errors below. Inheriting the constructor keeps the reference's parameters.
            self.report.warnings.append(Finding(
                "inheritance", self.cls.lineno, "ModelNew derives from the reference class %s "
                "(its constructor and layers are the reference's)" % base))
        if fwd is None:
            self.error("syntax" if not base else "inheritance", self.cls,
                       "ModelNew defines no forward of its own")
        else:
            body = [s for s in fwd.body if not (isinstance(s, ast.Expr) and
                                                isinstance(s.value, ast.Constant))]
            if not body or all(isinstance(s, ast.Pass) for s in body):
                self.error("inheritance", fwd, "ModelNew.forward does nothing (pass)")
            elif self.reference_forward is not None and \
                    ast.dump(ast.Module(body=fwd.body, type_ignores=[])) == \
                    ast.dump(ast.Module(body=self.reference_forward.body, type_ignores=[])):
                self.report.warnings.append(Finding(
                    "inheritance", fwd.lineno, "ModelNew.forward is the reference's forward, "
                    "unchanged"))
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name in self.problem_classes and a.name != "ModelNew":
                        self.error("inheritance", node, "imports the reference class %s" %
                                   a.name)
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = self.names.dotted(f) or ""
            if isinstance(f, ast.Attribute) and f.attr == "forward" and \
                    isinstance(f.value, ast.Call) and self.names.dotted(f.value.func) == "super":
                self.error("inheritance", node, "calls super().forward (the reference's code)")
            elif name.split(".")[-1] in self.problem_classes and \
                    not name.startswith("torch."):
                self.error("inheritance", node, "builds or calls the reference %s" % name)
            elif name.endswith(".forward") and name.split(".")[-2] in self.problem_classes:
                self.error("inheritance", node, "calls %s (the reference's code)" % name)

    def check_fallback(self):
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Try):
                continue
            for h in node.handlers:
                for s in h.body:
                    if isinstance(s, ast.Raise):
                        continue
                    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                            (self.names.dotted(s.value.func) or "") in LOGGING_CALLS:
                        continue
                    self.error("fallback", s, "an except branch that does more than raise "
                               "(a fallback when the custom kernel fails); let the error "
                               "propagate")
                    break

    def check_caching(self):
        funcs = [n for n in ast.walk(self.tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
        for fn in funcs:
            for d in getattr(fn, "decorator_list", []):
                name = self.names.dotted(d.func if isinstance(d, ast.Call) else d) or ""
                if name.split(".")[-1] in ("lru_cache", "cache", "cached_property") and \
                        (name.startswith("functools") or name in ("lru_cache", "cache")):
                    self.error("caching", d, "%s caches results across calls" % name)
        for fn in funcs:
            if isinstance(fn, ast.Lambda):
                continue
            for n in ast.walk(fn):
                if isinstance(n, (ast.Global, ast.Nonlocal)):
                    self.error("caching", n, "'%s %s': state written across calls" % (
                        "global" if isinstance(n, ast.Global) else "nonlocal",
                        ", ".join(n.names)))
            if fn.name == "__init__" and fn in self.methods.values():
                continue
            # Locals the function returns: storing one of them on self keeps an output.
            local = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and
                     isinstance(n.ctx, ast.Store)} - {"self"}
            returned = set()
            for r in ast.walk(fn):
                if isinstance(r, ast.Return) and r.value is not None:
                    returned |= _names_in(r.value)
                    if _is_self_attr(r.value) or (_root_name(r.value) in
                                                  self.names.module_level and
                                                  isinstance(r.value, ast.Subscript)):
                        self.error("caching", r, "returns stored state (a result kept from an "
                                   "earlier call)")
            for n in ast.walk(fn):
                for t in _assigned(n):
                    value = getattr(n, "value", None)
                    root = _root_name(t)
                    if isinstance(t, ast.Subscript) and root in self.names.module_level:
                        self.error("caching", n, "writes the module-level %s from a call "
                                   "(state kept across calls)" % root)
                    elif _is_self_attr(t) and value is not None and fn.name != "__init__":
                        if self._moves_itself(t, value):
                            continue
                        if _names_in(value) & returned & local or isinstance(t, ast.Subscript):
                            self.error("caching", n, "stores a result on self (kept across "
                                       "calls)")
                for c in ([n] if isinstance(n, ast.Call) else []):
                    f = c.func
                    if isinstance(f, ast.Attribute) and f.attr in ("append", "update",
                                                                   "setdefault", "extend") and \
                            (_root_name(f.value) in self.names.module_level or
                             _is_self_attr(f.value)) and fn.name != "__init__":
                        self.error("caching", c, "fills a container kept across calls (%s)" %
                                   ast.unparse(f))

    @staticmethod
    def _moves_itself(target, value):
        """self.h0 = self.h0.to(x.device): a device move, not a cache."""
        return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and
                value.func.attr in ("to", "cuda", "contiguous", "type") and
                ast.unparse(value.func.value) == ast.unparse(target))

    def check_streams(self):
        for s in self.strings():
            for m in re.finditer(r"\b(cudaStreamCreate\w*|cudaStreamPerThread|"
                                 r"cudaStreamNonBlocking|getStreamFromPool|cudaStreamWaitEvent|"
                                 r"cudaStreamBeginCapture|cudaGraphLaunch)\b", s.value):
                self.by_policy("streams", "streams", s, "the CUDA source uses %s: work should "
                               "run on the current stream" % m.group(1))
            current = set(re.findall(r"(\w+)\s*=\s*(?:at|c10)::cuda::getCurrentCUDAStream",
                                     s.value))
            # A trailing `cudaStream_t name` parameter: htam.load_cuda's convention fills it with
            # PyTorch's current stream (the caller cannot choose another; kb_fastpath.py).
            current |= set(re.findall(r"\bcudaStream_t\s+(\w+)\s*\)", s.value))
            for m in re.finditer(r"<<<(.*?)>>>", s.value, re.S):
                args = _split_top(m.group(1))
                if len(args) >= 4:
                    st = args[3].strip()
                    if st in ("0", "nullptr", "NULL", "cudaStreamLegacy") or st in current or \
                            "getCurrentCUDAStream" in st:
                        continue
                    self.by_policy("streams", "streams", s, "a kernel launch on stream '%s', "
                                   "which is not the current stream "
                                   "(at::cuda::getCurrentCUDAStream())" % st)
        for c in _calls(self.tree):
            name = self.names.dotted(c.func) or ""
            if name in STREAM_PY or (isinstance(c.func, ast.Attribute) and
                                     c.func.attr in STREAM_PY_METHODS):
                self.by_policy("streams", "streams", c, "%s: work should run on the current "
                               "stream" % (name or c.func.attr))

    def check_threads_patching_dynamic(self):
        for node in ast.walk(self.tree):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module]
            for m in mods:
                if m.split(".")[0] in THREAD_MODULES:
                    self.error("threads", node, "imports %s (work outside the timed call)" % m)
                if m.split(".")[0] == "importlib":
                    self.error("dynamic", node, "imports importlib")
            for t in _assigned(node):
                name = self.names.dotted(t) if isinstance(t, ast.Attribute) else None
                if name and name.startswith("torch.backends."):
                    # A setting of the candidate's own process (cudnn.benchmark, TF32): the
                    # reference's outputs come from another process, with TF32 off.
                    self.report.warnings.append(Finding(
                        "patching", node.lineno, "sets %s (PyTorch's settings for this "
                        "process; the reference ran with TF32 off)" % name))
                elif name and name.split(".")[0] in PATCHED_ROOTS:
                    self.error("patching", node, "assigns %s (patches the harness or the "
                               "reference)" % name)
            if isinstance(node, ast.ClassDef):
                for b in node.bases:
                    if (self.names.dotted(b) or "") in ("torch.Tensor", "Tensor"):
                        self.error("patching", node, "defines a torch.Tensor subclass")
            if isinstance(node, ast.Call):
                name = self.names.dotted(node.func) or ""
                if name in DYNAMIC_CALLS:
                    self.error("dynamic", node, "%s(...) runs code the checks cannot read" %
                               name)
                elif name in ("getattr", "setattr", "delattr") and node.args and \
                        (self.names.dotted(node.args[0]) or "").split(".")[0] in PATCHED_ROOTS:
                    self.error("dynamic" if name == "getattr" else "patching", node,
                               "%s on %s" % (name, ast.unparse(node.args[0])))
                elif name in ("os.fork", "os.system", "subprocess.Popen", "subprocess.run"):
                    self.error("threads", node, "%s (work outside the timed call)" % name)
                elif name.endswith("_make_subclass"):
                    self.error("patching", node, "_make_subclass (a lazy or fake tensor)")

    # -- policy ----------------------------------------------------------------------------
    def check_torch_use(self):
        outside_init = set()
        for fn in ast.walk(self.tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and not (
                    fn.name == "__init__" and fn in self.methods.values()) and \
                    fn.name not in ("get_inputs", "get_init_inputs"):
                outside_init |= {id(n) for n in ast.walk(fn)}
        in_other_classes = set()
        for c in ast.walk(self.tree):
            if isinstance(c, ast.ClassDef) and c.name in self.problem_classes and \
                    c.name != "ModelNew":
                in_other_classes |= {id(n) for n in ast.walk(c)}
        for node in ast.walk(self.tree):
            if id(node) in in_other_classes:
                continue  # a copy of the reference class kept in the file (and never called)
            if isinstance(node, ast.Call):
                name = self.names.dotted(node.func) or ""
                parts = name.split(".")
                if name.startswith("torch.nn.functional."):
                    self.by_policy("functional", "functional", node,
                                   "calls %s (PyTorch, not a custom kernel)" % name)
                    continue
                if name.startswith("torch.nn.") and len(parts) == 3 and \
                        parts[2] not in NN_ALLOWED and parts[2][:1].isupper():
                    self.by_policy("layers", "layers", node,
                                   "uses the PyTorch layer %s (not a custom kernel)" % name)
                    continue
                if id(node) not in outside_init:
                    continue
                if parts[0] == "torch" and len(parts) == 2 and parts[1] in TORCH_COMPUTE:
                    self.by_policy("torch_ops", "torch_ops", node,
                                   "calls %s (a PyTorch compute operator)" % name)
                elif isinstance(node.func, ast.Attribute) and node.func.attr in METHOD_COMPUTE \
                        and parts[0] != "torch" and not name.startswith("triton.") and \
                        _root_name(node.func.value) not in self.names.module_level | {"self"}:
                    self.by_policy("torch_ops", "torch_ops", node,
                                   "calls .%s() (a PyTorch compute operator)" % node.func.attr)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) and \
                    id(node) in outside_init:
                self.by_policy("torch_ops", "torch_ops", node,
                               "multiplies with @ (a PyTorch matmul)")

    def check_precision(self):
        """Computing in f16 where the task asks f32: faster, and often inside the tolerance."""
        for s in self.strings():
            m = PRECISION_CUDA.search(s.value)
            if m:
                self.by_policy("precision", "precision", s, "the kernel source converts to "
                               "half precision (%s)" % m.group(0).strip())
        for c in _calls(self.tree):
            f = c.func
            name = self.names.dotted(f) or ""
            half = {"torch.float16", "torch.half", "triton.language.float16"}
            args = [self.names.dotted(a) or "" for a in list(c.args) + [k.value for k in
                                                                          c.keywords]]
            if isinstance(f, ast.Attribute) and f.attr == "half" and not c.args:
                what = ".half()"
            elif isinstance(f, ast.Attribute) and f.attr in ("to", "astype") and \
                    half & set(args):
                what = ".%s(%s)" % (f.attr, (half & set(args)).pop())
            elif name == "triton.language.astype" and half & set(args):
                what = "tl.astype(..., float16)"
            else:
                continue
            self.by_policy("precision", "precision", c, "converts to half precision (%s)" %
                           what)

    def check_kernel(self):
        compiled = any((self.names.dotted(c.func) or "") in KERNEL_COMPILERS or
                       (self.names.dotted(c.func) or "").endswith(("load_inline", "load_cuda"))
                       for c in _calls(self.tree))
        cuda = compiled and any("__global__" in s.value for s in self.strings())
        triton = False
        for fn in ast.walk(self.tree):
            if isinstance(fn, ast.FunctionDef):
                for d in fn.decorator_list:
                    name = self.names.dotted(d.func if isinstance(d, ast.Call) else d) or ""
                    if name in ("triton.jit", "triton.autotune", "triton.heuristics"):
                        triton = True
        if not (cuda or triton):
            self.error("require_kernel", self.cls, "the file defines no custom kernel (CUDA "
                       "source with __global__ compiled by load_inline or htam.load_cuda, or a "
                       "@triton.jit function), and the task requires one")

    def strings(self):
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.Constant) and
                isinstance(n.value, str)]


def _is_main_guard(node):
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left] + list(node.test.comparators)
    return (len(parts) == 2 and isinstance(node.test.ops[0], ast.Eq) and
            {ast.unparse(p) for p in parts} in ({"__name__", "'__main__'"},
                                                {"__name__", '"__main__"'}))


def _split_top(text):
    """Splits a launch configuration at commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def check_runtime_ops(ops, policy=None):
    """The Report of the PyTorch functions one forward called ([module, name, via])."""
    p = dict(DEFAULT_POLICY)
    p.update(policy or {})
    report = Report()
    for op in ops:
        mod, name = str(op[0] or ""), str(op[1] or "")
        via = str(op[2]) if len(op) > 2 else "candidate"
        if via == "layer":
            key, what = "layers", "%s inside a torch.nn layer" % name
            if not (mod.startswith("torch.nn.functional") or name in TORCH_COMPUTE):
                continue
        elif mod.startswith("torch.nn.functional"):
            key, what = "functional", "torch.nn.functional.%s" % name
        elif name in TORCH_COMPUTE or name.rstrip("_") in METHOD_COMPUTE or name in \
                ("__matmul__", "__rmatmul__"):
            key, what = "torch_ops", "torch %s" % name
        else:
            continue
        msg = "ModelNew.forward called %s at run time (PyTorch, not a custom kernel)" % what
        if p[key] == "forbid":
            report.errors.append(Finding(key, 0, msg))
        elif p[key] == "warn":
            report.warnings.append(Finding(key, 0, msg))
    return report


def check(source, problem_source="", policy=None):
    """The Report of one candidate; policy = a task's kernelbench_policy merged over defaults."""
    p = dict(DEFAULT_POLICY)
    p.update(policy or {})
    return Checker(source, problem_source, p).run()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("candidate")
    ap.add_argument("--problem", default="")
    ap.add_argument("--task", default="")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--runtime-ops", default="")
    a = ap.parse_args()
    try:
        with open(a.candidate, encoding="utf-8") as f:
            src = f.read()
        problem = ""
        if a.problem:
            with open(a.problem, encoding="utf-8") as f:
                problem = f.read()
        task = {}
        if a.task:
            with open(a.task, encoding="utf-8") as f:
                task = json.load(f)
        policy = policy_from_task(task)
        ops = None
        if a.runtime_ops:
            with open(a.runtime_ops, encoding="utf-8") as f:
                ops = json.load(f)
            if not isinstance(ops, list) or not all(isinstance(o, list) and len(o) in (2, 3)
                                                    for o in ops):
                raise ValueError("%s: not a list of [module, name]" % a.runtime_ops)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        sys.stderr.write("kb_static: %s\n" % e)
        sys.exit(2)
    r = check(src, problem, policy) if ops is None else check_runtime_ops(ops, policy)
    if a.json:
        print(json.dumps(r.as_dict()))
    else:
        for e in r.errors:
            print("kb_static: %s" % e.text())
        for w in r.warnings:
            print("kb_static: warning: %s" % w.text())
    sys.exit(0 if r.ok else 1)


if __name__ == "__main__":
    main()
