#!/usr/bin/env bash
# docs/architecture.md is the map of the C tree: every C/C++ source and
# header under libtnt/src (all subdirectories), pmix/launcher and spank must
# be named there in backquotes, with its one job.
#   check_architecture_doc.sh <source root>
# A file counts as named when a backquoted span of the document is one of
# its path suffixes that no other of these files shares: `verdict.c`, or
# `coll/verdict.c`, or `libtnt/src/coll/verdict.c`. A file name that occurs
# in several directories (plan.c) must be named with its directory
# (`fusion/plan.c`). A backquoted path into these directories that names no
# existing file (a file renamed or removed; a glob such as `shm*.c` is not
# checked) fails too. Exits 1 naming each.
set -euo pipefail
root=${1:?usage: check_architecture_doc.sh <source root>}
doc=$root/docs/architecture.md
[ -r "$doc" ] || { echo "check_architecture_doc: cannot read $doc"; exit 1; }

mapfile -t files < <(cd "$root" && find libtnt/src pmix/launcher spank -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cpp' -o -name '*.cxx' \
       -o -name '*.hh' -o -name '*.hpp' -o -name '*.cu' \) | LC_ALL=C sort)
if [ "${#files[@]}" -eq 0 ]; then
    echo "check_architecture_doc: no C sources found under $root"
    exit 1
fi

# Every backquoted span of the document, one per line (spans do not cross
# lines in it).
declare -A named=()
while IFS= read -r span; do
    named[$span]=1
done < <(grep -oE '`[^`]+`' "$doc" | sed -E 's/^`//; s/`$//')

# How many files share each path suffix (at a '/').
declare -A owners=()
suffixes() {
    local p=$1
    while :; do
        echo "$p"
        [ "$p" = "${p#*/}" ] && break
        p=${p#*/}
    done
}
for f in "${files[@]}"; do
    while IFS= read -r s; do
        owners[$s]=$(( ${owners[$s]:-0} + 1 ))
    done < <(suffixes "$f")
done

bad=0
for f in "${files[@]}"; do
    ok=0 shortest=
    while IFS= read -r s; do
        [ "${owners[$s]}" -eq 1 ] || continue
        [ -n "$shortest" ] || shortest=$s
        if [ -n "${named[$s]+x}" ]; then
            ok=1
            break
        fi
    done < <(suffixes "$f" | awk '{ print length($0) " " $0 }' | sort -n | cut -d' ' -f2-)
    if [ "$ok" = 0 ]; then
        b=$(basename "$f")
        if [ "$shortest" != "$b" ] && [ -n "${named[$b]+x}" ]; then
            echo "check_architecture_doc: $f is not named in docs/architecture.md: \`$b\` is ambiguous (several directories have one); write \`$shortest\`"
        else
            echo "check_architecture_doc: $f is not named in docs/architecture.md; add \`$shortest\` with its one job"
        fi
        bad=1
    fi
done

# Backquoted paths into these directories must name files that exist.
layers=$(cd "$root/libtnt/src" && find . -mindepth 1 -maxdepth 1 -type d | sed 's#^\./##' | paste -sd'|')
for span in "${!named[@]}"; do
    [[ $span =~ ^(libtnt/src|pmix/launcher|launcher|spank|$layers)/[^\ *]*\.(c|h|cc|cpp|cxx|hh|hpp|cu)$ ]] || continue
    if [ -z "${owners[$span]+x}" ]; then
        echo "check_architecture_doc: docs/architecture.md names \`$span\`, which is no file under libtnt/src, pmix/launcher or spank"
        bad=1
    fi
done

[ "$bad" = 0 ] && echo "check_architecture_doc: docs/architecture.md names all ${#files[@]} C sources and headers"
exit "$bad"
