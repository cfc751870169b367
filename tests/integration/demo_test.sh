#!/usr/bin/env bash
# tools/demo.sh as README.md promises it: run twice on a fresh memory (a temporary data folder, a
# free port; the build present), the second run follows what the first taught the memory and
# reaches the best in fewer steps, and says so.
#
# Usage: tests/integration/demo_test.sh BUILD_DIR
set -euo pipefail
BUILD=$(readlink -f "${1:?usage: demo_test.sh BUILD_DIR}")
cd "$(dirname "$0")/../.."
TMP=$(mktemp -d /tmp/htam-demo-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export HTAM_DEMO_SKIP_SETUP=1 HTAM_DEMO_SKIP_BUILD=1 HTAM_BUILD_DIR="$BUILD" \
       HTAM_DEMO_DATA="$TMP/data" HTAM_ENDPOINT="tcp://127.0.0.1:$PORT"
for run in 1 2; do
  tools/demo.sh >"$TMP/run$run.log" 2>&1 || { cat "$TMP/run$run.log" >&2; echo "demo_test: run $run failed" >&2; exit 1; }
done
grep -q "^Run 1 on .*starting from the seed taxonomy" "$TMP/run1.log" ||
  { cat "$TMP/run1.log" >&2; echo "demo_test: run 1 did not report itself" >&2; exit 1; }
grep -q "^The memory at work: this run came within 10% of the best after [0-9]* step(s); run 1, with no experience, needed" "$TMP/run2.log" ||
  { cat "$TMP/run2.log" >&2; echo "demo_test: run 2 did not reach the best in fewer steps" >&2; exit 1; }
# Every candidate the agent applied was one of the memory's advised strategies, evaluated by htamd.
grep -Eq '^ +1  [a-z-]+ +[a-z0-9-]+: [A-Z0-9_]+=[0-9]+ \(advice #[0-9]+\) +ok ' "$TMP/run2.log" ||
  { cat "$TMP/run2.log" >&2; echo "demo_test: run 2's first step was not an evaluated advised strategy" >&2; exit 1; }
grep -h "^The memory at work" "$TMP/run2.log"
