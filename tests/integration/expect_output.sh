#!/usr/bin/env bash
# expect_output.sh [--fail] COUNT REGEX -- COMMAND...
# Runs COMMAND; passes when it exits 0 (with --fail: non-zero) and exactly
# COUNT lines (N+: at least N) of its combined stdout/stderr match the
# extended REGEX. Prints
# the output either way, so ctest --output-on-failure shows what happened.
set -u
want_fail=0
if [ "${1:-}" = "--fail" ]; then
  want_fail=1
  shift
fi
count=$1 regex=$2
shift 2
[ "${1:-}" = "--" ] && shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
n=$(printf '%s\n' "$out" | grep -cE -- "$regex")
if [ "$want_fail" = 0 ] && [ "$rc" -ne 0 ]; then
  echo "expect_output: command exited with $rc" >&2
  exit 1
fi
if [ "$want_fail" = 1 ] && { [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
  echo "expect_output: command exited with $rc, expected a failure (not a timeout)" >&2
  exit 1
fi
if [ "${count%+}" != "$count" ]; then
  if [ "$n" -lt "${count%+}" ]; then
    echo "expect_output: $n line(s) match '$regex', expected at least ${count%+}" >&2
    exit 1
  fi
elif [ "$n" -ne "$count" ]; then
  echo "expect_output: $n line(s) match '$regex', expected $count" >&2
  exit 1
fi
exit 0
