#!/bin/bash
# Compiles translation units with clang's thread-safety analysis as errors (-fsyntax-only: nothing
# is built). Usage: thread_safety.sh CLANGXX INCLUDE_DIRS DEFINES pass|fail SOURCE...
# INCLUDE_DIRS and DEFINES are CMake lists (';'-separated), taken from the target that builds the
# sources, so clang sees the same headers and macros as the real build.
#   pass: every source must compile without a thread-safety warning.
#   fail: every source must be rejected by the analysis (a planted violation: proves the check
#         can fail). Failing for another reason (a missing header, a syntax error) does not count.
# Exits 77 (ctest: skipped) when no clang++ was found at configure time.
set -u
clangxx=$1 expect=$4
IFS=';' read -r -a incs <<<"$2"
IFS=';' read -r -a defs <<<"$3"
shift 4
if [[ -z "$clangxx" || ! -x "$clangxx" ]]; then
  echo "thread-safety check skipped: no clang++ found (install the Debian package clang)"
  exit 77
fi
flags=(-std=c++20 -fsyntax-only -Wno-everything -Wthread-safety -Wthread-safety-beta
       -Werror=thread-safety -Werror=thread-safety-beta)
for d in "${incs[@]}"; do [[ -n "$d" ]] && flags+=("-I$d"); done
for d in "${defs[@]}"; do [[ -n "$d" ]] && flags+=("-D$d"); done
# The sources are compiled at the same time (each clang is one process), then judged in order.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
for src in "$@"; do
  ("$clangxx" "${flags[@]}" "$src" >"$tmp/$i.out" 2>&1; echo $? >"$tmp/$i.rc") &
  i=$((i + 1))
done
wait
status=0
i=0
for src in "$@"; do
  out=$(<"$tmp/$i.out")
  rc=$(<"$tmp/$i.rc")
  i=$((i + 1))
  case "$expect" in
    pass)
      if [[ $rc -ne 0 ]]; then
        echo "FAIL $src:"
        echo "$out"
        status=1
      else
        echo "ok   $src"
      fi ;;
    fail)
      if [[ $rc -ne 0 ]] && grep -q 'Werror,-Wthread-safety' <<<"$out"; then
        echo "ok   $src (rejected by the analysis, as it must be)"
        echo "$out" | grep 'error:'
      else
        echo "FAIL $src: expected a thread-safety error, got exit $rc:"
        echo "$out"
        status=1
      fi ;;
    *) echo "unknown expectation '$expect'"; exit 2 ;;
  esac
done
exit $status
