#!/usr/bin/env bash
# One libFuzzer harness as a regression test (ctest label fuzz):
#   run_fuzz.sh BUILT HARNESS CORPUS_DIR WORK_DIR SECONDS
# BUILT is 1 when configure built the harnesses (TNT_FUZZ); otherwise the
# test reports itself skipped (exit 77), never passed. First every corpus
# file runs once (the regression inputs), then SECONDS of fuzzing from the
# corpus with a fixed seed. New inputs and crash files go under WORK_DIR,
# never into the tree's corpus.
set -euo pipefail
built=$1 harness=$2 corpus=$3 work=$4 seconds=$5

if [ "$built" != 1 ] || [ ! -x "$harness" ]; then
    echo "SKIPPED: $(basename "$harness") was not built: it needs clang with libFuzzer"
    echo "(Debian: clang and libclang-rt-14-dev; configure with -DTNT_FUZZ=ON to insist)"
    exit 77
fi
rm -rf "$work"
mkdir -p "$work/new" "$work/artifacts"
# The sanitizers must fail the run, not print and go on; leaks count.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

shopt -s nullglob
files=("$corpus"/*)
if [ ${#files[@]} -eq 0 ]; then
    echo "run_fuzz: FAIL: no corpus in $corpus"
    exit 1
fi
echo "run_fuzz: $(basename "$harness"): ${#files[@]} corpus inputs"
"$harness" -artifact_prefix="$work/artifacts/" "${files[@]}"
echo "run_fuzz: $(basename "$harness"): fuzzing for ${seconds} s"
"$harness" -seed=1 -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/new" "$corpus"
echo "run_fuzz: OK: $(basename "$harness")"
