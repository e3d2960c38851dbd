#!/bin/sh
# torch.distributed benchmark: one unmodified DDP program (ddp_bench.py) on
# the tnt backend and on gloo, 2 ranks x 1 thread under the launcher,
# alternating (which goes first flips every repeat), every run bracketed by
# vcpu_probe; plus the allreduce bus bandwidth through torch.distributed
# against libtnt's own C benchmark (allreduce_bench) at the same sizes.
# The training workloads of train_bench.py (tnt.Model against DDP over tnt
# and over gloo) are run_train_bench.sh's, with
# TNT_TRAIN_PROGRAMS="tnt ddptnt ddp".
#
#   tests/bench/run_ddp_bench.sh [BUILD_DIR] [REPEATS] [OUT_DIR]
#
# defaults: build, 4, bench-results/ddp. TNT_DDP_BENCH_WORKLOADS picks
# "resnet18", "allreduce" or both (default); TNT_DDP_BENCH_MIN and _MAX bound
# the allreduce sizes (4 B to 64 MiB). Writes OUT_DIR/results.jsonl, one
# line per run with its probes. Not a test: it never fails on speed.
set -eu
BUILD=${1:-build}
REPEATS=${2:-4}
OUT=${3:-bench-results/ddp}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
BUILD=$(cd "$BUILD" && pwd)
LAUNCHER=$BUILD/bin/tarantella
[ -x "$LAUNCHER" ] || { echo "run_ddp_bench: no launcher at $LAUNCHER; build first" >&2; exit 1; }
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
: > "$RESULTS"
export OMP_NUM_THREADS=1 TNT_TIMEOUT=${TNT_TIMEOUT:-120}
BENCH=$REPO/tests/bench/ddp_bench.py
PROBE_SRC=${TNT_VCPU_PROBE:-/work/shared/tools/vcpu_probe.c}
[ -r "$PROBE_SRC" ] || { echo "run_ddp_bench: no $PROBE_SRC; set TNT_VCPU_PROBE" >&2; exit 1; }
PROBE=$OUT/vcpu_probe
cc -O2 -pthread -o "$PROBE" "$PROBE_SRC"
MAX=${TNT_DDP_BENCH_MAX:-67108864}
MIN=${TNT_DDP_BENCH_MIN:-4}            # allreduce sizes MIN..MAX, both programs
WORKLOADS=${TNT_DDP_BENCH_WORKLOADS:-"resnet18 allreduce"}
EXTRA=${TNT_DDP_BENCH_ARGS:-}   # e.g. --grad-as-bucket-view

run_one() {  # program workload repeat; program: tnt, gloo or libtnt (the C benchmark)
    before=$("$PROBE" | sed 's/.*placement //')
    if [ "$1" = libtnt ]; then
        line=$(timeout 600 "$LAUNCHER" -n 2 -- "$BUILD/bin/allreduce_bench" --min "$MIN" --max "$MAX" 2>/dev/null |
               $PY -c '
import json, sys
rows = [l.split() for l in sys.stdin if l.strip() and l.split()[0].isdigit()]
print(json.dumps({"backend": "libtnt-c", "workload": "allreduce", "allreduce":
                  {r[0]: {"us": float(r[1]), "busbw_gbs": float(r[3])} for r in rows}}))') || true
    else
        line=$(timeout 600 "$LAUNCHER" -n 2 -- $PY "$BENCH" --backend "$1" --workload "$2" \
               --min "$MIN" --max "$MAX" $EXTRA 2>/dev/null | sed -n 's/^RESULT //p') || true
    fi
    after=$("$PROBE" | sed 's/.*placement //')
    if [ -z "$line" ]; then
        echo "run_ddp_bench: $1 $2 (repeat $3) produced no result" >&2
        return 0
    fi
    echo "$line" | $PY -c "import json,sys; d=json.loads(sys.stdin.read()); d['repeat']=$3; d['probe']=['$before', '$after']; print(json.dumps(d))" >> "$RESULTS"
    echo "  $1 $2 #$3: probes $before/$after"
}

i=1
while [ "$i" -le "$REPEATS" ]; do
    for w in $WORKLOADS; do
        if [ "$w" = resnet18 ]; then other=gloo; else other=libtnt; fi
        if [ $((i % 2)) -eq 1 ]; then order="tnt $other"; else order="$other tnt"; fi
        for p in $order; do run_one "$p" "$w" "$i"; done
    done
    i=$((i + 1))
done
echo "run_ddp_bench: $(wc -l < "$RESULTS") runs in $RESULTS"
