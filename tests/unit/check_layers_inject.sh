#!/usr/bin/env bash
# check_layers_inject.sh SOURCE_ROOT
# The layering check can fail: in a copy of libtnt/src, one use of core/'s
# public API from below core/ (transport/) must be reported by
# check_layers.sh, and the untouched copy must pass.
set -euo pipefail
root=${1:?usage: check_layers_inject.sh <source root>}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/tnt-layers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/libtnt" "$tmp/pmix" "$tmp/spank" "$tmp/python"
cp -r "$root/libtnt/src" "$tmp/libtnt/src"
bash "$here/check_layers.sh" "$tmp" >/dev/null || { echo "FAIL: the untouched copy fails"; exit 1; }
victim=$(ls "$tmp"/libtnt/src/transport/*.c | head -1)
echo 'static void *const tnt_layers_probe = (void *)tnt_barrier;' >>"$victim"
if out=$(bash "$here/check_layers.sh" "$tmp"); then
    echo "FAIL: check_layers.sh accepted a tnt_barrier reference in ${victim#"$tmp"/}"
    exit 1
fi
echo "$out"
grep -q "uses core/'s public API (tnt_barrier)" <<<"$out" || { echo "FAIL: wrong message"; exit 1; }
echo "check_layers_inject: the injected call was caught"
