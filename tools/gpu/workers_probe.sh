#!/bin/bash
# Which worker sandbox settings let the CUDA runtime start on this host (a worker that cannot use
# its GPU logs it at once). Prints one line per setting; the first that works is written to
# $OUT/sandbox_args for tools/gpu/workers_run.sh (WORKER_ARGS).
set -u
ROOT=$PWD; S=$ROOT/.gpu-stage; OUT=${OUT:-/tmp/htam-gpu-out}; mkdir -p "$OUT"
LIBS=/tmp/htam-gpu-lib; mkdir -p $LIBS && tar -C $LIBS -xzf "$S/lib.tar.gz"
export LD_LIBRARY_PATH=$LIBS:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
chmod -R a+rX "$ROOT" $LIBS 2>/dev/null
ls -la /dev/nvidia* 2>&1 | head -8; id; cat /proc/self/status | grep -i seccomp
: > "$OUT/sandbox_args"
for args in "" "--eval.sandbox_network false" "--eval.sandbox_user root" "--eval.sandbox_readonly_fs false" \
            "--eval.sandbox_network false --eval.sandbox_user root --eval.sandbox_readonly_fs false"; do
  d=$(mktemp -d); chmod 755 "$d"
  timeout -s KILL 8 "$S/htam-worker" --general.data_dir "$d" --worker.connect "ipc://$d/none.sock" \
    --eval.backends cuda --eval.sdk_include_dir "$ROOT/sdk/include" --eval.worker_path "$S/htam-eval-worker" \
    --eval.plugin_dir "$S" $args > "$d/log" 2>&1
  if grep -q "cannot run here\|no device can evaluate" "$d/log"; then v="FAILS: $(grep -m1 'cannot run here' "$d/log" | cut -c1-200)"; else v="works"; fi
  echo "sandbox [${args:-defaults}]: $v"
  if [ "$v" = works ] && [ ! -s "$OUT/sandbox_args" ]; then
    echo "${args:-(defaults)}" > "$OUT/sandbox_args"; tail -3 "$d/log"
  fi
done
