"""Whole KernelBench levels: pick a level's problems, import them as tasks, run one session per
problem, and report KernelBench's metrics (docs/backends.md, "KernelBench levels from the agent").

    htam-agent run --kernelbench DIR --level 1 [--problems 1-20,25] --tasks-dir TASKS
                   [--lineages DIR] [--proposer llm|replay] [--budget N] [--json PATH]

Metrics over the problems selected (a problem that fails to import or never yields a correct
candidate counts as incorrect, as in KernelBench):
  correct   fraction with at least one correct candidate (fast_0 is the same number)
  fast_p    fraction correct with best speedup > p (p = 0, 1, 2); speedup = PyTorch eager time /
            candidate time, both measured by the daemon's gate
  geomean   geometric mean of the best speedup over the correct problems
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import subprocess
import tokenize
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set

from .shipped import find_shared_file

PROBLEM_NUMBER = re.compile(r"^(\d+)_")


class KernelBenchError(Exception):
    pass


def parse_ranges(text: str) -> Optional[Set[int]]:
    """"1-20,25" -> {1..20, 25}; "" -> None (all problems)."""
    if not text:
        return None
    out: Set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise KernelBenchError(f"--problems: '{part}' is not N or N-M")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise KernelBenchError(f"--problems: '{part}' is an empty range")
        out.update(range(lo, hi + 1))
    return out


def level_problems(root: str, level: int, numbers: Optional[Set[int]]) -> List[str]:
    """The problem files of one level, ordered by problem number: ROOT/level<N>/<n>_<name>.py
    (ROOT may be KernelBench's repository, its KernelBench/ folder, or the level folder)."""
    candidates = [os.path.join(root, f"level{level}"),
                  os.path.join(root, "KernelBench", f"level{level}")]
    if os.path.basename(os.path.normpath(root)) == f"level{level}":
        candidates.insert(0, root)
    folder = next((c for c in candidates if os.path.isdir(c)), None)
    if folder is None:
        raise KernelBenchError(f"no level{level} folder under {root}")
    found = []
    for name in os.listdir(folder):
        m = PROBLEM_NUMBER.match(name)
        if m and name.endswith(".py") and (numbers is None or int(m.group(1)) in numbers):
            found.append((int(m.group(1)), os.path.join(folder, name)))
    if not found:
        raise KernelBenchError(f"no problem of level {level} in {folder}"
                               + (" matches --problems" if numbers is not None else ""))
    return [p for _, p in sorted(found)]


def default_helper() -> str:
    """HTAM_KERNELBENCH_HELPER, else the shipped share/htam/kernelbench/kb_helper.py (htam.paths);
    its bare name when none is found (the error then names it)."""
    env = os.environ.get("HTAM_KERNELBENCH_HELPER", "")
    if env:
        return env
    return find_shared_file(os.path.join("kernelbench", "kb_helper.py")) or "kb_helper.py"


@dataclass
class ProblemResult:
    problem: str                 # file name
    task: str = ""               # task name ("" when the import failed)
    status: str = "not_run"      # import_failed | no_candidate | incorrect | correct | error
    speedup: float = 0.0         # best correct candidate's speedup (0 when none)
    steps: int = 0
    session_id: int = 0
    note: str = ""


def import_problems(files: Sequence[str], tasks_dir: str, python: str = "/usr/bin/python3",
                    helper: str = "", timeout_s: float = 120.0) -> List[ProblemResult]:
    """kb_helper.py import-many into tasks_dir; one result per file, in order."""
    helper = helper or default_helper()
    os.makedirs(tasks_dir, exist_ok=True)
    cmd = [python, helper, "import-many", tasks_dir, *files, "--timeout", str(timeout_s)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise KernelBenchError(f"cannot run {python} {helper}: {e}") from e
    by_file: Dict[str, dict] = {}
    for line in r.stdout.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if "problem" in item:
            by_file[os.path.abspath(item["problem"])] = item
    if not by_file:
        raise KernelBenchError("the import produced nothing: " +
                               (r.stderr.strip().splitlines() or ["no output"])[-1])
    out = []
    for f in files:
        item = by_file.get(os.path.abspath(f), {"error": "not imported"})
        res = ProblemResult(problem=os.path.basename(f))
        if "error" in item:
            res.status, res.note = "import_failed", item["error"]
        else:
            res.task = item["name"]
        out.append(res)
    return out


def attach_lineages(results: Sequence[ProblemResult], lineages_root: str, tasks_dir: str) -> None:
    """Copies LINEAGES/<task name>/ (lineage*.json and its variant files) into the task folder,
    for the replay proposer."""
    for r in results:
        src = os.path.join(lineages_root, r.task) if r.task else ""
        if src and os.path.isdir(src):
            shutil.copytree(src, os.path.join(tasks_dir, r.task), dirs_exist_ok=True)


def score_session(result: ProblemResult, rows: Sequence, verified_only: bool = True) -> None:
    """Best correct speedup of one session's rows (agent.StepRow)."""
    good = {"ok"} if verified_only else {"ok", "unverified"}
    result.steps = len(rows)
    correct = [r.speedup for r in rows if r.status in good and r.speedup > 0]
    if correct:
        result.status, result.speedup = "correct", max(correct)
    elif any(r.status not in ("skipped",) for r in rows):
        result.status = "incorrect"
    else:
        result.status = "no_candidate"


def metrics(results: Sequence[ProblemResult]) -> dict:
    n = len(results)
    correct = [r for r in results if r.status == "correct"]
    speedups = [r.speedup for r in correct]

    def frac(k: int) -> float:
        return k / n if n else 0.0

    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else 0.0
    return {"problems": n, "correct": frac(len(correct)),
            "fast_0": frac(sum(1 for s in speedups if s > 0)),
            "fast_1": frac(sum(1 for s in speedups if s > 1)),
            "fast_2": frac(sum(1 for s in speedups if s > 2)),
            "geomean_speedup": geo}


def table(level: int, results: Sequence[ProblemResult], m: dict) -> str:
    head = ["problem", "task", "outcome", "best speedup", "steps"]
    rows = [[r.problem, r.task or "-", r.status, f"{r.speedup:.2f}x" if r.speedup else "-",
             str(r.steps)] for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    lines.append("")
    lines.append(f"level {level}: {m['problems']} problems, correct {m['correct']:.1%}, "
                 f"fast_0 {m['fast_0']:.1%}, fast_1 {m['fast_1']:.1%}, fast_2 {m['fast_2']:.1%}, "
                 f"geomean speedup {m['geomean_speedup']:.2f}x (over the correct ones)")
    return "\n".join(lines)


def problem_file(task) -> str:
    """The task's PyTorch problem file ("" when the task is not a KernelBench task)."""
    name = task.spec.get("kernelbench") if isinstance(task.spec, dict) else None
    return os.path.join(task.dir, name) if isinstance(name, str) and name else ""


def spec_text(task, language: str = "") -> str:
    """task.json for the prompt, and for a KernelBench task the PyTorch problem it must match:
    the task has no reference kernel, so the problem file is the only statement of what to
    compute (the prompt wraps the whole text in a json fence; the problem gets its own)."""
    text = task.spec_text()
    path = problem_file(task)
    if not path:
        return text
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError:
        return text
    if language == KERNELBENCH_LANGUAGE:
        how = ("ModelNew(*get_init_inputs()) is built under the seed Model was built with, and "
               "ModelNew(...)(*get_inputs()) must return what Model's forward returns.")
    else:
        how = ("the candidate's inputs are get_inputs() in order (a Python float/int/bool "
               "arrives as a one-element f64/i64/bool tensor), then the model's state_dict "
               "entries named as in task.json; its outputs are forward's.")
    return (text + "\n```\nThe PyTorch problem the candidate must match ("
            + os.path.basename(path) + "): " + how + "\n```python\n" + source.rstrip())


# ---- ModelNew candidates (htamd's language "kernelbench", docs/backends.md) ----

KERNELBENCH_LANGUAGE = "kernelbench"
LANGUAGE_CHOICES = ("lean", "kernelbench", "auto")

def session_language(requested: str, task) -> str:
    """"kernelbench" or "" (the backend's lean-ABI language). "auto" picks kernelbench for a
    KernelBench task (task None: not known here, so lean)."""
    if requested == KERNELBENCH_LANGUAGE:
        return KERNELBENCH_LANGUAGE
    if requested == "auto" and task is not None and problem_file(task):
        return KERNELBENCH_LANGUAGE
    return ""


def task_policy(task) -> dict:
    """The task's own kernelbench_policy (the prompt fills in the verifier's defaults)."""
    given = task.spec.get("kernelbench_policy") if task is not None else None
    return dict(given) if isinstance(given, dict) else {}


def rename_model(source: str) -> str:
    """The problem's code with its class Model (and every reference to the name) renamed
    ModelNew. Only Python name tokens change: strings, comments and names that merely contain
    'Model' (nn.Module, MyModel) stay as they are."""
    lines = source.splitlines(keepends=True)
    hits = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NAME and tok.string == "Model":
                hits.append(tok.start)
    except (tokenize.TokenError, IndentationError, SyntaxError) as e:
        raise KernelBenchError(f"the problem file does not tokenize: {e}") from e
    for row, col in reversed(hits):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + "ModelNew" + line[col + len("Model"):]
    return "".join(lines)


def modelnew_start(task) -> str:
    """The session's starting ModelNew file: the problem's PyTorch code with Model renamed. It
    keeps every PyTorch operator, so it is a correct candidate wherever the task's policy
    allows them; the model's job is to replace them with kernels."""
    path = problem_file(task) if task is not None else ""
    if not path:
        name = task.name if task is not None else "the task"
        raise KernelBenchError(f"{name} is not a KernelBench task (its task.json names no "
                               "\"kernelbench\" problem file): --language kernelbench needs one")
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError as e:
        raise KernelBenchError(f"cannot read the problem file {path}: {e}") from e
    out = rename_model(source)
    if "class ModelNew" not in out:
        raise KernelBenchError(f"{path} defines no class Model")
    return out


@dataclass
class LevelReport:
    level: int
    proposer: str
    backend: str
    results: List[ProblemResult] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
