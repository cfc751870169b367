#!/usr/bin/env bash
# The Debian packages as an operator gets them: `cpack -G DEB` builds htamd, htam-worker,
# htam-tools and python3-htam from the build folder; their metadata is checked (dependencies on
# Debian's libraries, conffile, maintainer scripts); they are installed with apt on this machine
# (real dpkg: dependencies resolved, postinst creates the user htam); the installed htamd runs as
# a foreground service under the user htam (no systemd in a container) with the packaged
# configuration, and the demo client (htam-agent, replay proposer) runs a session against it.
# Then an upgrade (the same build as version +1, an edited conffile kept, the store reopened
# with its session) and a purge that leaves nothing of the packages on the machine.
#
# Installing system-wide is only done where it can be undone cleanly: as root, with no htam
# package installed before (never replaces an operator's installation), one run at a time
# (flock). Otherwise the packages are unpacked with `dpkg -x` into a temporary root and run
# from there (no postinst, no user: as the current user), and the script says so.
#
# Usage: tests/packaging/deb_test.sh BUILD_DIR
set -euo pipefail
BUILD=$(readlink -f "${1:?usage: deb_test.sh BUILD_DIR}")
PKGS=(htamd htam-worker htam-tools python3-htam)
APT=(apt-get -y -q -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confold)
say() { printf '== deb_test: %s\n' "$*"; }
fail() { printf 'deb_test: FAIL: %s\n' "$*" >&2; exit 1; }

exec 9>/tmp/htam-deb-test.lock
flock 9
TMP=$(mktemp -d /tmp/htam-deb-test.XXXXXX)
chmod 0755 "$TMP"
HTAMD_PID=""
MODE=""
MADE_STORE=0
cleanup() {
  set +e
  if [ -n "$HTAMD_PID" ] && kill -0 "$HTAMD_PID" 2>/dev/null; then
    kill -TERM "$HTAMD_PID"
    wait "$HTAMD_PID"
  fi
  if [ "$MODE" = system ]; then
    DEBIAN_FRONTEND=noninteractive "${APT[@]}" purge "${PKGS[@]}" >"$TMP/purge.log" 2>&1 ||
      cat "$TMP/purge.log" >&2
  fi
  if [ "${MADE_STORE:-0}" = 1 ]; then rm -rf /var/lib/htam; fi  # only a store this test made
  rm -rf "$TMP"
}
trap cleanup EXIT

say "cpack -G DEB"
VERSION=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
(cd "$BUILD" && cpack -G DEB -B "$TMP/debs" >"$TMP/cpack.log" 2>&1) ||
  { cat "$TMP/cpack.log" >&2; fail "cpack failed"; }
for p in "${PKGS[@]}"; do
  ls "$TMP/debs/${p}_${VERSION}_"*.deb >/dev/null 2>&1 || fail "no ${p}_${VERSION}_*.deb"
done
deb() { ls "$TMP/debs/${1}_${VERSION}_"*.deb; }

say "package metadata"
depends() { dpkg-deb -f "$(deb "$1")" Depends; }
for lib in libzmq5 liblmdb0 libboost-program-options; do
  case "$(depends htamd)" in *"$lib"*) ;; *) fail "htamd does not depend on $lib: $(depends htamd)" ;; esac
done
for p in python3-zmq python3-flatbuffers; do
  case "$(depends python3-htam)" in *"$p"*) ;; *) fail "python3-htam does not depend on $p" ;; esac
done
[ "$(dpkg-deb -f "$(deb python3-htam)" Architecture)" = all ] || fail "python3-htam is not Architecture: all"
[ "$(dpkg-deb -I "$(deb htamd)" conffiles)" = /etc/htam/htamd.conf ] || fail "htamd.conf is not a conffile"
case "$(dpkg-deb -I "$(deb htamd)" postinst)" in *useradd*) ;; *) fail "htamd postinst creates no user" ;; esac
# (Listings go to files first: `grep -q` on a pipe would stop dpkg-deb with SIGPIPE.)
for p in "${PKGS[@]}"; do dpkg-deb -c "$(deb "$p")" >"$TMP/$p.list"; done
grep -q ' ./usr/lib/systemd/system/htamd.service$' "$TMP/htamd.list" || fail "no htamd.service"
grep -q ' ./usr/lib/htam/backends/libhtam_backend_cpu.so$' "$TMP/htam-worker.list" ||
  fail "no CPU plugin in htam-worker"
grep -q ' ./etc/htam/worker.conf$' "$TMP/htam-worker.list" || fail "no worker.conf in htam-worker"
# The benchmark harness ships with htam-bench, not in the SDK's package.
grep -q '/dist-packages/htam_bench/world_bench.py$' "$TMP/htam-tools.list" ||
  fail "no htam_bench in htam-tools"
if grep -q 'htam_bench\|/htam_agent/world_\|/htam_agent/quality' "$TMP/python3-htam.list"; then
  fail "python3-htam carries the benchmark harness"
fi
case "$(depends htam-tools)" in *python3-htam*) ;; *) fail "htam-tools does not depend on python3-htam" ;; esac

installed_before=""
for p in "${PKGS[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ]; then
    installed_before+=" $p"
  fi
done
if [ "$(id -u)" -eq 0 ] && [ -z "$installed_before" ] && [ "${HTAM_DEB_TEST_UNPACK:-0}" != 1 ]; then
  MODE=system
else
  MODE=unpack
  say "unpacking with dpkg -x instead of installing: $([ "$(id -u)" -ne 0 ] && echo "not root" ||
    { [ -n "$installed_before" ] && echo "already installed here:$installed_before"; } || echo "HTAM_DEB_TEST_UNPACK=1")"
fi

if [ "$MODE" = system ]; then
  say "apt-get install ./*.deb (real dpkg, dependencies from Debian)"
  DEBIAN_FRONTEND=noninteractive "${APT[@]}" install --no-install-recommends \
    $(for p in "${PKGS[@]}"; do deb "$p"; done) >"$TMP/install.log" 2>&1 ||
    { cat "$TMP/install.log" >&2; fail "install failed"; }
  ROOT=""
  getent passwd htam >/dev/null || fail "postinst did not create the user htam"
  [ "$(stat -c %U /var/lib/htam)" = htam ] || fail "/var/lib/htam is not owned by htam"
  RUN=(/usr/bin/setpriv --reuid=htam --regid=htam --init-groups --)
  OWNER=htam
else
  for p in "${PKGS[@]}"; do dpkg -x "$(deb "$p")" "$TMP/root"; done
  ROOT="$TMP/root"
  RUN=()
  OWNER=$(id -un)
fi
PREFIX="$ROOT/usr"
CONF="$ROOT/etc/htam/htamd.conf"
[ -f "$CONF" ] || fail "no $CONF"

DATA="$TMP/data"
SOCK_DIR="$TMP/run"
mkdir -p "$DATA" "$SOCK_DIR" "$TMP/cwd"
chown "$OWNER" "$DATA" "$SOCK_DIR"
ENDPOINT="ipc://$SOCK_DIR/htamd.sock"
start_htamd() {
  # From an unrelated folder, with the packaged configuration; evaluation on this host's CPU.
  (cd "$TMP/cwd" && exec env -i PATH=/usr/bin:/bin "${RUN[@]}" "$PREFIX/bin/htamd" --config "$CONF" \
    --general.data_dir "$DATA" --server.bind "$ENDPOINT" --eval.backends cpu \
    >>"$TMP/htamd.log" 2>&1) &
  HTAMD_PID=$!
  "$PREFIX/bin/htam-agent" wait-ready --endpoint "$ENDPOINT" --within 90 >/dev/null ||
    { cat "$TMP/htamd.log" >&2; fail "installed htamd did not come up"; }
}
stop_htamd() {
  kill -TERM "$HTAMD_PID"
  local rc=0
  wait "$HTAMD_PID" || rc=$?
  HTAMD_PID=""
  [ "$rc" -eq 0 ] || { cat "$TMP/htamd.log" >&2; fail "htamd exited with $rc on SIGTERM"; }
}

say "installed htamd as a foreground service ($MODE), demo client against it"
start_htamd
"$PREFIX/bin/htam-agent" run --endpoint "$ENDPOINT" --task cpu_relu --backend cpu --budget 2 \
  --proposer replay --json "$TMP/session.json" >"$TMP/agent.log" 2>&1 ||
  { cat "$TMP/agent.log" "$TMP/htamd.log" >&2; fail "htam-agent run failed"; }
SESSION=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["session_id"])' "$TMP/session.json")
"$PREFIX/bin/htam" --connect "$ENDPOINT" status >"$TMP/status.txt" || fail "htam status failed"
grep -q '^jobs_total: [1-9]' "$TMP/status.txt" || { cat "$TMP/status.txt" >&2; fail "no evaluation ran"; }
stop_htamd
steps_of() {
  "$PREFIX/bin/htam" --data-dir "$DATA" --json trajectory "$SESSION" >"$TMP/trajectory.json" &&
    /usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["steps"]))' "$TMP/trajectory.json"
}
STEPS=$(steps_of)
[ "$STEPS" -ge 1 ] || fail "session $SESSION has no recorded step"

if [ "$MODE" = system ]; then
  say "upgrade (the same build as the next version): edited conffile kept, store reopened"
  echo "# edited by the operator" >>/etc/htam/htamd.conf
  NEXT=$(echo "$VERSION" | awk -F. '{print $1"."$2"."$3+1}')
  (cd "$BUILD" && cpack -G DEB -B "$TMP/debs-next" -D CPACK_PACKAGE_VERSION="$NEXT" \
    >"$TMP/cpack-next.log" 2>&1) || { cat "$TMP/cpack-next.log" >&2; fail "cpack (next) failed"; }
  DEBIAN_FRONTEND=noninteractive "${APT[@]}" install --no-install-recommends \
    "$TMP"/debs-next/*.deb >"$TMP/upgrade.log" 2>&1 || { cat "$TMP/upgrade.log" >&2; fail "upgrade failed"; }
  [ "$(dpkg-query -W -f='${Version}' htamd)" = "$NEXT" ] || fail "htamd not upgraded to $NEXT"
  grep -q '^# edited by the operator' /etc/htam/htamd.conf || fail "upgrade replaced the edited conffile"
  start_htamd
  "$PREFIX/bin/htam" --connect "$ENDPOINT" status >/dev/null || fail "htam status after upgrade failed"
  stop_htamd
  [ "$(steps_of)" -eq "$STEPS" ] || fail "the session's steps changed across the upgrade"
  "$PREFIX/bin/htam" --data-dir "$DATA" check >/dev/null || fail "htam check after the upgrade failed"

  say "the packaged service: its store, its unit, removal stops it, purge leaves no link"
  grep -qx 'Delegate=memory' /usr/lib/systemd/system/htamd.service || fail "htamd.service: no Delegate=memory"
  grep -qx 'data_dir = /var/lib/htam' /etc/htam/htamd.conf || fail "htamd.conf does not name /var/lib/htam"
  # The shipped configuration sets nothing else: a start logs no "option" line for its defaults.
  [ "$(grep -c '^[a-z_]* = ' /etc/htam/htamd.conf)" -eq 1 ] || fail "htamd.conf sets more than data_dir"
  WANTS=/etc/systemd/system/multi-user.target.wants/htamd.service
  systemctl enable htamd.service >"$TMP/enable.log" 2>&1 || { cat "$TMP/enable.log" >&2; fail "systemctl enable htamd failed"; }
  [ -L "$WANTS" ] || fail "systemctl enable made no $WANTS"
  if [ ! -e /var/lib/htam/store ]; then
    # The packaged store (no data_dir given anywhere): htam finds it with no --data-dir.
    MADE_STORE=1
    (cd "$TMP/cwd" && exec env -i PATH=/usr/bin:/bin "${RUN[@]}" /usr/bin/htamd --config "$CONF" \
      --server.bind "$ENDPOINT" --eval.backends cpu >>"$TMP/htamd.log" 2>&1) &
    HTAMD_PID=$!
    /usr/bin/htam-agent wait-ready --endpoint "$ENDPOINT" --within 90 >/dev/null ||
      { cat "$TMP/htamd.log" >&2; fail "packaged htamd on /var/lib/htam did not come up"; }
    /usr/bin/htam-agent run --endpoint "$ENDPOINT" --task cpu_relu --backend cpu --budget 1 \
      --proposer replay --json "$TMP/session2.json" >"$TMP/agent2.log" 2>&1 ||
      { cat "$TMP/agent2.log" "$TMP/htamd.log" >&2; fail "htam-agent run on /var/lib/htam failed"; }
    S2=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["session_id"])' "$TMP/session2.json")
    (cd "$TMP/cwd" && /usr/bin/htam trajectory "$S2") >"$TMP/traj2.txt" 2>&1 ||
      { cat "$TMP/traj2.txt" >&2; fail "htam trajectory $S2 (no --data-dir) did not find the packaged store"; }
    # Removal stops the running daemon (cleanly: SIGTERM).
    DEBIAN_FRONTEND=noninteractive "${APT[@]}" remove htamd >"$TMP/remove.log" 2>&1 ||
      { cat "$TMP/remove.log" >&2; fail "apt-get remove htamd failed"; }
    for _ in $(seq 1 100); do kill -0 "$HTAMD_PID" 2>/dev/null || break; sleep 0.1; done
    ! kill -0 "$HTAMD_PID" 2>/dev/null || fail "removing htamd left the daemon running"
    rc=0
    wait "$HTAMD_PID" || rc=$?
    HTAMD_PID=""
    [ "$rc" -eq 0 ] || { cat "$TMP/htamd.log" >&2; fail "htamd exited with $rc when removed"; }
  else
    say "/var/lib/htam/store exists already: its store is left alone (packaged-store checks skipped)"
  fi

  say "purge"
  DEBIAN_FRONTEND=noninteractive "${APT[@]}" purge "${PKGS[@]}" >"$TMP/purge.log" 2>&1 ||
    { cat "$TMP/purge.log" >&2; fail "purge failed"; }
  MODE=purged
  for f in /usr/bin/htamd /usr/lib/htam /usr/share/htam /etc/htam/htamd.conf \
           /usr/lib/systemd/system/htamd.service; do
    [ ! -e "$f" ] || fail "$f left after purge"
  done
  [ ! -L "$WANTS" ] || fail "purge left the enable link $WANTS (-> $(readlink "$WANTS"))"
  if [ "${MADE_STORE:-0}" = 1 ]; then rm -rf /var/lib/htam; fi
fi
say "passed ($([ "$MODE" = unpack ] && echo "unpacked with dpkg -x" || echo "installed, upgraded and purged with dpkg"))"
