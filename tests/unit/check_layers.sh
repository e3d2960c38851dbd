#!/usr/bin/env bash
# libtnt's layering, enforced: a file may include headers of its own layer or
# of lower ones, never of a higher one; no code below core/ calls or takes
# the address of a public function core/ defines (a TNT_API one: tnt/tnt.h
# declares them all, so includes alone cannot show it); and no #include
# climbs out of its directory with "../" anywhere in the C tree
# (docs/architecture.md).
#   check_layers.sh <source root>
set -euo pipefail
root=${1:?usage: check_layers.sh <source root>}
src=$root/libtnt/src

# Rank of each directory under libtnt/src; equal ranks may not include each
# other unless they are the same directory.
declare -A rank=([util]=0 [reduce]=1 [boot]=1 [shard]=1 [topo]=1 [transport]=2 [comm]=3
                 [coll]=4 [p2p]=4 [fusion]=5 [gpu]=5 [core]=6)
bad=0
for dir in "$src"/*/; do
    layer=$(basename "$dir")
    if [ -z "${rank[$layer]+x}" ]; then
        echo "check_layers: libtnt/src/$layer/ has no rank here; add it to this script and docs/architecture.md"
        bad=1
        continue
    fi
    while IFS=: read -r file line inc; do
        target=${inc%%/*}
        [ "$target" = "$inc" ] && continue          # a file of the same directory
        if [ -z "${rank[$target]+x}" ]; then
            continue                                 # not a libtnt layer (e.g. tnt/tnt.h)
        fi
        if [ "$target" != "$layer" ] && [ "${rank[$target]}" -ge "${rank[$layer]}" ]; then
            echo "check_layers: ${file#"$root"/}:$line includes $inc: $layer/ (rank ${rank[$layer]}) may not include $target/ (rank ${rank[$target]})"
            bad=1
        fi
    done < <(grep -rnoE '^#include "[^"]+"' "$dir" | sed -E 's/#include "([^"]+)"/\1/')
done

# Public functions of core/ used below it. String literals and comments are
# dropped first: messages name the public calls freely.
core_api=$(grep -rhoE '^TNT_API [^(]*\b(tnt_[a-z0-9_]+)\(' "$src"/core --include='*.c' |
           sed -E 's/.*\b(tnt_[a-z0-9_]+)\($/\1/' | sort -u | paste -sd'|')
if [ -n "$core_api" ]; then
    while IFS= read -r -d '' file; do
        while IFS=: read -r line code; do
            echo "check_layers: ${file#"$root"/}:$line uses core/'s public API ($(grep -owE "$core_api" <<<"$code" | head -1)) from below core/; call the layer underneath (e.g. tnt_coll_* inside tnt_progress_enter/leave)"
            bad=1
        done < <(sed -E 's/"([^"\\]|\\.)*"//g; s#/\*.*\*/##g; s#/\*.*$##; s#//.*$##; s#^[[:space:]]*\*.*$##' "$file" |
                 grep -nwE "$core_api" || true)
    done < <(find "$src" \( -name '*.c' -o -name '*.h' \) -not -path "$src/core/*" -print0)
fi

if grep -rnE '^#include "(\.\./|[^"]*/\.\./)' "$root"/libtnt "$root"/pmix "$root"/spank "$root"/python \
        --include='*.c' --include='*.h' --include='*.cu'; then
    echo "check_layers: the lines above include through '../'; include by path from libtnt/src instead"
    bad=1
fi
[ "$bad" = 0 ] && echo "check_layers: libtnt layering holds"
exit "$bad"
