#!/usr/bin/env bash
# check_settings_doc.sh TEST_SETTINGS ENVIRONMENT_MD
# Passes when the TNT_* variables that libtnt's settings parser knows
# (`TEST_SETTINGS --list-names`) are exactly the rows of the one table in
# docs/environment.md whose last column ("read by") says libtnt. The other
# rows (TNT_OUTPUT_ON_ALL_DEVICES, read by the Python package; TNT_PIN, set by
# the launcher and the plugin for information) are not libtnt's to parse, so
# they must not be in the parser; a variable libtnt parses but the table does
# not mark libtnt, or the other way round, fails with both lists printed.
# Each libtnt row must also say what the parser does (`TEST_SETTINGS
# --describe`): its default column starts with the parser's default (rows
# whose default the layers choose by layout are exempt), its valid column
# names both bounds of a number (`0` to `1e9`) and every choice name, in
# backquotes.
set -u
list_names=$1 doc=$2

parser=$("$list_names" --list-names) || { echo "check_settings_doc: $list_names failed" >&2; exit 1; }
parser=$(printf '%s\n' "$parser" | sort)
# Table rows look like "| `TNT_X` | default | valid | meaning | read by |".
documented=$(awk -F'|' '/^\| `TNT_[A-Z0-9_]+` \|/ {
    name = $2; gsub(/[ `]/, "", name)
    if ($(NF - 1) ~ /libtnt/) print name
  }' "$doc" | sort)
all_rows=$(grep -cE '^\| `TNT_[A-Z0-9_]+` \|' "$doc")

echo "parser:     $(echo $parser)"
echo "documented: $(echo $documented)"
status=0
if [ -z "$documented" ] || [ "$all_rows" -le 0 ]; then
  echo "check_settings_doc: no TNT_* table rows marked libtnt found in $doc" >&2
  status=1
fi
if [ "$parser" != "$documented" ]; then
  echo "check_settings_doc: the parser (libtnt/src/util/settings.c) and the table in $doc differ:" >&2
  diff <(printf '%s\n' "$parser") <(printf '%s\n' "$documented") | grep -E '^[<>]' | sed 's/^</  only in the parser:/; s/^>/  only in the doc:/' >&2
  status=1
fi
dups=$(awk -F'|' '/^\| `TNT_[A-Z0-9_]+` \|/ { print $2 }' "$doc" | sort | uniq -d)
if [ -n "$dups" ]; then
  echo "check_settings_doc: documented more than once:$dups" >&2
  status=1
fi
# Defaults, bounds and choices.
while IFS='|' read -r name default kind min max choices; do
  row=$(grep -E "^\| \`$name\` \|" "$doc" | head -1)
  [ -n "$row" ] || continue
  doc_default=$(awk -F'|' '{ print $3 }' <<<"$row")
  valid=$(awk -F'|' '{ print $4 }' <<<"$row")
  if [ -n "$default" ]; then
    first=$(grep -oE '`[^`]*`' <<<"$doc_default" | head -1 | tr -d '`')
    if [ "$first" != "$default" ]; then
      echo "check_settings_doc: $name: the doc's default is '${first:-none}', the parser's '$default'" >&2
      status=1
    fi
  fi
  case "$kind" in
  size_kb|seconds|int)
    for bound in "$min" "$max"; do
      if ! grep -oE '`[0-9.e+]+`' <<<"$valid" | tr -d '`' |
           awk -v b="$bound" '$1 + 0 == b + 0 { found = 1 } END { exit !found }'; then
        echo "check_settings_doc: $name: the doc's valid values do not name the bound $bound ($valid)" >&2
        status=1
      fi
    done ;;
  choice)
    IFS=',' read -ra names <<<"$choices"
    for c in "${names[@]}"; do
      if ! grep -qF "\`$c\`" <<<"$valid"; then
        echo "check_settings_doc: $name: the doc's valid values do not name the choice '$c'" >&2
        status=1
      fi
    done ;;
  esac
done < <("$list_names" --describe)

[ "$status" = 0 ] && echo "check_settings_doc: OK ($(echo "$parser" | wc -l) libtnt variables: names, defaults, bounds, choices)"
exit $status
