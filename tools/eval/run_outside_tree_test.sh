#!/bin/bash
# htam-eval started outside the source tree (a temporary working directory) with a compile cache
# folder that does not exist yet: it finds the kernel ABI headers and the worker htam ships beside
# it, creates the cache, and judges the CPU task's reference Ok; a second run hits the cache.
#   usage: run_outside_tree_test.sh HTAM_EVAL TASK_DIR
set -euo pipefail
cli=$1 task=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
for run in 1 2; do
  out=$("$cli" --backend cpu --task "$task" --reference --seeds 1 --reps 3 \
          --cache "$tmp/new/cache" 2>"$tmp/err") || {
    echo "run $run: htam-eval failed"; cat "$tmp/err"; exit 1; }
  line=$(printf '%s\n' "$out" | grep '"status"' | tail -1)
  case "$line" in
    *'"status":"Ok"'*) ;;
    *) echo "run $run: not Ok: $line"; exit 1 ;;
  esac
done
[ -n "$(ls -A "$tmp/new/cache")" ] || { echo "the cache folder is empty"; exit 1; }
[ ! -e "$tmp/htam-data" ] || {
  echo "htam-eval wrote htam-data into the working directory"; exit 1; }
echo "htam-eval: Ok outside the source tree, cache created"
