#!/usr/bin/env bash
# The htam demonstration, end to end on this machine:
#   1. installs the dependencies (tools/setup.sh) and builds (cmake into build/);
#   2. starts htamd on its embedded defaults (its memory under ./htam-data) in the background;
#   3. imports the lineages of every task but one into the memory: lineages of the backend this
#      machine has are evaluated for real (compile, verify, time), the others are recorded;
#   4. runs the reference agent (replay proposer: no model needed) on the held-back task, on the
#      best backend present (CUDA where nvidia-smi shows a GPU, the CPU otherwise), showing each
#      step and a final table;
#   5. stops the daemon cleanly and shows how to inspect what the memory learned.
#
# Environment (all optional):
#   HTAM_DEMO_TASK      the held-back task (default: the first task with a lineage for the backend)
#   HTAM_DEMO_BACKEND   cpu, cuda or hip (default: cuda with a GPU, cpu otherwise)
#   HTAM_DEMO_BUDGET    agent steps (default 6)
#   HTAM_DEMO_TASKS     task suite folder (default configs/tasks)
#   HTAM_DEMO_DATA      data folder of the daemon (default ./htam-data, the daemon's own default)
#   HTAM_DEMO_FRESH=1   start from an empty memory (moves an existing data folder aside)
#   HTAM_BUILD_DIR      build folder (default build)
#   HTAM_DEMO_SKIP_SETUP=1 / HTAM_DEMO_SKIP_BUILD=1   skip steps 1 (already installed / built)
#   HTAM_ENDPOINT       endpoint for the daemon to bind (default: its own, tcp://127.0.0.1:7878)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=/usr/bin/python3
BUILD=${HTAM_BUILD_DIR:-build}
TASKS=${HTAM_DEMO_TASKS:-configs/tasks}
DATA=${HTAM_DEMO_DATA:-./htam-data}
BUDGET=${HTAM_DEMO_BUDGET:-6}
ENDPOINT=${HTAM_ENDPOINT:-tcp://127.0.0.1:7878}
case "$BUILD" in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$ROOT/$BUILD ;; esac
export PYTHONPATH="$BUILD_ABS/python:$ROOT/sdk/python${PYTHONPATH:+:$PYTHONPATH}"
AGENT=("$PY" -m htam_agent)

say() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }

if [ "${HTAM_DEMO_SKIP_SETUP:-0}" != "1" ]; then
  say "1/5 install dependencies (tools/setup.sh)"
  tools/setup.sh
fi
if [ "${HTAM_DEMO_SKIP_BUILD:-0}" != "1" ]; then
  say "1/5 build (cmake into $BUILD/)"
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j"$(nproc)"
fi
HTAMD="$BUILD/daemon/htamd"
[ -x "$HTAMD" ] || { echo "demo: $HTAMD is missing: build first" >&2; exit 1; }

# The best backend present.
BACKEND=${HTAM_DEMO_BACKEND:-}
if [ -z "$BACKEND" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    BACKEND=cuda
  else
    BACKEND=cpu
  fi
fi

# The held-back task (or the one asked for): a sample with a clear path of improvements and a
# dead end (cpu_rowsum on the CPU, sgemm on CUDA), else the task with the longest lineage.
HOLD=${HTAM_DEMO_TASK:-}
if [ -z "$HOLD" ]; then
  HOLD=$("$PY" - "$TASKS" "$BACKEND" <<'EOF'
import sys
from htam_agent.lineage import discover_tasks
tasks = [t for t in discover_tasks(sys.argv[1]) if sys.argv[2] in t.lineages]
preferred = {"cpu": "cpu_rowsum", "cuda": "sgemm"}.get(sys.argv[2])
named = [t for t in tasks if t.name == preferred]
pick = named or sorted(tasks, key=lambda t: -len(t.lineages[sys.argv[2]].variants))
print(pick[0].name if pick else "")
EOF
)
fi
if [ -z "$HOLD" ]; then
  echo "demo: no task in $TASKS has a $BACKEND lineage to replay" >&2
  exit 1
fi
OTHERS=()
for d in "$TASKS"/*/; do
  d=${d%/}
  [ -f "$d/task.json" ] || continue
  [ "$(basename "$d")" = "$HOLD" ] && continue
  OTHERS+=("$d")
done

if [ "${HTAM_DEMO_FRESH:-0}" = "1" ] && [ -e "$DATA" ]; then
  mv "$DATA" "$DATA.old.$(date +%s)"
fi

say "2/5 start htamd (data in $DATA, endpoint $ENDPOINT)"
mkdir -p "$DATA"
LOG="$DATA/demo-htamd.log"
ARGS=()
[ "$DATA" != "./htam-data" ] && ARGS+=(--general.data_dir "$DATA")
[ "$TASKS" != "configs/tasks" ] && ARGS+=(--server.tasks_dir "$TASKS")
[ "$ENDPOINT" != "tcp://127.0.0.1:7878" ] && ARGS+=(--server.bind "$ENDPOINT")
"$HTAMD" "${ARGS[@]}" >>"$LOG" 2>&1 &
HTAMD_PID=$!
stop_daemon() {
  if [ -n "${HTAMD_PID:-}" ] && kill -0 "$HTAMD_PID" 2>/dev/null; then
    kill -TERM "$HTAMD_PID"
    local rc=0
    wait "$HTAMD_PID" || rc=$?
    HTAMD_PID=""
    return $rc
  fi
  HTAMD_PID=""
}
trap 'stop_daemon || true' EXIT
trap 'exit 130' INT TERM
echo "htamd pid $HTAMD_PID, log $LOG"
if ! "${AGENT[@]}" wait-ready --endpoint "$ENDPOINT" --within 60; then
  echo "demo: htamd did not come up; its log:" >&2
  tail -n 30 "$LOG" >&2
  exit 1
fi

say "3/5 import the lineages of the other tasks (${#OTHERS[@]} tasks; $HOLD is held back)"
# Imported once per data folder: a second run keeps the memory and only runs the agent again.
MARK="$DATA/demo-imported-$HOLD-$BACKEND"
if [ -f "$MARK" ]; then
  echo "already imported into $DATA (remove $MARK, or set HTAM_DEMO_FRESH=1, to import again)"
elif [ ${#OTHERS[@]} -gt 0 ]; then
  echo "-- $BACKEND lineages: every variant evaluated by the daemon (compile, verify, time)"
  "${AGENT[@]}" import-lineage --endpoint "$ENDPOINT" --backend "$BACKEND" "${OTHERS[@]}"
  RECORDED=()
  for b in cpu cuda hip; do [ "$b" != "$BACKEND" ] && RECORDED+=(--backend "$b"); done
  echo "-- other backends' lineages: their measured outcomes recorded (unverified)"
  "${AGENT[@]}" import-lineage --endpoint "$ENDPOINT" --recorded "${RECORDED[@]}" "${OTHERS[@]}" || true
  date -u +%FT%TZ > "$MARK"
fi

say "4/5 the agent on the held-back task $HOLD ($BACKEND, budget $BUDGET, replay proposer)"
SESSION_JSON="$DATA/demo-session.json"
"${AGENT[@]}" run --endpoint "$ENDPOINT" --tasks-dir "$TASKS" --task "$HOLD" \
  --backend "$BACKEND" --budget "$BUDGET" --proposer replay --json "$SESSION_JSON"
SESSION=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["session_id"])' "$SESSION_JSON")

say "5/5 stop htamd"
rc=0
stop_daemon || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "demo: htamd exited with status $rc; its log:" >&2
  tail -n 30 "$LOG" >&2
  exit 1
fi
echo "htamd stopped cleanly; the memory is in $DATA"
CLI="$BUILD/tools/cli/htam"
STORE_ARG=""
[ "$DATA" != "./htam-data" ] && STORE_ARG=" --data-dir $DATA"
if [ -x "$CLI" ]; then
  echo
  echo "\$ $CLI$STORE_ARG trajectory $SESSION"
  "$CLI" --data-dir "$DATA" trajectory "$SESSION" || true
fi
cat <<EOF

Inspect what the memory learned (the htam CLI reads the store, also while htamd runs):
  $CLI$STORE_ARG status              # counts: tasks, sessions, transitions, strategies
  $CLI$STORE_ARG directions          # directions with their learned statistics and edges
  $CLI$STORE_ARG trajectory $SESSION    # the steps of the agent's session above
Run it again (the memory persists and keeps learning):  tools/demo.sh
With a model instead of the replay: see docs/agent.md (htam-agent run --proposer llm).
EOF
