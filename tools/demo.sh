#!/usr/bin/env bash
# The htam demonstration, end to end on this machine:
#   1. installs the dependencies (tools/setup.sh) and builds what it needs (cmake into build/);
#   2. starts htamd on its embedded defaults (its memory under ./htam-data) in the background,
#      with the measured world's CPU kernels as its tasks;
#   3. runs an agent that follows the memory's advice on one of them (tools/demo_agent.py): each
#      step it applies the first advised strategy that changes the kernel, and htamd compiles,
#      verifies and times the result on this CPU and records the step;
#   4. stops the daemon cleanly and shows how to inspect what the memory learned.
# Run it twice: the second run starts from what the first taught the memory, and says whether it
# reached its best in fewer steps.
#
# Environment (all optional):
#   HTAM_DEMO_TASK      the task (default world_cpu_elemwise_n64k; any world_cpu_* task)
#   HTAM_DEMO_BUDGET    agent steps (default 6)
#   HTAM_DEMO_DATA      data folder of the daemon (default ./htam-data, the daemon's own default)
#   HTAM_DEMO_FRESH=1   start from an empty memory (moves an existing data folder aside)
#   HTAM_BUILD_DIR      build folder (default build)
#   HTAM_DEMO_SKIP_SETUP=1 / HTAM_DEMO_SKIP_BUILD=1   skip step 1 (already installed / built)
#   HTAM_ENDPOINT       endpoint for the daemon to bind (default: its own, tcp://127.0.0.1:7878)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=/usr/bin/python3
BUILD=${HTAM_BUILD_DIR:-build}
DATA=${HTAM_DEMO_DATA:-./htam-data}
BUDGET=${HTAM_DEMO_BUDGET:-6}
TASK=${HTAM_DEMO_TASK:-world_cpu_elemwise_n64k}
ENDPOINT=${HTAM_ENDPOINT:-tcp://127.0.0.1:7878}
case "$BUILD" in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$ROOT/$BUILD ;; esac
export PYTHONPATH="$BUILD_ABS/python:$ROOT/sdk/python${PYTHONPATH:+:$PYTHONPATH}"

say() { printf '\n\033[1m== %s ==\033[0m\n' "$*"; }

if [ "${HTAM_DEMO_SKIP_SETUP:-0}" != "1" ]; then
  say "1/4 install dependencies (tools/setup.sh)"
  tools/setup.sh
fi
if [ "${HTAM_DEMO_SKIP_BUILD:-0}" != "1" ]; then
  say "1/4 build (cmake into $BUILD/)"
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target htamd htam htam-eval-worker htam_backend_cpu \
    htam_python
fi
HTAMD="$BUILD/daemon/htamd"
[ -x "$HTAMD" ] || { echo "demo: $HTAMD is missing: build first" >&2; exit 1; }

if [ "${HTAM_DEMO_FRESH:-0}" = "1" ] && [ -e "$DATA" ]; then
  mv "$DATA" "$DATA.old.$(date +%s)"
fi

say "2/4 start htamd (data in $DATA, endpoint $ENDPOINT)"
mkdir -p "$DATA"
chmod 0755 "$DATA"  # the sandboxed evaluation workers (another user) reach its compile cache
TASKS="$DATA/demo-tasks"  # the world's CPU kernels as htamd tasks (written each run: cheap)
"$PY" tools/demo_agent.py tasks "$TASKS"
LOG="$DATA/demo-htamd.log"
ARGS=(--server.tasks_dir "$TASKS")
[ "$DATA" != "./htam-data" ] && ARGS+=(--general.data_dir "$DATA")
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
if ! "$PY" -m htam_agent wait-ready --endpoint "$ENDPOINT" --within 60; then
  echo "demo: htamd did not come up; its log:" >&2
  tail -n 30 "$LOG" >&2
  exit 1
fi

say "3/4 an agent that follows the memory's advice on $TASK (budget $BUDGET; evaluated here)"
"$PY" tools/demo_agent.py run --endpoint "$ENDPOINT" --task "$TASK" --budget "$BUDGET" \
  --history "$DATA/demo-runs.jsonl" | tee "$DATA/demo-last-run.txt"
SESSION=$(sed -n 's/^session \([0-9]*\): .*/\1/p' "$DATA/demo-last-run.txt" | head -n 1)

say "4/4 stop htamd"
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
cat <<EOF

Inspect what the memory learned (the htam CLI reads the store, also while htamd runs):
  $CLI$STORE_ARG status              # counts: tasks, sessions, transitions, strategies
  $CLI$STORE_ARG strategies --sort effect --limit 5   # what it learned, best measured first
  $CLI$STORE_ARG trajectory $SESSION    # the steps of the agent's session above
Run it again (the memory persists and keeps learning):  tools/demo.sh
With a model instead of this agent: see docs/agent.md (htam-agent run --proposer llm).
EOF
