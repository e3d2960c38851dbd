#!/usr/bin/env bash
# run_timeline_overhead.sh BUILD [REF_BUILD] [ROUNDS] [OUT_DIR]
# The timeline's cost on the digits workload (docs/timeline.md): per round,
# train_bench.py --backend tnt --workload digits on 2 ranks with
# TNT_TIMELINE unset ("off") and set ("on") from BUILD, and unset from
# REF_BUILD ("ref", a build of the commit before the timeline) when given,
# in an order that rotates every round. Each run is bracketed by the vCPU
# placement probe; a run whose two probes disagree is marked "mixed". One
# line per run: "RUN <label> <placement> <epoch_s>". Not a test: nothing is
# asserted. Run it alone (under the benchmark lock on shared machines).
set -u
build=$(cd "$1" && pwd)
ref=${2:+$(cd "$2" && pwd)}
rounds=${3:-4}
out=${4:-$(mktemp -d /tmp/tnt-timeline-bench.XXXXXX)}
here=$(cd "$(dirname "$0")" && pwd)
probe=${TNT_VCPU_PROBE:-/tmp/vcpu_probe}
mkdir -p "$out"
[ -x "$probe" ] || { echo "run_timeline_overhead: build the probe first: cc -O2 -pthread -o $probe shared/tools/vcpu_probe.c" >&2; exit 1; }
export OMP_NUM_THREADS=1

placement() { "$probe" | awk '{ print $NF }'; }

one() { # label build [TNT_TIMELINE value]
  local label=$1 b=$2 tl=${3:-} before after line
  before=$(placement)
  line=$(env -u TNT_TIMELINE ${tl:+TNT_TIMELINE=$tl} PYTHONPATH="$b/python" \
    timeout 300 "$b/bin/tarantella" -n 2 -- /usr/bin/python3 "$here/train_bench.py" \
    --backend tnt --workload digits | grep '^RESULT ')
  after=$(placement)
  local epoch
  epoch=$(printf '%s\n' "${line#RESULT }" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["epoch_s"])')
  [ "$before" = "$after" ] || before=mixed
  echo "RUN $label $before $epoch"
}

labels=(off on)
[ -n "$ref" ] && labels+=(ref)
for ((r = 0; r < rounds; r++)); do
  n=${#labels[@]}
  for ((i = 0; i < n; i++)); do
    label=${labels[$(((i + r) % n))]}
    case $label in
    off) one off "$build" ;;
    on) one on "$build" "$out/digits-round$r.json" ;;
    ref) one ref "$ref" ;;
    esac
  done
done
echo "traces in $out"
