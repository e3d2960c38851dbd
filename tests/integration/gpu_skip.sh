#!/bin/bash
# Runs "$@" only where nvidia-smi lists a GPU; elsewhere exits 77, which the
# GPU tests declare as their SKIP_RETURN_CODE, so ctest reports them as
# skipped (never as passed). With --without-gpu the condition is reversed:
# the check of the GPU-less error path is skipped where a GPU exists.
want_gpu=1
if [ "$1" = "--without-gpu" ]; then
    want_gpu=0
    shift
fi
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    have_gpu=1
fi
if [ "$have_gpu" != "$want_gpu" ]; then
    if [ "$want_gpu" = 1 ]; then
        echo "SKIPPED: nvidia-smi finds no GPU on $(hostname)"
    else
        echo "SKIPPED: this machine has a GPU; the GPU-less error path is not testable here"
    fi
    exit 77
fi
exec "$@"
