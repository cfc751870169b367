"""Task folders and their lineages (configs/tasks/<name>/task.json + lineage.json).

A lineage is a tree of known variants of a task's kernel on one backend: each variant names its
parent ("reference" for the root), the direction and strategy it applied, what it expects (ok,
slower, incorrect, compile_error, crash) and what was measured. The replay proposer, the lineage
import and the quality benchmark all walk this tree.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

ROOT = "reference"

# Lineage "expected" values and their OutcomeStatus slug (schema/htg.fbs).
EXPECTED_TO_STATUS = {
    "ok": "ok",
    "slower": "ok",
    "incorrect": "incorrect",
    "compile_error": "compile_error",
    "crash": "crash",
    "timeout": "timeout",
    "nondeterministic": "nondeterministic",
}

LANGUAGE_OF_BACKEND = {"cpu": "cpp", "cuda": "cuda", "hip": "hip"}


class LineageError(Exception):
    """A task folder or lineage file that cannot be used (message says which and why)."""


@dataclass
class Variant:
    id: str
    file: str
    parent: str
    direction: str
    strategy: str
    summary: str = ""
    changed: str = ""
    expected: str = "ok"
    measured: dict = field(default_factory=dict)
    path: str = ""  # absolute path of the source file

    @property
    def status(self) -> str:
        """Outcome slug this variant is known to produce."""
        measured = (self.measured or {}).get("status")
        if measured and measured != "ok":
            return str(measured)
        return EXPECTED_TO_STATUS.get(self.expected, "ok")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def speedup(self) -> float:
        """Measured speedup over the reference; 0 for failures or when nothing was measured."""
        if not self.ok:
            return 0.0
        try:
            return float((self.measured or {}).get("speedup", 0.0) or 0.0)
        except (TypeError, ValueError):
            return 0.0

    def source(self) -> str:
        with open(self.path, encoding="utf-8") as f:
            return f.read()

    def annotation(self) -> str:
        """The one-line summary a submission of this variant carries: strategy slug first, so the
        memory learns a named skill, then what was done and why (its intent and effect)."""
        text = f"{self.strategy}: {self.summary}".strip()
        if self.changed:
            text += f" -- {self.changed}"
        return text


@dataclass
class Lineage:
    task: str
    backend: str
    variants: List[Variant]
    path: str = ""

    def by_id(self, vid: str) -> Optional[Variant]:
        for v in self.variants:
            if v.id == vid:
                return v
        return None

    def children(self, parent: str) -> List[Variant]:
        return [v for v in self.variants if v.parent == parent]

    def speedup_of(self, node: str) -> float:
        return 1.0 if node == ROOT else (self.by_id(node).speedup if self.by_id(node) else 0.0)

    def ancestors(self, node: str) -> List[str]:
        """Path from the root to node, both included (root first)."""
        path = []
        seen = set()
        while node and node not in seen:
            seen.add(node)
            path.append(node)
            if node == ROOT:
                break
            v = self.by_id(node)
            node = v.parent if v else ROOT
        if path[-1] != ROOT:
            path.append(ROOT)
        return list(reversed(path))

    def parent_order(self) -> List[Variant]:
        """Every variant after its parent (breadth-first from the reference)."""
        out, frontier = [], [ROOT]
        placed = {ROOT}
        while frontier:
            nxt = []
            for p in frontier:
                for v in self.children(p):
                    if v.id not in placed:
                        placed.add(v.id)
                        out.append(v)
                        nxt.append(v.id)
            frontier = nxt
        # Orphans (parent unknown) go last, so nothing is silently dropped.
        out.extend(v for v in self.variants if v.id not in placed)
        return out

    def best(self) -> Optional[Variant]:
        ok = [v for v in self.variants if v.ok and v.speedup > 0]
        return max(ok, key=lambda v: v.speedup) if ok else None

    def best_speedup(self) -> float:
        b = self.best()
        return max(1.0, b.speedup) if b else 1.0

    def directions(self) -> List[str]:
        seen: List[str] = []
        for v in self.variants:
            if v.direction not in seen:
                seen.append(v.direction)
        return seen


@dataclass
class Task:
    name: str
    dir: str
    spec: dict
    lineages: Dict[str, Lineage]

    @property
    def description(self) -> str:
        return str(self.spec.get("description", ""))

    @property
    def category(self) -> str:
        return str(self.spec.get("category", ""))

    def reference_path(self, backend: str) -> Optional[str]:
        ref = (self.spec.get("references") or {}).get(backend)
        return os.path.join(self.dir, ref) if ref else None

    def reference_source(self, backend: str) -> str:
        p = self.reference_path(backend)
        if not p or not os.path.exists(p):
            return ""
        with open(p, encoding="utf-8") as f:
            return f.read()

    def spec_text(self) -> str:
        """The specification an agent may see: held-out shapes are never shown."""
        visible = {k: v for k, v in self.spec.items() if k not in ("lineage", "references")}
        shapes = dict(visible.get("shapes") or {})
        shapes.pop("held_out", None)
        visible["shapes"] = shapes
        return json.dumps(visible, indent=1, sort_keys=True)


def _load_lineage(path: str, task_dir: str) -> Lineage:
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        raise LineageError(f"{path}: cannot read lineage: {e}") from e
    if not isinstance(raw, dict) or not isinstance(raw.get("variants"), list):
        raise LineageError(f"{path}: lineage needs an object with a 'variants' list")
    variants = []
    for i, item in enumerate(raw["variants"]):
        if not isinstance(item, dict):
            raise LineageError(f"{path}: variant #{i} is not an object")
        missing = [k for k in ("id", "file", "parent", "direction", "strategy") if not item.get(k)]
        if missing:
            raise LineageError(f"{path}: variant #{i} lacks {', '.join(missing)}")
        v = Variant(
            id=str(item["id"]), file=str(item["file"]), parent=str(item["parent"]),
            direction=str(item["direction"]), strategy=str(item["strategy"]),
            summary=str(item.get("summary", "")), changed=str(item.get("changed", "")),
            expected=str(item.get("expected", "ok")), measured=dict(item.get("measured") or {}),
            path=os.path.join(task_dir, str(item["file"])))
        variants.append(v)
    return Lineage(task=str(raw.get("task", "")), backend=str(raw.get("backend", "")),
                   variants=variants, path=path)


def load_task(task_dir: str) -> Task:
    """Reads a task folder: task.json and every lineage it names (or lineage*.json beside it)."""
    task_dir = os.path.abspath(task_dir)
    spec_path = os.path.join(task_dir, "task.json")
    try:
        with open(spec_path, encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError) as e:
        raise LineageError(f"{spec_path}: cannot read task: {e}") from e
    if not isinstance(spec, dict) or not spec.get("name"):
        raise LineageError(f"{spec_path}: task.json needs a 'name'")
    named = spec.get("lineage")
    files: List[str] = []
    if isinstance(named, str):
        files = [named]
    elif isinstance(named, list):
        files = [str(x) for x in named]
    elif isinstance(named, dict):
        files = [str(x) for x in named.values()]
    paths = [os.path.join(task_dir, f) for f in files]
    for extra in sorted(glob.glob(os.path.join(task_dir, "lineage*.json"))):
        if os.path.abspath(extra) not in {os.path.abspath(p) for p in paths}:
            paths.append(extra)
    lineages: Dict[str, Lineage] = {}
    for p in paths:
        if not os.path.exists(p):
            continue
        lin = _load_lineage(p, task_dir)
        backend = lin.backend or "cpu"
        lin.backend = backend
        lin.task = lin.task or spec["name"]
        lineages[backend] = lin
    return Task(name=str(spec["name"]), dir=task_dir, spec=spec, lineages=lineages)


def discover_tasks(tasks_root: str) -> List[Task]:
    """Every task folder under tasks_root (folders holding a task.json), sorted by name."""
    out = []
    for d in sorted(glob.glob(os.path.join(tasks_root, "*", "task.json"))):
        out.append(load_task(os.path.dirname(d)))
    return out
