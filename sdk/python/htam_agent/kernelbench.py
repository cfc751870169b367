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

from .shipped import find_executable, find_shared_file

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
    '' when none is found."""
    env = os.environ.get("HTAM_KERNELBENCH_HELPER", "")
    if env:
        return env
    return find_shared_file(os.path.join("kernelbench", "kb_helper.py"))


@dataclass
class ProblemResult:
    problem: str                 # file name
    task: str = ""               # task name ("" when the import failed)
    status: str = "not_run"      # import_failed | no_candidate | incorrect | correct | error
    speedup: float = 0.0         # best correct candidate's speedup (0 when none)
    steps: int = 0
    session_id: int = 0
    note: str = ""
    level: int = 0
    modelnew: str = ""           # the ModelNew file scored (score_modelnew_files)
    outcome: str = ""            # htam's status of that file (Ok, Incorrect, CompileError, ...)
    seconds: float = 0.0         # wall time of its evaluation
    median_us: float = 0.0       # its timed median (htam's), and PyTorch eager's
    baseline_us: float = 0.0
    device_mib: float = 0.0      # peak device memory of its evaluation's processes (--device-memory)
    diagnostics: str = ""        # htam's whole verdict (its last 4000 characters): why, how timed


def import_problems(files: Sequence[str], tasks_dir: str, python: str = "/usr/bin/python3",
                    helper: str = "", timeout_s: float = 120.0) -> List[ProblemResult]:
    """kb_helper.py import-many into tasks_dir; one result per file, in order."""
    helper = helper or default_helper()
    if not helper:
        raise KernelBenchError("kb_helper.py not found: neither an install "
                               "(share/htam/kernelbench) nor a build tree holds it; "
                               "set HTAM_KERNELBENCH_HELPER")
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
    if any(r.modelnew for r in results):
        head = ["problem", "ModelNew file", "htam outcome", "speedup", "seconds"]
        rows = [[r.problem, os.path.basename(r.modelnew) or "-",
                 r.outcome or r.status if not r.note or r.status == "correct" else r.note[:70],
                 f"{r.speedup:.2f}x" if r.speedup else "-",
                 f"{r.seconds:.1f}" if r.seconds else "-"] for r in results]
    else:
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


# ---- Scoring ModelNew files that exist already (a folder per level) ----

LEVEL_FOLDER = re.compile(r"^level_?(\d+)$")
# KernelBench's own runs name their kernels level_<L>_problem_<n>_sample_<s>_kernel.py; a folder
# may also hold <n>_<name>.py, as the problems are named.
MODELNEW_PROBLEM = re.compile(r"(?:^|_)problem_?(\d+)(?:_|\.py$)")


def modelnew_levels(root: str) -> Dict[int, str]:
    """{level: folder} of ROOT/level<N> (or level_<N>) folders; ROOT itself when it is one."""
    name = os.path.basename(os.path.normpath(root))
    m = LEVEL_FOLDER.match(name)
    if m and os.path.isdir(root):
        return {int(m.group(1)): root}
    out = {}
    try:
        entries = os.listdir(root)
    except OSError as e:
        raise KernelBenchError(f"cannot read the ModelNew folder {root}: {e.strerror}") from e
    for entry in entries:
        m = LEVEL_FOLDER.match(entry)
        if m and os.path.isdir(os.path.join(root, entry)):
            out[int(m.group(1))] = os.path.join(root, entry)
    if not out:
        raise KernelBenchError(f"no level<N> folder of ModelNew files under {root}")
    return out


def modelnew_files(folder: str) -> Dict[int, str]:
    """{problem number: ModelNew file} of one level's folder. Several files for one problem
    (KernelBench's samples): the first in name order is scored."""
    found: Dict[int, str] = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        m = MODELNEW_PROBLEM.search(name) or PROBLEM_NUMBER.match(name)
        if m:
            found.setdefault(int(m.group(1)), os.path.join(folder, name))
    return found


@dataclass
class ScoringPlan:
    """The problems of each level to score, and the ModelNew file of each (None: no file, which
    counts as incorrect, as in KernelBench)."""
    levels: Dict[int, List[ProblemResult]] = field(default_factory=dict)
    problem_files: Dict[str, str] = field(default_factory=dict)   # result id -> problem file


def plan_scoring(kernelbench_root: str, modelnew_root: str, levels: Optional[Sequence[int]],
                 numbers: Optional[Set[int]]) -> ScoringPlan:
    """Pairs every selected problem of KernelBench's levels with its ModelNew file
    (modelnew_root "": no files yet; levels then default to 1, 2 and 3)."""
    if not modelnew_root:
        mn_levels = {}
        levels = levels or [1, 2, 3]
    else:
        mn_levels = modelnew_levels(modelnew_root)
    chosen = sorted(levels) if levels else sorted(mn_levels)
    plan = ScoringPlan()
    for level in chosen:
        files = modelnew_files(mn_levels[level]) if level in mn_levels else {}
        results = []
        for path in level_problems(kernelbench_root, level, numbers):
            n = int(PROBLEM_NUMBER.match(os.path.basename(path)).group(1))
            r = ProblemResult(problem=os.path.basename(path), level=level,
                              modelnew=files.get(n, ""))
            if not r.modelnew:
                r.status, r.note = "no_candidate", "no ModelNew file"
            plan.problem_files[f"{level}/{r.problem}"] = path
            results.append(r)
        plan.levels[level] = results
    return plan


def write_reference_modelnew(plan: ScoringPlan, folder: str) -> None:
    """Gives every planned problem its own Model renamed ModelNew as its file (written into
    folder): the reference scored as a candidate, which tells what the harness does with each
    problem at full size (its speedup is about 1 where the task's policy lets plain PyTorch
    pass, e.g. with {"require_kernel": false})."""
    for level, results in plan.levels.items():
        os.makedirs(os.path.join(folder, f"level{level}"), exist_ok=True)
        for r in results:
            src = plan.problem_files[f"{level}/{r.problem}"]
            with open(src, encoding="utf-8") as f:
                text = rename_model(f.read())
            r.modelnew = os.path.join(folder, f"level{level}", r.problem)
            with open(r.modelnew, "w", encoding="utf-8") as f:
                f.write(text)
            if r.status == "no_candidate":
                r.status, r.note = "not_run", ""


def import_planned(plan: ScoringPlan, tasks_dir: str, python: str = "/usr/bin/python3",
                   timeout_s: float = 120.0, policy: Optional[dict] = None) -> None:
    """Imports the problems that have a ModelNew file into tasks_dir (one import-many call);
    policy, when given, becomes each imported task's "kernelbench_policy"."""
    todo = [(r, plan.problem_files[f"{r.level}/{r.problem}"])
            for results in plan.levels.values() for r in results if r.modelnew]
    if not todo:
        return
    imported = import_problems([f for _, f in todo], tasks_dir, python=python,
                               timeout_s=timeout_s)
    for (r, _), got in zip(todo, imported):
        r.task = got.task
        if got.status == "import_failed":
            r.status, r.note = "import_failed", got.note
        elif policy is not None:
            path = os.path.join(tasks_dir, r.task, "task.json")
            with open(path, encoding="utf-8") as f:
                spec = json.load(f)
            spec["kernelbench_policy"] = dict(policy)
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                json.dump(spec, f, indent=1)
            os.replace(path + ".tmp", path)


def parse_policy(text: str) -> Optional[dict]:
    """--policy JSON: a kernelbench_policy object (checked by the verifier when it runs)."""
    if not text:
        return None
    try:
        p = json.loads(text)
    except ValueError as e:
        raise KernelBenchError(f"--policy: not JSON: {e}") from e
    if not isinstance(p, dict):
        raise KernelBenchError("--policy: must be a JSON object, e.g. '{\"require_kernel\": false}'")
    return p


def score_outcome(r: ProblemResult, status: str, speedup: float, diagnostics: str) -> None:
    """A ModelNew file's outcome as KernelBench counts it: correct when htam's gate says Ok."""
    r.steps = 1
    r.outcome = status
    r.diagnostics = (diagnostics or "")[-4000:]
    if status.lower() == "ok" and speedup > 0:
        r.status, r.speedup = "correct", speedup
    else:
        r.status = "incorrect"
        first = next((ln.strip() for ln in (diagnostics or "").splitlines() if ln.strip()), "")
        r.note = (status + (": " + first if first else ""))[:300]


def find_htam_eval(given: str = "") -> str:
    """--htam-eval, else HTAM_EVAL, else HTAM_BUILD_DIR's, else the one shipped beside this
    package (htam.paths: an install's bin/, a build tree's bin/), else htam-eval on PATH."""
    for cand in (given, os.environ.get("HTAM_EVAL", ""),
                 os.path.join(os.environ.get("HTAM_BUILD_DIR", ""), "tools", "eval",
                              "htam-eval") if os.environ.get("HTAM_BUILD_DIR") else "",
                 find_executable("htam-eval")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise KernelBenchError("htam-eval not found (--htam-eval PATH, or HTAM_EVAL)")


def evaluate_with_htam_eval(r: ProblemResult, tasks_dir: str, htam_eval: str, backend: str,
                            extra: Sequence[str] = (), timeout_s: float = 3600.0,
                            watch=None) -> Optional[dict]:
    """One ModelNew file through htam-eval (the evaluator htamd uses: its sandboxed worker and
    runner, the golden data, the static checks, the timing). watch(pid) / watch(None) is told
    when the process starts and ends (DeviceMemoryWatch). Returns htam-eval's JSON result."""
    import time
    cmd = [htam_eval, "--task", os.path.join(tasks_dir, r.task), "--backend", backend,
           "--language", "kernelbench", *extra, r.modelnew]
    t0 = time.monotonic()
    try:
        # In this process's group: whatever ends the scorer (timeout's signal to its group, ^C)
        # ends the evaluations too.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise KernelBenchError(f"cannot run {htam_eval}: {e}") from e
    if watch:
        watch(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()  # htam-eval's worker ends when htam-eval's socket closes
        proc.communicate()
        r.seconds = time.monotonic() - t0
        r.status, r.outcome, r.note = "error", "", f"htam-eval ran past {timeout_s:.0f} s"
        return None
    finally:
        if watch:
            watch(None)
    r.seconds = time.monotonic() - t0
    p = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    result = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except ValueError:
                pass
    if result is None:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        r.status, r.note = "error", f"htam-eval exit {p.returncode}: {tail}"[:300]
        return
    score_outcome(r, str(result.get("status", "")), float(result.get("speedup") or 0.0),
                  str(result.get("diagnostics", "")))
    r.median_us = float(result.get("median_us") or 0.0)
    r.baseline_us = float(result.get("baseline_us") or 0.0)
    return result


def all_levels_line(plan: ScoringPlan) -> str:
    everything = [r for rs in plan.levels.values() for r in rs]
    m = metrics(everything)
    return (f"all levels: {m['problems']} problems, correct {m['correct']:.1%}, "
            f"fast_0 {m['fast_0']:.1%}, fast_1 {m['fast_1']:.1%}, fast_2 {m['fast_2']:.1%}, "
            f"geomean speedup {m['geomean_speedup']:.2f}x")


def plan_report(plan: ScoringPlan, backend: str, how: str) -> dict:
    from dataclasses import asdict
    return {"backend": backend, "evaluated_by": how,
            "levels": {str(level): {"metrics": metrics(rs), "problems": [asdict(r) for r in rs]}
                       for level, rs in plan.levels.items()},
            "all": metrics([r for rs in plan.levels.values() for r in rs])}
