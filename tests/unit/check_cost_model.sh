#!/usr/bin/env bash
# check_cost_model.sh COST_MODEL_DUMP COST_MODEL_PY
# The cost model exists twice: in C (libtnt's algorithm selection) and in
# Python (the fit and the predictions of docs/scaling.md). Both print costs
# and choices on one grid; this passes when every cost agrees to 1e-9
# relative and every choice is the same.
set -u
c_out=$("$1") || { echo "check_cost_model: $1 failed" >&2; exit 1; }
py_out=$(/usr/bin/python3 "$2" --dump) || { echo "check_cost_model: $2 --dump failed" >&2; exit 1; }
paste -d'|' <(printf '%s\n' "$c_out") <(printf '%s\n' "$py_out") | /usr/bin/python3 -c '
import sys
bad = lines = 0
for row in sys.stdin:
    c, p = (x.split() for x in row.rstrip("\n").split("|"))
    lines += 1
    # n bytes links, one cost per algorithm, the choice
    same = len(c) == len(p) and c[:3] == p[:3] and c[-1] == p[-1] and all(
        abs(float(a) - float(b)) <= 1e-9 * max(abs(float(a)), 1e-30)
        for a, b in zip(c[3:-1], p[3:-1]))
    if not same:
        bad += 1
        print("differ: C  ", " ".join(c), "\n        py ", " ".join(p))
if lines == 0:
    print("check_cost_model: no output"); sys.exit(1)
print(f"check_cost_model: {lines} grid points, {bad} differ")
sys.exit(1 if bad else 0)
'
