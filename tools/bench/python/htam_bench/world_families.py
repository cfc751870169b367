"""World families: a folder per kernel family (configs/world/families/<family>/) holding

  family.json  the task template (task.json fields; "$T" stands for the shape's dtype, "$B" for its
               size in bytes) with tolerances per dtype, the template's file name and the backend
               ("backend": "cuda" by default, or "cpu")
  kernel.cu    the CUDA template (kernel.cc, C++, for a "cpu" family); every knob is a
               preprocessor macro the materializer defines
  knobs.json   the knobs: values, the "unoptimized" baseline value, and the taxonomy strategy and
               direction each knob (or, through "value_strategies", each value) applies
  shapes.json  the shapes (dims and dtype) of the family's tasks

and the materializer that turns (family, shape, knob assignment) into a task directory the gate
reads (task.json, reference.cu = the template at its baseline knob values, variants/<id>.cu; .cpp
for a "cpu" family).
A variant's source depends on the knobs and the dtype only, never on the shape, so the shapes of a
family share compiled artifacts.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from htam_agent.shipped import find_shared_file

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "u8": 1}
DTYPE_MACROS = {"f16": "DT_F16", "bf16": "DT_BF16"}
# Shipped: <prefix>/share/htam/world/families (htam.paths; a build tree links it there); '' when
# neither an install nor a build tree holds it.
DEFAULT_FAMILIES = find_shared_file("world/families")
# The backends a family can target: the candidate files' extension and the template's default name.
BACKEND_EXT = {"cuda": ".cu", "cpu": ".cpp"}
DEFAULT_TEMPLATE = {"cuda": "kernel.cu", "cpu": "kernel.cc"}


class FamilyError(ValueError):
    """A family folder that does not follow the format (the message names file and field)."""


@dataclass
class Knob:
    name: str
    values: List[int]
    baseline: int
    strategy: str
    direction: str
    value_strategies: Dict[str, Dict[str, str]] = field(default_factory=dict)

    def names(self, value: int) -> Tuple[str, str]:
        """(strategy, direction) that setting this knob to `value` applies."""
        o = self.value_strategies.get(str(value), {})
        return o.get("strategy", self.strategy), o.get("direction", self.direction)


@dataclass
class Shape:
    id: str
    dims: Dict[str, int]
    dtype: str
    why: str = ""
    init: Dict[str, dict] = field(default_factory=dict)  # per-input init overrides


@dataclass
class Family:
    name: str
    dir: str
    spec: dict
    knobs: List[Knob]
    shapes: List[Shape]
    template: str
    sample: int = 0  # 0 = the whole knob space; else a fixed-seed sample of that many variants

    def baseline(self) -> Dict[str, int]:
        return {k.name: k.baseline for k in self.knobs}

    def space(self) -> List[Dict[str, int]]:
        """Every knob assignment (or the documented sample), baseline first."""
        allv = [dict(zip([k.name for k in self.knobs], vals))
                for vals in itertools.product(*[k.values for k in self.knobs])]
        base = self.baseline()
        allv.sort(key=lambda a: a != base)
        if self.sample and len(allv) > self.sample:
            # Baseline, every single-knob move from it, then a seeded draw of the rest.
            keep = [a for a in allv if sum(a[k] != base[k] for k in a) <= 1]
            rest = [a for a in allv if a not in keep]
            random.Random(f"{self.name}-sample").shuffle(rest)
            allv = keep + rest[:max(0, self.sample - len(keep))]
        return allv

    def task_name(self, shape: Shape) -> str:
        return f"world_{self.name}_{shape.id}"

    @property
    def backend(self) -> str:
        """The backend the family's kernels are written for ("cuda" unless family.json says)."""
        return self.spec.get("backend", "cuda")

    @property
    def ext(self) -> str:
        """The extension of its candidate files (.cu, or .cpp for the CPU backend)."""
        return BACKEND_EXT[self.backend]


def variant_id(assign: Dict[str, int]) -> str:
    return "-".join(f"{k.lower()}{v}" for k, v in assign.items())


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise FamilyError(f"{path}: {e}") from e


def load_taxonomy(path: Optional[str] = None) -> Dict[str, set]:
    """direction -> set of strategy names, from the seed taxonomy."""
    t = _read_json(path or find_shared_file("seed_taxonomy.json") or "seed_taxonomy.json")
    return {d["name"]: {s["name"] for s in d["strategies"]} for d in t["directions"]}


def load_family(folder: str, taxonomy: Optional[Dict[str, set]] = None) -> Family:
    taxonomy = taxonomy if taxonomy is not None else load_taxonomy()
    spec = _read_json(os.path.join(folder, "family.json"))
    kj = _read_json(os.path.join(folder, "knobs.json"))
    sj = _read_json(os.path.join(folder, "shapes.json"))
    name = spec.get("name") or os.path.basename(folder.rstrip("/"))
    backend = spec.get("backend", "cuda")
    if backend not in BACKEND_EXT:
        raise FamilyError(f"{folder}/family.json: backend '{backend}' is not one of "
                          f"{sorted(BACKEND_EXT)}")
    knobs = []
    for i, k in enumerate(kj.get("knobs", [])):
        where = f"{folder}/knobs.json: knobs[{i}]"
        for key in ("name", "values", "baseline", "strategy", "direction"):
            if key not in k:
                raise FamilyError(f"{where}: missing '{key}'")
        knob = Knob(k["name"], list(k["values"]), k["baseline"], k["strategy"], k["direction"],
                    k.get("value_strategies", {}))
        if knob.baseline not in knob.values:
            raise FamilyError(f"{where}: baseline {knob.baseline} is not among the values")
        for v in knob.values:
            s, d = knob.names(v)
            if d not in taxonomy or s not in taxonomy[d]:
                raise FamilyError(f"{where}: value {v}: strategy '{s}' is not a strategy of "
                                  f"direction '{d}' in the seed taxonomy")
        knobs.append(knob)
    if not knobs:
        raise FamilyError(f"{folder}/knobs.json: no knobs")
    shapes = []
    for i, s in enumerate(sj.get("shapes", [])):
        if "id" not in s or "dims" not in s:
            raise FamilyError(f"{folder}/shapes.json: shapes[{i}]: needs 'id' and 'dims'")
        dt = s.get("dtype", "f32")
        if dt not in DTYPE_BYTES:
            raise FamilyError(f"{folder}/shapes.json: shapes[{i}]: unknown dtype '{dt}'")
        missing = set(spec["dims"]) - set(s["dims"])
        if missing:
            raise FamilyError(f"{folder}/shapes.json: shapes[{i}]: dims {sorted(missing)} unbound")
        shapes.append(Shape(s["id"], dict(s["dims"]), dt, s.get("why", ""), s.get("init", {})))
    try:
        with open(os.path.join(folder, spec.get("template", DEFAULT_TEMPLATE[backend]))) as f:
            template = f.read()
    except OSError as e:
        raise FamilyError(f"{folder}/family.json: template: {e}") from e
    return Family(name, folder, spec, knobs, shapes, template, int(kj.get("sample", 0)))


def load_families(root: Optional[str] = None, names: Optional[Sequence[str]] = None) -> List[Family]:
    root = root or DEFAULT_FAMILIES
    if not root:
        raise FamilyError("no world families: neither an install (share/htam/world/families) nor "
                          "a build tree holds them; name a folder (--families)")
    tax = load_taxonomy()
    out = []
    for d in sorted(os.listdir(root)):
        p = os.path.join(root, d)
        if os.path.isfile(os.path.join(p, "family.json")) and (not names or d in names):
            out.append(load_family(p, tax))
    return out


def source(fam: Family, assign: Dict[str, int], dtype: str) -> str:
    """The candidate source: knob macros, then the template."""
    lines = [f"// {fam.name} variant {variant_id(assign)} ({dtype})"]
    lines += [f"#define {k} {v}" for k, v in assign.items()]
    for dt, macro in DTYPE_MACROS.items():
        lines.append(f"#define {macro} {1 if dtype == dt else 0}")
    return "\n".join(lines) + "\n" + fam.template


def source_hash(fam: Family, assign: Dict[str, int], dtype: str) -> str:
    return hashlib.sha256(source(fam, assign, dtype).encode()).hexdigest()[:16]


def _subst(obj, dtype: str):
    if isinstance(obj, str):
        return obj.replace("$T", dtype).replace("$B", str(DTYPE_BYTES[dtype]))
    if isinstance(obj, list):
        return [_subst(x, dtype) for x in obj]
    if isinstance(obj, dict):
        return {k: _subst(v, dtype) for k, v in obj.items()}
    return obj


def task_json(fam: Family, shape: Shape) -> dict:
    s = fam.spec
    inputs = _subst(s["inputs"], shape.dtype)
    for t in inputs:
        if t["name"] in shape.init:
            t["init"] = dict(shape.init[t["name"]])
    tol = s["tolerance"]
    tol = tol.get(shape.dtype, tol.get("f32")) if "rtol" not in tol else tol
    return {
        "name": fam.task_name(shape),
        "category": s.get("category", fam.name),
        "description": s.get("description", "") + f" [world family {fam.name}, shape {shape.id}]",
        "dims": s["dims"],
        "inputs": inputs,
        "outputs": _subst(s["outputs"], shape.dtype),
        "shapes": {"seen": [shape.dims]},
        "tolerance": tol,
        "flops": _subst(s["flops"], shape.dtype),
        "bytes": _subst(s["bytes"], shape.dtype),
        "references": {fam.backend: "reference" + fam.ext},
    }


def materialize(fam: Family, shape: Shape, out_dir: str,
                assigns: Optional[List[Dict[str, int]]] = None) -> Dict[str, str]:
    """Writes the task directory; returns variant id -> source path."""
    os.makedirs(os.path.join(out_dir, "variants"), exist_ok=True)
    _write(os.path.join(out_dir, "task.json"), json.dumps(task_json(fam, shape), indent=1) + "\n")
    _write(os.path.join(out_dir, "reference" + fam.ext), source(fam, fam.baseline(), shape.dtype))
    paths = {}
    for a in (assigns if assigns is not None else fam.space()):
        vid = variant_id(a)
        p = os.path.join(out_dir, "variants", vid + fam.ext)
        _write(p, source(fam, a, shape.dtype))
        paths[vid] = p
    return paths


def _write(path: str, text: str) -> None:
    try:
        with open(path) as f:
            if f.read() == text:
                return  # unchanged: keep the file (and its cache key) as it is
    except OSError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
