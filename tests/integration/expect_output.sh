#!/usr/bin/env bash
# expect_output.sh COUNT REGEX -- COMMAND...
# Runs COMMAND; passes when it exits 0 and exactly COUNT lines of its
# combined stdout/stderr match the extended REGEX. Prints the output either
# way, so ctest --output-on-failure shows what happened.
set -u
count=$1 regex=$2
shift 2
[ "${1:-}" = "--" ] && shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
n=$(printf '%s\n' "$out" | grep -cE -- "$regex")
if [ "$rc" -ne 0 ]; then
  echo "expect_output: command exited with $rc" >&2
  exit 1
fi
if [ "$n" -ne "$count" ]; then
  echo "expect_output: $n line(s) match '$regex', expected $count" >&2
  exit 1
fi
exit 0
