#!/bin/bash
# The installed C++ SDK as a client project gets it: `cmake --install --component htam-dev` into a
# temporary prefix, a project outside the tree (sdk_client/) configured with find_package(htam)
# against that prefix alone, built, and run: against an endpoint where no daemon listens (a
# Status Unavailable, of the SDK's own header) and against a live htamd (its Hello answer).
#   usage: sdk_install_test.sh BUILD_DIR HTAMD
set -euo pipefail
BUILD=$1 HTAMD=$2
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/htam-sdk-XXXXXX)
trap 'kill $PID 2>/dev/null || true; rm -rf "$T"' EXIT
PID=
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$BUILD" --prefix "$T/prefix" --component htam-dev > "$T/install.log" ||
  { cat "$T/install.log"; fail "cmake --install --component htam-dev"; }
# Only public headers: nothing under the prefix names a header of the source tree.
! grep -rn '#include "base/\|#include "daemon/\|#include "backends/' "$T/prefix/include" ||
  fail "an installed header includes an internal one"
cmake -S "$HERE/sdk_client" -B "$T/client" -DCMAKE_PREFIX_PATH="$T/prefix" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$T/configure.log" 2>&1 ||
  { cat "$T/configure.log"; fail "find_package(htam) against the installed prefix"; }
cmake --build "$T/client" > "$T/build.log" 2>&1 || { cat "$T/build.log"; fail "building the client"; }
# It links the installed library, not the build tree's.
# (ldd's output taken whole first: `grep -q` stops reading early, and with pipefail ldd's SIGPIPE
# would fail the check at random.)
LIBS=$(ldd "$T/client/sdk_client")
grep -q "$T/prefix/.*libhtam_client.so" <<<"$LIBS" ||
  { echo "$LIBS"; fail "the client does not use the installed libhtam_client.so"; }

"$T/client/sdk_client" "ipc://$T/nobody.sock" unavailable || fail "no daemon: expected Unavailable"

mkdir -p "$T/data"
"$HTAMD" --general.data_dir "$T/data" --server.bind "ipc://$T/htamd.sock" --eval.backends cpu \
  > "$T/htamd.log" 2>&1 &
PID=$!
for _ in $(seq 1 300); do
  [ -S "$T/htamd.sock" ] && break
  kill -0 $PID 2>/dev/null || { cat "$T/htamd.log"; fail "htamd exited"; }
  sleep 0.1
done
"$T/client/sdk_client" "ipc://$T/htamd.sock" answer || { cat "$T/htamd.log"; fail "no Hello answer"; }
echo "PASS: installed SDK found by find_package(htam), client built and answered"
