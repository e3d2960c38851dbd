#!/bin/sh
# Training benchmark: tarantella (tnt.Model.fit through the launcher) against
# torch DDP (gloo), 2 ranks x 1 thread, same machine, same run. The two
# programs alternate (which one goes first flips every repeat) because these
# VMs' vCPUs drift for tens of seconds at a time; the report takes medians.
# Every run is bracketed by vcpu_probe (built from /work/shared/tools/
# vcpu_probe.c or $TNT_VCPU_PROBE); runs whose two probes disagree are
# dropped by the report, which gives close and far placements separately.
# The compute floor: the same MLP at batch 1 on one rank (mlp1), which the
# communication-bound mlp2 (batch 1 per rank on 2 ranks) is compared with.
#
#   tests/bench/run_train_bench.sh [BUILD_DIR] [REPEATS] [OUT_DIR]
#
# defaults: build, 5, bench-results/train. Writes OUT_DIR/results.jsonl (one
# line per run, with the load average before it) and OUT_DIR/report.md, and the
# plots docs/img/train_*.png (python3-matplotlib is installed with apt-get
# when missing and we are root; without it the plots are skipped).
# Not a test: it never fails on speed.
set -eu
BUILD=${1:-build}
REPEATS=${2:-5}
OUT=${3:-bench-results/train}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
BUILD=$(cd "$BUILD" && pwd)
LAUNCHER=$BUILD/bin/tarantella
[ -x "$LAUNCHER" ] || { echo "run_train_bench: no launcher at $LAUNCHER; build first" >&2; exit 1; }
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
: > "$RESULTS"

export OMP_NUM_THREADS=1
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
export TNT_TIMEOUT=${TNT_TIMEOUT:-120}
BENCH=$REPO/tests/bench/train_bench.py
PROBE_SRC=${TNT_VCPU_PROBE:-/work/shared/tools/vcpu_probe.c}
[ -r "$PROBE_SRC" ] || { echo "run_train_bench: no $PROBE_SRC; set TNT_VCPU_PROBE" >&2; exit 1; }
PROBE=$OUT/vcpu_probe
cc -O2 -pthread -o "$PROBE" "$PROBE_SRC"
WORKLOADS=${TNT_TRAIN_WORKLOADS:-digits mlp64 mlp2 mlp1}
# tnt: tnt.Model.fit; ddp: DDP on gloo; ddptnt: the same DDP script on the
# tnt torch.distributed backend (from the same env:// store). A suffix -bf16
# or -fp16 (tnt-bf16, ddp-fp16, ...) adds --compression: 16-bit gradients
# (compile(compression=) for tnt, DDP's bf16/fp16_compress_hook for ddp).
PROGRAMS=${TNT_TRAIN_PROGRAMS:-tnt ddp}
EXTRA=${TNT_TRAIN_ARGS:-}          # e.g. "--steps 2 --windows 1" for a smoke run
PLOTS=${TNT_TRAIN_PLOTS:-$REPO/docs/img}

run_one() {  # program workload repeat
    load=$(cut -d' ' -f1 /proc/loadavg)
    case $1 in
        *-bf16|*-fp16) comp="--compression ${1##*-}"; set -- "${1%-*}" "$2" "$3" ;;
        *) comp= ;;
    esac
    # The floor runs on one rank, tnt only.
    if [ "$2" = mlp1 ] && [ "$1" != tnt ]; then
        return 0
    fi
    before=$("$PROBE" | sed 's/.*placement //')
    if [ "$2" = mlp1 ]; then
        line=$(timeout 600 "$LAUNCHER" -n 1 -- $PY "$BENCH" --backend tnt --workload mlp1 $EXTRA 2>/dev/null \
               | grep '^RESULT ' | sed 's/^RESULT //') || true
    elif [ "$1" = tnt ]; then
        line=$(timeout 600 "$LAUNCHER" -n 2 -- $PY "$BENCH" --backend tnt --workload "$2" $comp $EXTRA 2>/dev/null \
               | grep '^RESULT ' | sed 's/^RESULT //') || true
    elif [ "$1" = ddptnt ]; then
        line=$(timeout 600 $PY "$BENCH" --backend ddp --ddp-backend tnt --workload "$2" --nproc 2 \
               $comp $EXTRA 2>/dev/null | grep '^RESULT ' | sed 's/^RESULT //') || true
    else
        line=$(timeout 600 $PY "$BENCH" --backend ddp --workload "$2" --nproc 2 $comp $EXTRA 2>/dev/null \
               | grep '^RESULT ' | sed 's/^RESULT //') || true
    fi
    if [ -z "$line" ]; then
        echo "run_train_bench: $1 $2 (repeat $3) produced no result" >&2
        return 0
    fi
    after=$("$PROBE" | sed 's/.*placement //')
    echo "$line" | $PY -c "import json,sys; d=json.loads(sys.stdin.read()); d['repeat']=$3; d['load']=$load; d['probe']=['$before', '$after']; print(json.dumps(d))" >> "$RESULTS"
    tail -n 1 "$RESULTS" | $PY -c "import json,sys; d=json.loads(sys.stdin.read()); k='epoch_s' if 'epoch_s' in d else 'step_s'; print('  %-8s %-6s #%d: %s=%.4f%s (load %.1f, probes %s)' % (d['backend'] + ('-' + d['compression'] if d.get('compression') else ''), d['workload'], d['repeat'], k, d[k], ', accuracy %.3f' % d['accuracy'] if 'accuracy' in d else '', d['load'], '/'.join(d['probe'])))"
}

i=1
while [ "$i" -le "$REPEATS" ]; do
    for w in $WORKLOADS; do
        if [ $((i % 2)) -eq 1 ]; then
            for p in $PROGRAMS; do run_one "$p" "$w" "$i"; done
        else
            for p in $(echo $PROGRAMS | tr ' ' '\n' | tac); do run_one "$p" "$w" "$i"; done
        fi
    done
    i=$((i + 1))
done

if ! $PY -c "import matplotlib" 2>/dev/null && [ "$(id -u)" = 0 ]; then
    echo "run_train_bench: installing python3-matplotlib for the plots"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-matplotlib >/dev/null 2>&1 || true
fi
$PY "$REPO/tests/bench/train_bench_report.py" "$RESULTS" --plots "$PLOTS" | tee "$OUT/report.md"
