#!/usr/bin/env bash
# Installs every third-party dependency of htam from Debian's packages. Safe to run twice:
# packages already present are not fetched again. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ccache git
  libzmq3-dev cppzmq-dev libsodium-dev
  libflatbuffers-dev flatbuffers-compiler
  liblmdb-dev lmdb-utils
  libfaiss-dev libopenblas-dev liblapack-dev libomp-dev
  libboost-program-options-dev
  googletest libgtest-dev libgmock-dev
  nlohmann-json3-dev
  python3 python3-zmq python3-flatbuffers
  python3-torch
  hipcc libamdhip64-dev
  clang libclang-rt-dev
  graphviz
  systemd
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}"
echo "setup: done"
