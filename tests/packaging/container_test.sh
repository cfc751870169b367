#!/usr/bin/env bash
# The htamd container image (tools/packaging/docker/htamd.Dockerfile), built and run with podman
# (Debian's package; as root or rootless). Where podman can pull the image's bases from a
# registry, htamd.Dockerfile is built as it is, both stages. Where no registry is reachable, the
# script prints podman's error and tests the image another way: the bookworm-slim base is made
# with debootstrap from the Debian mirror (kept in podman's storage as
# localhost/htam-test/debian:bookworm-slim for later runs), and the Dockerfile's runtime stage —
# its second FROM to the end, verbatim but for the base's name and the packages' source — is built
# on the packages `cpack -G DEB` makes from BUILD_DIR (the same packages the first stage makes).
# Either way the image then runs as an operator runs it: its ENTRYPOINT and CMD unchanged, the
# CURVE keys (htam-keygen) mounted at /etc/htam/keys, ports 7878 and 9464 published: /ready must
# answer 200, an authorized client must get htamd's status (CPU evaluation present), and a
# client without a key must get nothing. worker.Dockerfile (NVIDIA's CUDA image) is not built.
#
# Usage: tests/packaging/container_test.sh BUILD_DIR. Exit 77 (ctest: skipped) without podman.
set -euo pipefail
BUILD=$(readlink -f "${1:?usage: container_test.sh BUILD_DIR}")
SRC=$(cd "$(dirname "$0")/../.." && pwd)
say() { printf '== container_test: %s\n' "$*"; }
fail() { printf 'container_test: FAIL: %s\n' "$*" >&2; exit 1; }
command -v podman >/dev/null || { echo "container_test: podman is not installed (tools/setup.sh)"; exit 77; }

BASE_TAG=localhost/htam-test/debian:bookworm-slim
IMAGE=localhost/htam-test/htamd:test
NAME=htam-container-test-$$
TMP=$(mktemp -d /tmp/htam-container-test.XXXXXX)
CID=""
cleanup() {
  set +e
  [ -n "$CID" ] && podman rm -f "$CID" >/dev/null 2>&1
  podman rm -f "$NAME" >/dev/null 2>&1
  podman rmi -f "$IMAGE" >/dev/null 2>&1
  rm -rf "$TMP"
}
trap cleanup EXIT

exec 9>/tmp/htam-container-test.lock
flock 9
DOCKERFILE="$SRC/tools/packaging/docker/htamd.Dockerfile"
if podman pull -q docker.io/library/debian:bookworm-slim >"$TMP/pull.log" 2>&1 &&
   podman pull -q docker.io/library/debian:bookworm >>"$TMP/pull.log" 2>&1; then
  say "podman build -f $DOCKERFILE (both stages, from the registry's bases)"
  podman build --isolation chroot --network host -f "$DOCKERFILE" -t "$IMAGE" "$SRC" >"$TMP/build.log" 2>&1 ||
    { tail -n 40 "$TMP/build.log" >&2; fail "podman build failed"; }
else
  say "no registry here: $(grep -m1 -i 'error' "$TMP/pull.log" || tail -n 1 "$TMP/pull.log")"
  if ! podman image exists "$BASE_TAG"; then
    command -v debootstrap >/dev/null || fail "debootstrap is not installed (tools/setup.sh)"
    say "making $BASE_TAG with debootstrap (minbase, bookworm, deb.debian.org)"
    debootstrap --variant=minbase bookworm "$TMP/rootfs" http://deb.debian.org/debian \
      >"$TMP/debootstrap.log" 2>&1 || { tail -n 20 "$TMP/debootstrap.log" >&2; fail "debootstrap failed"; }
    tar -C "$TMP/rootfs" -c . | podman import - "$BASE_TAG" >/dev/null
    rm -rf "$TMP/rootfs"
  fi
  say "cpack -G DEB, then the runtime stage of htamd.Dockerfile on $BASE_TAG"
  mkdir -p "$TMP/ctx"
  (cd "$BUILD" && cpack -G DEB -B "$TMP/ctx/debs" >"$TMP/cpack.log" 2>&1) ||
    { tail -n 20 "$TMP/cpack.log" >&2; fail "cpack failed"; }
  rm -rf "$TMP/ctx/debs/_CPack_Packages"
  awk 'seen { print } /^FROM / { n++; if (n == 2) { seen = 1; print } }' "$DOCKERFILE" |
    sed -e "s#^FROM debian:bookworm-slim#FROM $BASE_TAG#" \
        -e 's#^COPY --from=build /debs/\*.deb /tmp/debs/#COPY debs/*.deb /tmp/debs/#' \
        >"$TMP/ctx/Dockerfile"
  grep -q "^FROM $BASE_TAG" "$TMP/ctx/Dockerfile" && grep -q '^COPY debs/' "$TMP/ctx/Dockerfile" ||
    fail "htamd.Dockerfile's runtime stage changed shape: $(cat "$TMP/ctx/Dockerfile")"
  podman build --isolation chroot --network host -t "$IMAGE" "$TMP/ctx" >"$TMP/build.log" 2>&1 ||
    { tail -n 40 "$TMP/build.log" >&2; fail "podman build (runtime stage) failed"; }
fi

say "run the image: its ENTRYPOINT and CMD, keys mounted, ports published"
mkdir -p "$TMP/keys"
KEYGEN=${HTAM_KEYGEN:-$BUILD/daemon/server/htam-keygen}
"$KEYGEN" "$TMP/keys" server ops worker >/dev/null
# The allowed keys: `public = KEY` lines as htam-keygen writes them (docs/operations.md).
grep -h '^public' "$TMP/keys/ops.pub" >"$TMP/keys/clients"
grep -h '^public' "$TMP/keys/worker.pub" >"$TMP/keys/workers"
chmod 0644 "$TMP/keys"/*
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ready_code() {  # the HTTP status of /ready at $1 (0: no answer)
  /usr/bin/python3 -c "import urllib.request
try: print(urllib.request.urlopen('http://$1/ready', timeout=2).status)
except Exception: print(0)"
}
IN_NS=()  # how to reach the daemon's network (empty: this host's, through published ports)
P_CLIENT=$(free_port)
P_METRICS=$(free_port)
if CID=$(podman run -d --name "$NAME" -p "127.0.0.1:$P_CLIENT:7878" -p "127.0.0.1:$P_METRICS:9464" \
           -v "$TMP/keys:/etc/htam/keys:ro" "$IMAGE" 2>"$TMP/run.err"); then
  METRICS=127.0.0.1:$P_METRICS
  alive() { [ "$(podman inspect -f '{{.State.Running}}' "$CID")" = true ]; }
  logs() { podman logs "$CID"; }
else
  # podman cannot start containers here (the error says why; in an unprivileged container, crun
  # may not set the rlimits it is given). The image's entry point then runs another way: the
  # image's own file system (a created, mounted container), its ENTRYPOINT and CMD as the image
  # declares them, as its USER, in its WORKDIR, in network, mount and PID namespaces of its own.
  say "podman run: $(tr '\n' ' ' <"$TMP/run.err")"
  say "running the image's entry point in its own namespaces (chroot into the image)"
  CID=$(podman create "$IMAGE")
  ROOTFS=$(podman mount "$CID")
  ARGV=$(podman image inspect -f '{{json .Config.Entrypoint}}|{{json .Config.Cmd}}' "$IMAGE" |
         /usr/bin/python3 -c 'import json,shlex,sys; e,c=sys.stdin.read().strip().split("|",1)
print(" ".join(shlex.quote(x) for x in json.loads(e)+(json.loads(c) or [])))')
  USER_OF=$(podman image inspect -f '{{.Config.User}}' "$IMAGE")
  WD=$(podman image inspect -f '{{.Config.WorkingDir}}' "$IMAGE")
  say "entry point: $ARGV (user $USER_OF, in $WD)"
  mkdir -p "$ROOTFS/etc/htam/keys"
  unshare --net --mount --pid --fork --kill-child bash -c "
    ip link set lo up
    mount --bind '$TMP/keys' '$ROOTFS/etc/htam/keys'
    mount -t proc proc '$ROOTFS/proc'
    mount --rbind /dev '$ROOTFS/dev'
    exec chroot --userspec=$USER_OF:$USER_OF '$ROOTFS' /bin/sh -c 'cd $WD && exec $ARGV'
  " >"$TMP/htamd.log" 2>&1 &
  NS_PID=$!
  for _ in $(seq 1 50); do
    CHILD=$(pgrep -P "$NS_PID" | head -n 1 || true)
    [ -n "$CHILD" ] && break
    sleep 0.1
  done
  [ -n "$CHILD" ] || fail "the entry point did not start: $(cat "$TMP/htamd.log")"
  IN_NS=(nsenter --target "$CHILD" --net)
  P_CLIENT=7878
  METRICS=127.0.0.1:9464
  ready_code() {
    "${IN_NS[@]}" /usr/bin/python3 -c "import urllib.request
try: print(urllib.request.urlopen('http://$1/ready', timeout=2).status)
except Exception: print(0)"
  }
  alive() { kill -0 "$NS_PID" 2>/dev/null; }
  logs() { cat "$TMP/htamd.log"; }
  stop_ns() {  # htamd first (SIGTERM: a clean stop), then the namespace's init if it lingers
    kill -TERM "$CHILD" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$NS_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$NS_PID" 2>/dev/null || true
    wait "$NS_PID" 2>/dev/null || true
    podman umount "$CID" >/dev/null 2>&1 || true
  }
  trap 'set +e; stop_ns; cleanup' EXIT
fi
ready=""
for _ in $(seq 1 120); do
  if [ "$(ready_code "$METRICS")" = 200 ]; then ready=1; break; fi
  alive || break
  sleep 1
done
[ -n "$ready" ] || { logs >&2; fail "/ready never answered 200"; }
ENDPOINT="tcp://127.0.0.1:$P_CLIENT"
PYTHONPATH="$BUILD/python" "${IN_NS[@]}" /usr/bin/python3 - "$ENDPOINT" "$TMP/keys" <<'EOF' || { logs >&2; fail "client checks failed"; }
import sys
import htam
endpoint, keys = sys.argv[1], sys.argv[2]
with htam.Client(endpoint, timeout_s=20, server_public_key_file=f"{keys}/server.pub",
                 client_key_file=f"{keys}/ops.key") as c:
    hello = c.hello()
    assert "cpu" in hello["backends"], hello
    assert "# memory" in c.status(), "no memory section"
try:
    htam.Client(endpoint, timeout_s=2, retries=0).close()
    raise SystemExit("a client without a key got an answer")
except htam.HtamTimeout:
    pass
print("container_test: authorized client answered (backends %s); keyless client refused"
      % ",".join(hello["backends"]))
EOF
say "passed"
