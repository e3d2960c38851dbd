#!/usr/bin/env bash
# Verifies Tarantella's GPU path on a real GPU node and writes one report.
#
#   scripts/verify-gpu.sh [--build-dir DIR] [--report FILE] [--python PY] [--no-build]
#                         [--no-bench] [--jobs N] [--] [extra cmake flags]
#
# Needs: nvidia-smi listing at least one GPU, the CUDA toolkit and NCCL
# (docs/gpu.md, "Building with CUDA"), libtnt's build dependencies, and a
# Python with torch built for CUDA (for the Python tests and the benchmark).
# It
#   1. builds with -DTNT_WITH_CUDA=ON into DIR (default build-gpu),
#   2. runs every ctest of label gpu for real (C device collectives on the
#      NCCL and host-staged paths, the Python suite: CUDA tensors, the
#      device reducer, tnt.Model serial equivalence, AMP, the tnt torch
#      backend on CUDA tensors and DDP), N at a time
#      (default 1; the tests share the GPU, and the Python suite is the
#      longest, so 4 ends when it does),
#   3. benchmarks allreduce of CUDA tensors: tarantella's NCCL and
#      host-staged paths against torch.distributed (NCCL, and gloo for ranks
#      sharing a GPU; the tnt backend where it is built) in the same run,
#   4. writes FILE (default DIR/gpu-report.md): machine, GPU, driver,
#      versions, each test's verdict, the figures.
# Exit status: 0 when every gpu test passed, 1 when one failed, 2 when the
# machine has no GPU or the build failed.
set -uo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=build-gpu
report=""
python=$(command -v python3 || echo /usr/bin/python3)
do_build=1
do_bench=1
test_jobs=1
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=$2; shift 2 ;;
        --report) report=$2; shift 2 ;;
        --python) python=$2; shift 2 ;;
        --no-build) do_build=0; shift ;;
        --no-bench) do_bench=0; shift ;;
        --jobs) test_jobs=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
        --) shift; break ;;
        *) break ;;
    esac
done
case "$build" in /*) ;; *) build=$src/$build ;; esac
[ -n "$report" ] || report=$build/gpu-report.md
jobs=$(nproc 2>/dev/null || echo 2)

die() { echo "verify-gpu: $*" >&2; exit 2; }

if ! command -v nvidia-smi >/dev/null 2>&1; then
    die "no GPU found: nvidia-smi is not on PATH. Run this on a GPU node (e.g. inside
  srun --gpus=1 --pty bash) with the NVIDIA driver installed."
fi
if ! gpus=$(nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$gpus"; then
    die "no GPU found: nvidia-smi -L listed none (${gpus:-no output}). Run this on a GPU node
  with the NVIDIA driver loaded."
fi
ngpu=$(grep -c '^GPU ' <<<"$gpus")

mkdir -p "$build" "$(dirname "$report")" || die "cannot create $build"
log=$build/verify-gpu.log
: >"$log"

if [ $do_build = 1 ]; then
    echo "verify-gpu: configuring and building in $build (log: $log)"
    if ! cmake -S "$src" -B "$build" -DTNT_WITH_CUDA=ON -DTNT_PYTHON="$python" \
            -DTNT_TEST_PYTHON="$python" "$@" >>"$log" 2>&1 ||
       ! cmake --build "$build" -j "$jobs" >>"$log" 2>&1; then
        tail -30 "$log" >&2
        die "the build failed; the whole log is $log"
    fi
fi

echo "verify-gpu: running ctest -L gpu on $ngpu GPU(s)"
ctest --test-dir "$build" -L gpu -j "$test_jobs" --output-on-failure --timeout 900 \
    --output-junit "$build/gpu-tests.xml" >"$build/gpu-tests.log" 2>&1
tests_rc=$?
cat "$build/gpu-tests.log" >>"$log"
grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|tests failed' "$build/gpu-tests.log"

bench_out=$build/gpu-bench.jsonl
: >"$bench_out"
bench() {  # label, command...
    local label=$1; shift
    echo "verify-gpu: benchmark $label"
    if ! "$@" --label "$label" >>"$bench_out" 2>>"$log"; then
        echo "{\"label\": \"$label\", \"error\": \"failed, see $log\"}" >>"$bench_out"
    fi
}
if [ $do_bench = 1 ]; then
    b=$src/tests/bench/gpu_allreduce_bench.py
    tnt="$build/bin/tarantella"
    export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
    bench "tnt nccl 1 rank" env TNT_GPU_TRANSPORT=nccl "$tnt" -n 1 -- "$python" "$b" tnt
    bench "torch nccl 1 rank" "$python" "$b" torch --backend nccl --ranks 1
    bench "tnt host 1 rank" env TNT_GPU_TRANSPORT=host "$tnt" -n 1 -- "$python" "$b" tnt
    bench "tnt host 2 ranks, 1 GPU" env TNT_GPU_TRANSPORT=host CUDA_VISIBLE_DEVICES=0 \
        "$tnt" -n 2 -- "$python" "$b" tnt
    bench "torch gloo 2 ranks, 1 GPU" env CUDA_VISIBLE_DEVICES=0 \
        "$python" "$b" torch --backend gloo --ranks 2
    # torch.distributed's own calls on the tnt backend, where it was built.
    if ls "$build"/python/tarantella/_tnt_torch*.so >/dev/null 2>&1; then
        bench "torch tnt 2 ranks, 1 GPU" env CUDA_VISIBLE_DEVICES=0 TNT_ALLOW_UNTESTED_TORCH=1 \
            "$python" "$b" torch --backend tnt --ranks 2
    fi
    if [ "$ngpu" -ge 2 ]; then
        bench "tnt nccl $ngpu ranks" env TNT_GPU_TRANSPORT=nccl "$tnt" -n "$ngpu" -- "$python" "$b" tnt
        bench "torch nccl $ngpu ranks" "$python" "$b" torch --backend nccl --ranks "$ngpu"
    fi
fi

{
    echo "# Tarantella GPU verification report"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- commit: $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$src" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
    echo "- host: $(uname -n), $(uname -srm)"
    echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
    echo "- GPUs ($ngpu):"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv,noheader |
        sed 's/^/  - /'
    echo "- CUDA toolkit: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || grep -m1 CUDA_VERSION "$build/CMakeCache.txt" 2>/dev/null || echo unknown)"
    # The configure step's own line, or (with --no-build) what its cache kept.
    cuda_line=$(grep -E 'tarantella: (CUDA|TNT_WITH_CUDA)' "$log" | tail -1 | sed 's/^-- //')
    [ -n "$cuda_line" ] || cuda_line=$(grep -E '^(TNT_WITH_CUDA|TNT_NCCL_LIBRARY|TNT_WITH_TORCH_BACKEND):' \
        "$build/CMakeCache.txt" 2>/dev/null | sed 's/:[A-Z]*=/=/' | paste -sd ' ')
    echo "- CMake's CUDA and NCCL: ${cuda_line:-unknown}"
    echo "- Python: $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1 | tail -1)"
    echo
    echo "## Tests (ctest -L gpu): $( [ $tests_rc = 0 ] && echo PASSED || echo FAILED)"
    echo
    echo '```'
    grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|tests failed|Total Test time' "$build/gpu-tests.log"
    echo '```'
    if [ -s "$bench_out" ]; then
        echo
        echo "## Allreduce of float32 CUDA tensors, in place (median time per call; bus bandwidth, algorithm bandwidth on 1 rank)"
        echo
        "$python" - "$bench_out" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
labels = list(dict.fromkeys(r["label"] for r in rows))
sizes = sorted({r["bytes"] for r in rows if "bytes" in r})
def fmt(n):
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)
print("| run | " + " | ".join(fmt(s) for s in sizes) + " |")
print("|---|" + "---|" * len(sizes))
for lab in labels:
    got = {r["bytes"]: r for r in rows if r["label"] == lab and "bytes" in r}
    err = [r["error"] for r in rows if r["label"] == lab and "error" in r]
    bw = lambda r: r["busbw_GBps"] if r["ranks"] > 1 else r["algbw_GBps"]
    cells = ["%.1f us, %.2f GB/s" % (got[s]["us"], bw(got[s])) if s in got
             else ("failed" if err else "-") for s in sizes]
    print("| %s | %s |" % (lab, " | ".join(cells)))
EOF
    fi
    echo
    echo "Full log: $log. Keep this report: it is what to attach when you report a"
    echo "problem with the GPU path (docs/gpu.md, \"Verifying your GPU nodes\")."
} >"$report"
echo "verify-gpu: report written to $report"
[ $tests_rc = 0 ] && exit 0 || exit 1
