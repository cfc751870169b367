#!/bin/sh
# Fails when a backend plugin exports anything but htam_backend_* (run by CTest).
set -e
bad=$(nm -D --defined-only "$1" | awk '{print $3}' | grep -v '^htam_backend_' || true)
if [ -n "$bad" ]; then echo "unexpected exported symbols in $1:"; echo "$bad"; exit 1; fi
echo "exports of $1: only htam_backend_*"
