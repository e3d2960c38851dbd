#!/usr/bin/env bash
# Regression benchmark: the working tree's build against a reference commit,
# side by side, in one sitting. Builds REF beside the tree (a git worktree
# under $TMPDIR, only the targets the benchmarks need), then alternates the
# training benchmark (tnt.Model.fit through the launcher, 2 ranks) and the
# 2-rank allreduce benchmark between the two builds, flipping which goes
# first each round. Every run is bracketed by vcpu_probe; runs whose two
# probes disagree are dropped, and placements are reported apart. Prints one
# screen: median per build, workload and placement, and new/ref.
#
#   scripts/bench-compare.sh [--ref COMMIT] [--build DIR] [--rounds N] [--workloads "digits mlp2"]
#
# Defaults: --ref HEAD (the last commit, against uncommitted changes; pass
# the commit before a change to judge a committed one), --build build,
# --rounds 5, --workloads "digits mlp2 mlp64". Run it alone on the machine:
# it is a benchmark, not a test, and never fails on speed. `make
# bench-compare REF=...` calls it. Results: bench-results/compare/.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
ref=HEAD build=$src/build rounds=5 workloads="digits mlp2 mlp64"
while [ $# -gt 0 ]; do
    case "$1" in
        --ref) ref=$2; shift 2 ;;
        --build) build=$(cd "$2" && pwd); shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --workloads) workloads=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
        *) echo "bench-compare: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
sha=$(git -C "$src" rev-parse --short "$ref") ||
    { echo "bench-compare: $ref is not a commit of this repository" >&2; exit 2; }
[ -x "$build/bin/tarantella" ] ||
    { echo "bench-compare: no build in $build; run make (or cmake --build) first" >&2; exit 2; }
out=$src/bench-results/compare
mkdir -p "$out"
results=$out/results.jsonl
: >"$results"
probe_src=${TNT_VCPU_PROBE:-/work/shared/tools/vcpu_probe.c}
[ -r "$probe_src" ] || { echo "bench-compare: no $probe_src; set TNT_VCPU_PROBE" >&2; exit 2; }
cc -O2 -pthread -o "$out/vcpu_probe" "$probe_src"

# The reference build, reused while REF's commit is the same.
refdir=${TMPDIR:-/tmp}/tnt-bench-ref-$sha
if [ ! -x "$refdir/build/bin/tarantella" ]; then
    echo "bench-compare: building $sha in $refdir"
    rm -rf "$refdir"
    git -C "$src" worktree prune
    git -C "$src" worktree add --detach "$refdir" "$sha" >/dev/null
    cmake -S "$refdir" -B "$refdir/build" -DTNT_WITH_SPANK=OFF -DTNT_WITH_CUDA=OFF \
        >"$out/ref-configure.log" 2>&1
    cmake --build "$refdir/build" -j "$(nproc)" --target tarantella tnt_python allreduce_bench \
        >"$out/ref-build.log" 2>&1 ||
        { tail -20 "$out/ref-build.log"; echo "bench-compare: building $sha failed" >&2; exit 1; }
fi

export OMP_NUM_THREADS=1 TNT_TIMEOUT=${TNT_TIMEOUT:-120}
run() {  # label build-dir kind workload round
    local label=$1 dir=$2 kind=$3 w=$4 round=$5 before after line
    before=$("$out/vcpu_probe" | sed 's/.*placement //')
    if [ "$kind" = train ]; then
        line=$(PYTHONPATH=$dir/python timeout 600 "$dir/bin/tarantella" -n 2 -- /usr/bin/python3 \
               "$src/tests/bench/train_bench.py" --backend tnt --workload "$w" 2>/dev/null |
               sed -n 's/^RESULT //p') || true
    else
        line=$(timeout 600 "$dir/bin/tarantella" -n 2 -- "$dir/bin/allreduce_bench" --max 65536 \
               2>/dev/null | /usr/bin/python3 -c '
import json, sys
rows = [l.split() for l in sys.stdin if l.strip() and l.split()[0].isdigit()]
print(json.dumps({"allreduce_us": {r[0]: float(r[1]) for r in rows}}))') || true
    fi
    after=$("$out/vcpu_probe" | sed 's/.*placement //')
    [ -n "$line" ] || { echo "  $label $w: no result" >&2; return 0; }
    echo "$line" | /usr/bin/python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d.update(build='$label', kind='$kind', workload='$w', round=$round, probe=['$before','$after']); print(json.dumps(d))" >>"$results"
    echo "  round $round $label $w: $(tail -c 200 "$results" | tr -d '\n' | cut -c1-90)..."
}
for round in $(seq 1 "$rounds"); do
    for w in $workloads allreduce; do
        kind=train; [ "$w" = allreduce ] && kind=allreduce
        if [ $((round % 2)) -eq 1 ]; then
            run new "$build" $kind $w "$round"; run "ref-$sha" "$refdir/build" $kind $w "$round"
        else
            run "ref-$sha" "$refdir/build" $kind $w "$round"; run new "$build" $kind $w "$round"
        fi
    done
done
/usr/bin/python3 - "$results" "ref-$sha" <<'EOF' | tee "$out/report.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ref = sys.argv[2]
kept = [r for r in rows if r["probe"][0] == r["probe"][1]]
print("bench-compare: %d runs, %d kept (probes agree), new vs %s" % (len(rows), len(kept), ref))
for place in ("close", "far"):
    sel = [r for r in kept if r["probe"][0] == place]
    if not sel:
        continue
    print("\n%s placement" % place)
    print("| workload | metric | new (median) | %s (median) | new/ref | runs new/ref |" % ref)
    print("|---|---|---:|---:|---:|---|")
    for w in dict.fromkeys(r["workload"] for r in sel):
        for metric in ("epoch_s", "step_s", "allreduce_us"):
            new = [r for r in sel if r["workload"] == w and r["build"] == "new" and metric in r]
            old = [r for r in sel if r["workload"] == w and r["build"] == ref and metric in r]
            if not new or not old:
                continue
            if metric == "allreduce_us":
                for size in new[0][metric]:
                    a = statistics.median(r[metric][size] for r in new)
                    b = statistics.median(r[metric][size] for r in old)
                    print("| allreduce %s B | us | %.2f | %.2f | %.2f | %d/%d |"
                          % (size, a, b, a / b, len(new), len(old)))
            else:
                a = statistics.median(r[metric] for r in new)
                b = statistics.median(r[metric] for r in old)
                print("| %s | %s | %.4f | %.4f | %.2f | %d/%d |" % (w, metric, a, b, a / b,
                                                                  len(new), len(old)))
EOF
