"""htam-mcp's tools: names, JSON Schema 2020-12 input and output schemas, and what each does with
htamd (through the Python SDK). A handler returns the structured result (a dict); a failure
raises ToolError. Names and schemas are a contract with every configured agent: add, never
rename.

Thread-safe: handlers share nothing but the Htamd pool.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any, Callable, Dict, List, Optional

import htam

from .htamd import Htamd, ToolError, check_task_name

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_ID = {"type": "integer", "minimum": 1, "maximum": 2 ** 64 - 1}
_OPT_ID = {"type": "integer", "minimum": 0, "maximum": 2 ** 64 - 1}
_NUM = {"type": "number"}
_STR = {"type": "string"}
_NULLABLE_NUM = {"type": ["number", "null"]}
OUTCOMES = [htam.OUTCOME_NAMES[k] for k in sorted(htam.OUTCOME_NAMES)]
SESSION_STATES = {0: "open", 1: "closed"}
BOTTLENECKS = {0: "Unknown", 1: "Memory", 2: "Compute", 3: "Latency", 4: "Launch"}


def _obj(props: Dict[str, Any], required: Optional[List[str]] = None, closed: bool = True,
         dialect: bool = False) -> Dict[str, Any]:
    s: Dict[str, Any] = {"type": "object", "properties": props}
    if dialect:
        s = {"$schema": DIALECT, **s}
    if required:
        s["required"] = required
    if closed:
        s["additionalProperties"] = False
    return s


def _d(schema: Dict[str, Any], description: str) -> Dict[str, Any]:
    return {**schema, "description": description}


class Progress:
    """Where a handler reports progress; the protocol layer turns it into notifications."""

    def __init__(self, send: Optional[Callable[[float, Optional[float], str], None]] = None):
        self._send = send
        self.count = 0

    @property
    def wanted(self) -> bool:
        return self._send is not None

    def __call__(self, message: str) -> None:
        if self._send is not None:
            self.count += 1
            self._send(float(self.count), None, message)


class Tools:
    def __init__(self, htamd: Htamd):
        self.h = htamd
        self.cfg = htamd.cfg
        self.defs: Dict[str, Dict[str, Any]] = {}
        self._define()

    # ---- the catalogue ----
    def _add(self, name: str, title: str, description: str, input_schema: Dict[str, Any],
             output_schema: Dict[str, Any], handler: Callable[..., Dict[str, Any]],
             read_only: bool) -> None:
        self.defs[name] = {
            "name": name, "title": title, "description": description,
            "inputSchema": {"$schema": DIALECT, **input_schema},
            "outputSchema": output_schema,
            "annotations": {"title": title, "readOnlyHint": read_only, "destructiveHint": False,
                            "idempotentHint": read_only, "openWorldHint": False},
            "_handler": handler,
        }

    def listing(self) -> List[Dict[str, Any]]:
        return [{k: v for k, v in d.items() if not k.startswith("_")} for d in self.defs.values()]

    def call(self, name: str, args: Dict[str, Any], progress: Progress) -> Dict[str, Any]:
        return self.defs[name]["_handler"](args, progress)

    def _define(self) -> None:
        src_cap = self.cfg.max_source_bytes
        self._add(
            "list_tasks", "List tasks",
            "Tasks htam can evaluate: those of the task suite and those known to htamd's memory, "
            "with category, description and backends. Start here, then describe_task.",
            _obj({"backend": _d(_STR, "only tasks with a reference for this backend (cpu, cuda, hip)")}),
            _obj({"tasks": {"type": "array", "items": _obj({
                "name": _STR, "category": _STR, "description": _STR,
                "backends": {"type": "array", "items": _STR},
                "in_memory": {"type": "boolean"}}, ["name"], closed=False)}},
                ["tasks"], closed=False),
            self.list_tasks, True)
        self._add(
            "describe_task", "Describe a task",
            "A task's specification: inputs and outputs with dtypes and shapes, the shapes the "
            "candidate is shown (held-out shapes are checked too but never shown), tolerance, "
            "FLOPs and bytes, baseline times, the kernel ABI header every candidate includes, "
            "and the reference source (the baseline to beat).",
            _obj({"task": _d(_STR, "task name (from list_tasks)"),
                  "backend": _d({**_STR, "default": "cpu"}, "backend whose reference to show")},
                 ["task"]),
            _obj({"name": _STR, "category": _STR, "description": _STR,
                  "tolerance": {"type": "object"}, "baselines": {"type": "array"},
                  "kernel_abi": _STR, "reference_source": _STR}, ["name"], closed=False),
            self.describe_task, True)
        self._add(
            "open_session", "Open an optimization session",
            "Opens a session on a task and backend (or resumes one by session_id). Returns the "
            "session id, the baseline (reference) source and the best source so far. Then call "
            "next_step.",
            _obj({"task": _d(_STR, "task name; omit when resuming"),
                  "backend": _d({**_STR, "default": "cpu"}, "cpu, cuda or hip"),
                  "arch": _d(_STR, "e.g. sm_90; empty = any device of the backend"),
                  "budget": _d({"type": "integer", "minimum": 0, "maximum": 100000},
                               "planned steps (0 = unlimited)"),
                  "model": _d(_STR, "the model writing the candidates, recorded with each step"),
                  "session_id": _d(_OPT_ID, "resume this session instead of opening a new one")}),
            _obj({"session_id": {"type": "integer"}, "task": _STR, "backend": _STR,
                  "steps": {"type": "integer"}, "best_speedup": _NUM,
                  "baseline_source": _STR, "best_source": _STR},
                 ["session_id", "task", "backend"], closed=False),
            self.open_session, False)
        self._add(
            "next_step", "Ask for the next step",
            "htam's advice for the session's next step: the direction to take, the concrete "
            "strategies under it with their measured effect in similar states, every "
            "direction's score, the evidence (past transitions) behind it, why, and prompt "
            "context to write the next candidate from. Compact by default (the best "
            "strategies that apply, the first few with their text); full = true lists more "
            "strategies, every one with its text, and all the evidence.",
            _obj({"session_id": _ID,
                  "full": _d({"type": "boolean"}, "the full answer (default false: compact)")},
                 ["session_id"]),
            _obj({"session_id": {"type": "integer"}, "step": {"type": "integer"},
                  "direction": {"type": "object"}, "strategies": {"type": "array"},
                  "why": _STR, "prompt_context": _STR},
                 ["session_id", "direction", "strategies", "why"], closed=False),
            self.next_step, True)
        self._add(
            "submit_candidate", "Submit a candidate kernel",
            "Evaluates a candidate on the session's backend: compile, the verification gate "
            "(several seeds, seen and held-out shapes, tolerance, determinism, guard bytes), "
            "timing against the baseline; records the step in the memory. Returns the outcome "
            "class (Ok, CompileError, Incorrect, ...), diagnostics, speedup, roofline fraction "
            "and profile. Sends progress notifications when the request carries a progressToken.",
            _obj({"session_id": _ID,
                  "source": _d({**_STR, "minLength": 1, "maxLength": src_cap},
                               f"the candidate: one C entry point from the kernel ABI "
                               f"(at most {src_cap} bytes)"),
                  "language": _d(_STR, "cpp, cuda or hip; empty = the backend's language"),
                  "direction_id": _d(_OPT_ID, "the direction this candidate follows (from next_step)"),
                  "strategy_ids": _d({"type": "array", "items": _ID, "maxItems": 4096},
                                     "strategies used (ids from next_step)"),
                  "summary": _d({**_STR, "maxLength": 65536},
                                "one line: what this candidate changed"),
                  "profile": _d({"type": "boolean"},
                                "also profile an Ok candidate with Nsight Compute (GPU backends)")},
                 ["session_id", "source"]),
            _obj({"status": {"type": "string", "enum": OUTCOMES}, "ok": {"type": "boolean"},
                  "diagnostics": _STR, "speedup": _NUM, "best_speedup": _NUM,
                  "roofline_fraction": _NULLABLE_NUM, "profile": {"type": "object"}},
                 ["status", "ok", "diagnostics", "speedup"], closed=False),
            self.submit_candidate, False)
        self._add(
            "record_outcome", "Record an outcome measured elsewhere",
            "Reports a step the agent evaluated itself. htamd stores it marked unverified, so "
            "the memory learns from it while every reader can tell it from htamd's own "
            "evaluations.",
            _obj({"session_id": _ID,
                  "status": _d({"type": "string", "enum": OUTCOMES}, "the outcome class"),
                  "speedup_after": _d({"type": "number", "minimum": 0}, "baseline time / candidate time"),
                  "median_us": _d({"type": "number", "minimum": 0}, "the candidate's median time"),
                  "direction_id": _OPT_ID,
                  "strategy_ids": {"type": "array", "items": _ID, "maxItems": 4096},
                  "summary": {**_STR, "maxLength": 65536},
                  "source": {**_STR, "maxLength": src_cap}},
                 ["session_id", "status"]),
            _obj({"transition_id": {"type": "integer"}, "verified": {"type": "boolean"}},
                 ["transition_id", "verified"], closed=False),
            self.record_outcome, False)
        self._add(
            "best_candidate", "Best candidate",
            "The best verified candidate (source and speedup) of a session, or of all sessions "
            "of a task (optionally on one backend).",
            _obj({"session_id": _OPT_ID, "task": _STR, "backend": _STR}),
            _obj({"found": {"type": "boolean"}, "session_id": {"type": "integer"},
                  "best_speedup": _NUM, "source": _STR, "language": _STR},
                 ["found"], closed=False),
            self.best_candidate, True)
        self._add(
            "explain_step", "Explain a step",
            "Why htam advises what it advises: for the next step (default), the policy's score "
            "of every direction and the attended evidence; for a past step (step = N), what "
            "the session did then, from which state, and the outcome.",
            _obj({"session_id": _ID,
                  "step": _d({"type": "integer", "minimum": 0}, "a past step; omit for the next")},
                 ["session_id"]),
            _obj({"session_id": {"type": "integer"}, "step": {"type": "integer"}, "why": _STR},
                 ["session_id"], closed=False),
            self.explain_step, True)
        self._add(
            "search_strategies", "Search strategies",
            "Searches the memory's local strategies (seeded, learned and imported) by words, "
            "direction and backend; best matches first, each with its measured statistics.",
            _obj({"query": _d(_STR, "words to look for in name, title, description, pattern"),
                  "direction": _d(_STR, "a direction name or id"),
                  "backend": _STR,
                  "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 20}}),
            _obj({"strategies": {"type": "array"}, "considered": {"type": "integer"}},
                 ["strategies"], closed=False),
            self.search_strategies, True)
        self._add(
            "memory_status", "Memory status",
            "htamd's status: version, backends and devices, the memory's size and record "
            "counts, evaluation queue and workers.",
            _obj({}),
            _obj({"endpoint": _STR, "server_version": _STR,
                  "backends": {"type": "array", "items": _STR}, "sections": {"type": "object"}},
                 ["endpoint", "sections"], closed=False),
            self.memory_status, True)

    # ---- handlers ----
    def list_tasks(self, a: Dict[str, Any], _: Progress) -> Dict[str, Any]:
        backend = a.get("backend", "")
        tasks: Dict[str, Dict[str, Any]] = {}
        for name in self.h.suite_names():
            try:
                spec = self.h.suite_spec(name) or {}
            except ToolError:
                continue
            refs = spec.get("references") if isinstance(spec.get("references"), dict) else {}
            tasks[name] = {"name": name, "category": str(spec.get("category", "")),
                           "description": str(spec.get("description", "")),
                           "backends": sorted(refs), "in_memory": False}
        try:
            with self.h.client() as c:
                stored = c.query("tasks")["tasks"]
        except ToolError as e:
            if not tasks:
                raise
            stored = []  # the suite still answers; say what is missing
            note = f"only the task suite: {e}"
        else:
            note = ""
        for t in stored:
            e = tasks.setdefault(t["name"], {"name": t["name"], "category": t["category"] or "",
                                             "description": t["description"] or "",
                                             "backends": [], "in_memory": True})
            e["in_memory"] = True
            for b in t.get("baselines") or []:
                if b["backend"] and b["backend"] not in e["backends"]:
                    e["backends"] = sorted(e["backends"] + [b["backend"]])
        out = [t for _, t in sorted(tasks.items())
               if not backend or backend in t["backends"]]
        return {"tasks": out, **({"note": note} if note else {})}

    def describe_task(self, a: Dict[str, Any], _: Progress) -> Dict[str, Any]:
        name = check_task_name(a["task"])
        backend = a.get("backend") or "cpu"
        spec = self.h.suite_spec(name)
        note = ""
        try:
            with self.h.client() as c:
                stored = _stored_task(c, name)
        except ToolError as e:
            if spec is None:
                raise
            stored, note = [], f"from the task suite only (no baselines): {e}"
        if spec is None and not stored:
            where = f"the task suite ({self.cfg.tasks_dir}) or " if self.cfg.tasks_dir else ""
            raise ToolError(f"no task '{name}' in {where}htamd's memory; see list_tasks")
        t = stored[0] if stored else {}
        out: Dict[str, Any] = {"name": name,
                               "category": (spec or {}).get("category") or t.get("category") or "",
                               "description": (spec or {}).get("description") or t.get("description") or ""}
        if spec:
            shapes = spec.get("shapes") or {}
            out.update({
                "dims": spec.get("dims", []), "inputs": spec.get("inputs", []),
                "outputs": spec.get("outputs", []),
                "shapes": shapes.get("seen", []),
                "held_out_shapes": len(shapes.get("held_out", [])),
                "tolerance": spec.get("tolerance", {}),
                "flops": spec.get("flops"), "bytes": spec.get("bytes"),
                "backends": sorted((spec.get("references") or {}).keys()),
            })
        else:
            out["tolerance"] = {"rtol": t.get("rtol"), "atol": t.get("atol"),
                                "bad_budget": t.get("bad_budget")}
            out.update({"flops": t.get("flops"), "bytes": t.get("bytes")})
        out["baselines"] = [{"backend": b["backend"], "arch": b["arch"], "median_us": b["median_us"]}
                            for b in (t.get("baselines") or [])]
        out["entry_point"] = ("HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, "
                              "htam_tensor* out, int nout, htam_stream stream)  -- return 0 on success")
        out["kernel_abi"] = self.h.abi_header()
        out["reference_backend"] = backend
        out["reference_source"] = self.h.suite_reference(name, backend)
        missing = [f"no kernel ABI header ({self.cfg.abi_header or 'none found'}; htam-mcp "
                   f"--abi-header)"] if not out["kernel_abi"] else []
        if not out["reference_source"]:
            missing.append(f"no {backend} reference source for {name} in the task suite "
                           f"({self.cfg.tasks_dir or 'none found'}; htam-mcp --tasks-dir)")
        note = "; ".join(([note] if note else []) + missing)
        if note:
            out["note"] = note
        return out

    def open_session(self, a: Dict[str, Any], _: Progress) -> Dict[str, Any]:
        sid = int(a.get("session_id") or 0)
        task = a.get("task") or ""
        if not sid and not task:
            raise ToolError("give a task (from list_tasks) to open a session, or a session_id to "
                            "resume one")
        if task:
            check_task_name(task)
        with self.h.client() as c:
            info = c.open_session(task, backend=a.get("backend") or "cpu", arch=a.get("arch", ""),
                                  budget=int(a.get("budget", 0)), model=a.get("model", ""),
                                  session_id=sid)
        s = info["session"]
        return {"session_id": s["id"], "task": s["task_name"] or "", "backend": s["backend"] or "",
                "arch": s["arch"] or "", "budget": s["budget"], "steps": s["steps"],
                "state": SESSION_STATES.get(s["state"], str(s["state"])),
                "best_speedup": _num(s["best_speedup"]),
                "baseline_source": info.get("baseline_source") or "",
                "best_source": info.get("best_source") or "",
                "next": "call next_step with this session_id"}

    def next_step(self, a: Dict[str, Any], _: Progress) -> Dict[str, Any]:
        with self.h.client() as c:
            st = c.next_step(a["session_id"], full=bool(a.get("full", False)))
        return _step(st)

    def submit_candidate(self, a: Dict[str, Any], progress: Progress) -> Dict[str, Any]:
        source = a["source"]
        size = len(source.encode("utf-8"))
        if size > self.cfg.max_source_bytes:
            raise ToolError(f"source is {size} bytes; htam-mcp accepts at most "
                            f"{self.cfg.max_source_bytes} (max_source_bytes)")
        if not source.strip():
            raise ToolError("source is empty")

        def on_progress(p: Dict[str, Any]) -> None:
            msg = p.get("stage") or "progress"
            progress(f"{msg}: {p['message']}" if p.get("message") else msg)

        # Submit without waiting, then Poll in slices: between htamd's own stages (queued,
        # done) the client hears "evaluating: N s" every progress_interval_s, which keeps the
        # timers of clients that reset them on progress from expiring on a long evaluation.
        start = time.monotonic()
        deadline = start + self.cfg.submit_timeout_s
        with self.h.client(on_progress if progress.wanted else None) as c:
            ack = c.submit(a["session_id"], source, language=a.get("language", ""),
                           direction_id=int(a.get("direction_id", 0)),
                           strategy_ids=a.get("strategy_ids", []), summary=a.get("summary", ""),
                           wait=False, progress=progress.wanted, profile=bool(a.get("profile")))
            r: Dict[str, Any] = {"job_id": ack["job_id"], "done": False}
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                wait_ms = int(min(self.cfg.progress_interval_s, left) * 1000)
                r = c.poll(ack["job_id"], wait_ms=max(wait_ms, 1))
                if r.get("done"):
                    break
                progress(f"evaluating: {time.monotonic() - start:.0f} s")
        if not r.get("done"):
            raise ToolError(f"evaluation of job {r.get('job_id')} not finished within "
                            f"{self.cfg.submit_timeout_s:g} s (submit_timeout_s)")
        p = r.get("profile") or {}
        sol = p.get("sol_fraction", -1)
        status = r.get("status_name", str(r.get("status")))
        return {"session_id": r["session_id"], "job_id": r["job_id"],
                "transition_id": r["transition_id"], "status": status, "ok": status == "Ok",
                "diagnostics": r.get("diagnostics") or "", "speedup": _num(r["speedup"]),
                "best_speedup": _num(r["best_speedup"]), "median_us": _num(r["median_us"]),
                "spread_us": _num(r["spread_us"]), "repetitions": r["repetitions"],
                "baseline_us": _num(r["baseline_us"]),
                "roofline_fraction": _num(sol) if sol is not None and sol >= 0 else None,
                "profile": {k: v for k, v in p.items() if isinstance(v, (int, float)) and v != -1},
                "new_strategy_id": r.get("new_strategy_id", 0)}

    def record_outcome(self, a: Dict[str, Any], _: Progress) -> Dict[str, Any]:
        with self.h.client() as c:
            tid = c.record(a["session_id"], direction_id=int(a.get("direction_id", 0)),
                           strategy_ids=a.get("strategy_ids", []), summary=a.get("summary", ""),
                           status=a["status"], speedup_after=float(a.get("speedup_after", 0.0)),
                           median_us=float(a.get("median_us", 0.0)), source=a.get("source", ""))
        return {"transition_id": tid, "verified": False}

    def best_candidate(self, a: Dict[str, Any], _: Progress) -> Dict[str, Any]:
        sid = int(a.get("session_id") or 0)
        task = a.get("task") or ""
        if not sid and not task:
            raise ToolError("give a session_id, or a task (and optionally a backend)")
        with self.h.client() as c:
            if task and not sid and not _stored_task(c, check_task_name(task)):
                return {"found": False, "why": f"no session of task '{task}' yet"}
            r = c.query("best_candidates", session_id=sid, task="" if sid else task,
                        backend=a.get("backend", ""), limit=1, with_sources=True)
        if not r["candidates"] or not r["sessions"]:
            return {"found": False, "why": "no verified candidate faster than the baseline yet"
                    if sid else f"no session of '{task}' has a best candidate yet"}
        s, cand = r["sessions"][0], r["candidates"][0]
        return {"found": True, "session_id": s["id"], "task": s["task_name"] or "",
                "backend": s["backend"] or "", "best_speedup": _num(s["best_speedup"]),
                "candidate_hash": cand["hash"], "language": cand["language"] or "",
                "source": cand["source"] or ""}

    def explain_step(self, a: Dict[str, Any], _: Progress) -> Dict[str, Any]:
        sid = a["session_id"]
        with self.h.client() as c:
            if a.get("step") is None:
                st = _step(c.next_step(sid))
                return {"session_id": sid, "step": st["step"], "kind": "next step (policy)",
                        "direction": st["direction"], "why": st["why"], "scores": st["scores"],
                        "evidence": st["evidence"]}
            names = {d["id"]: d["name"] for d in c.query("directions")["directions"]}
            trs = c.query("transitions", session_id=sid, limit=100000)["transitions"]
        match = [t for t in trs if t["step"] == a["step"]]
        if not match:
            steps = sorted(t["step"] for t in trs)
            raise ToolError(f"session {sid} has no recorded step {a['step']} (recorded: "
                            f"{', '.join(map(str, steps)) or 'none'})")
        t = match[0]
        state = t.get("state") or {}
        return {"session_id": sid, "step": t["step"], "kind": "recorded step",
                "transition_id": t["id"],
                "state": {"category": state.get("category") or "",
                          "bottleneck": BOTTLENECKS.get(state.get("bottleneck", 0), "Unknown"),
                          "speedup": _num(state.get("speedup", 1.0)),
                          "backend": state.get("backend") or "", "arch": state.get("arch") or ""},
                "history": [names.get(d, str(d)) for d in (t.get("history") or [])],
                "direction": names.get(t["direction_id"], str(t["direction_id"])),
                "strategy_ids": t.get("strategy_ids") or [], "summary": t.get("summary") or "",
                "status": htam.OUTCOME_NAMES.get(t["status"], str(t["status"])),
                "speedup_before": _num(t["speedup_before"]), "speedup_after": _num(t["speedup_after"]),
                "verified": bool(t["verified"]), "diagnostics": t.get("diagnostics") or "",
                "why": f"step {t['step']} took {names.get(t['direction_id'], '?')} from a "
                       f"{BOTTLENECKS.get(state.get('bottleneck', 0), 'Unknown')}-bound state at "
                       f"{_num(t['speedup_before']):.2f}x: "
                       f"{htam.OUTCOME_NAMES.get(t['status'], '?')}, "
                       f"{_num(t['speedup_after']):.2f}x"}

    def search_strategies(self, a: Dict[str, Any], _: Progress) -> Dict[str, Any]:
        words = [w for w in re.split(r"[^a-z0-9]+", a.get("query", "").lower()) if w]
        limit = int(a.get("limit", 20))
        with self.h.client() as c:
            dirs = c.query("directions")["directions"]
            names = {d["id"]: d["name"] for d in dirs}
            did = 0
            if a.get("direction"):
                want = str(a["direction"])
                hit = [d["id"] for d in dirs if d["name"] == want or str(d["id"]) == want]
                if not hit:
                    raise ToolError(f"no direction '{want}' (known: {', '.join(sorted(names.values()))})")
                did = hit[0]
            strategies = c.query("strategies", direction_id=did, backend=a.get("backend", ""),
                                 limit=100000)["strategies"]
        ranked = []
        for s in strategies:
            if s.get("merged_into"):
                continue
            text = " ".join(str(s.get(k) or "") for k in ("name", "title", "description",
                                                         "code_pattern")).lower()
            text += " " + " ".join(s.get("preconditions") or []).lower()
            match = sum(1 for w in words if w in text)
            if words and match == 0:
                continue
            st = s.get("stats") or {}
            uses = st.get("uses", 0)
            ranked.append((match, st.get("successes", 0), uses, s, st))
        ranked.sort(key=lambda x: (-x[0], -x[1], -x[2], x[3]["id"]))
        out = []
        for match, succ, uses, s, st in ranked[:limit]:
            out.append({"id": s["id"], "name": s["name"] or "", "title": s["title"] or "",
                        "direction": names.get(s["direction_id"], str(s["direction_id"])),
                        "direction_id": s["direction_id"],
                        "description": s["description"] or "", "code_pattern": s["code_pattern"] or "",
                        "preconditions": s.get("preconditions") or [],
                        "failure_modes": s.get("failure_modes") or [],
                        "backends": s.get("backends") or [],
                        "source": ((s.get("provenance") or {}).get("source")) or "",
                        "uses": uses, "successes": succ,
                        "mean_log_gain": _num(st.get("sum_gain", 0.0) / uses) if uses else 0.0,
                        "matched_words": match})
        return {"strategies": out, "considered": len(strategies)}

    def memory_status(self, a: Dict[str, Any], _: Progress) -> Dict[str, Any]:
        with self.h.client() as c:
            text = c.status()
            hello = c.server
        return {"endpoint": self.cfg.endpoint, "server_version": hello.get("server_version") or "",
                "backends": hello.get("backends") or [],
                "devices": [{"backend": d["backend"], "arch": d["arch"], "name": d["name"]}
                            for d in hello.get("devices") or []],
                "embedder_model": hello.get("embedder_model") or "",
                "sections": _parse_status(text)}


def _stored_task(c: htam.Client, task: str) -> List[Dict[str, Any]]:
    """The task's record in htamd's memory as a one-element list, or [] (never opened)."""
    try:
        return c.query("tasks", task=task)["tasks"]
    except htam.HtamError as e:
        if e.code == "NotFound":
            return []
        raise


def _parse_status(text: str) -> Dict[str, Dict[str, str]]:
    """htamd's INFO text as {section: {key: value}}; sections write "key: value" or
    "key:value" (the memory library's)."""
    out: Dict[str, Dict[str, str]] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("#"):
            section = line.lstrip("# ").strip()
            out.setdefault(section, {})
        elif ":" in line:
            k, v = line.split(":", 1)
            out.setdefault(section, {})[k.strip()] = v.strip()
    return out


def _num(x: Any) -> float:
    """JSON has no NaN or Inf; they become 0 (the speedup of a candidate never timed)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) else 0.0


def _strategy(h: Dict[str, Any]) -> Dict[str, Any]:
    s = h.get("strategy") or {}
    return {"id": s.get("id", 0), "name": s.get("name") or "", "title": s.get("title") or "",
            "description": s.get("description") or "", "code_pattern": s.get("code_pattern") or "",
            "preconditions": s.get("preconditions") or [],
            "failure_modes": s.get("failure_modes") or [],
            "score": _num(h.get("score")), "similarity": _num(h.get("similarity")),
            "success_rate": _num(h.get("success_rate")), "mean_gain": _num(h.get("mean_gain")),
            "precondition_match": bool(h.get("precondition_match")),
            "cross_backend": bool(h.get("cross_backend")),
            "example_source": h.get("example_source") or ""}


def _step(st: Dict[str, Any]) -> Dict[str, Any]:
    d = st.get("direction") or {}
    return {
        "session_id": st["session_id"], "step": st["step"],
        "direction": {"id": d.get("id", 0), "name": d.get("name") or "", "title": d.get("title") or "",
                      "description": d.get("description") or ""},
        "strategies": [_strategy(h) for h in st.get("strategies") or []],
        "scores": [{"direction_id": s["direction_id"], "name": s["name"] or "",
                    "score": _num(s["score"]), "p_success": _num(s["p_success"]),
                    "expected_gain": _num(s["expected_gain"]), "exploration": _num(s["exploration"]),
                    "penalty": _num(s["penalty"]), "effective_count": _num(s["effective_count"]),
                    "masked": bool(s["masked"]), "mask_reason": s["mask_reason"] or ""}
                   for s in st.get("scores") or []],
        "evidence": [{"transition_id": e["transition_id"], "weight": _num(e["weight"]),
                      "similarity": _num(e["similarity"]),
                      "history_agreement": _num(e["history_agreement"]),
                      "direction_id": e["direction_id"],
                      "status": htam.OUTCOME_NAMES.get(e["status"], str(e["status"])),
                      "gain": _num(e["gain"]), "backend": e["backend"] or "",
                      "cross_backend": bool(e["cross_backend"])}
                     for e in st.get("evidence") or []],
        "why": st.get("why") or "", "prompt_context": st.get("prompt_context") or "",
    }
