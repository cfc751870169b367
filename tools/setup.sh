#!/usr/bin/env bash
# Installs every third-party dependency of htam from Debian's packages, and the npm clients the
# htam-mcp tests use (tests/mcp). Safe to run twice: packages already present are not fetched
# again. Needs root (or sudo) and, for the npm part, the npm registry.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ccache git
  libzmq3-dev cppzmq-dev libsodium-dev libseccomp-dev
  libflatbuffers-dev flatbuffers-compiler
  liblmdb-dev lmdb-utils
  libfaiss-dev libopenblas-dev liblapack-dev libomp-dev
  libboost-program-options-dev
  googletest libgtest-dev libgmock-dev
  nlohmann-json3-dev
  python3 python3-zmq python3-flatbuffers
  python3-torch
  hipcc libamdhip64-dev
  clang libclang-rt-dev  # fuzz targets; the thread-safety check (ctest label lint)
  graphviz
  prometheus  # promtool: the /metrics check of tests/integration/observability_test.py
  systemd
  slurmctld slurmd slurm-client munge  # a one-node Slurm for the worker pool's test
  podman debootstrap  # tests/packaging/container_test.sh: the htamd image built and run
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js and npm run the MCP clients of the htam-mcp tests (below). A Node already installed
# (e.g. a newer one from elsewhere, which brings its own npm) is kept; otherwise Debian's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}"
  echo "setup: done"
fi

# MCP clients we did not write, for tests/mcp (docs/mcp.md): the versions pinned in
# tests/mcp/package-lock.json, installed into tests/mcp/node_modules (git-ignored) from the npm
# registry. Skipped when that folder was installed from the same lock file.
NPM_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/mcp"
NPM_STAMP="$NPM_DIR/node_modules/.htam-lock.sha256"
lock_sum="$(sha256sum "$NPM_DIR/package-lock.json" | cut -d' ' -f1)"
if [ -f "$NPM_STAMP" ] && [ "$(cat "$NPM_STAMP")" = "$lock_sum" ]; then
  echo "setup: npm clients for tests/mcp present"
else
  echo "setup: installing npm clients for tests/mcp"
  (cd "$NPM_DIR" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock_sum" > "$NPM_STAMP"
fi

# The Kubernetes manifest validators of tests/packaging/k8s_manifest_test.py (kubernetes-models:
# the Kubernetes API's schemas), pinned in tests/packaging/k8s/package-lock.json.
K8S_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/packaging/k8s"
K8S_STAMP="$K8S_DIR/node_modules/.htam-lock.sha256"
k8s_sum="$(sha256sum "$K8S_DIR/package-lock.json" | cut -d' ' -f1)"
if [ -f "$K8S_STAMP" ] && [ "$(cat "$K8S_STAMP")" = "$k8s_sum" ]; then
  echo "setup: npm validators for tests/packaging/k8s present"
else
  echo "setup: installing npm validators for tests/packaging/k8s"
  (cd "$K8S_DIR" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$k8s_sum" > "$K8S_STAMP"
fi
