#!/bin/bash
# Which layer of the worker sandbox stops the CUDA runtime: the describe step of htam-eval-worker
# run directly, then under each layer alone (environment cleared, PID/network/mount namespace,
# resource limits). One line per case.
set -u
ROOT=$PWD; S=$ROOT/.gpu-stage
LIBS=/tmp/htam-gpu-lib; mkdir -p $LIBS && tar -C $LIBS -xzf "$S/lib.tar.gz"
export LD_LIBRARY_PATH=$LIBS:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
W="$S/htam-eval-worker --plugin $S/libhtam_backend_cuda.so --device 0 --sdk-include $ROOT/sdk/include --describe"
try() { local name=$1; shift; printf '%-10s ' "$name"; timeout -s KILL 20 "$@" 3>&1 2>/dev/null | tr -d '\n' | grep -o '"can_run":[a-z]*\|"notes":"[^"]*' | tr '\n' ' '; echo; }
try direct $W
try env-i env -i LD_LIBRARY_PATH=$LD_LIBRARY_PATH $W
try pidns unshare -p -f $W
try netns unshare -n $W
try mntns unshare -m $W
try fsize prlimit --fsize=536870912 $W
try nproc prlimit --nproc=512 $W
try cpu prlimit --cpu=900 $W
try core prlimit --core=0 $W
try nobody setpriv --reuid=nobody --regid=nogroup --clear-groups $W
try pidns+proc unshare -p -f -m --mount-proc $W
