#!/usr/bin/env bash
# Builds the HFST optimized-lookup analyzers the language cards name, into
# OUT_DIR (default build/fst). The list comes from the cards
# (services/structural/analyzer_builds.py); PYTHON (default python3) must be
# able to import champollion.core.cards (PyYAML, jsonschema).
#   apertium  Debian's Apertium data: lt-print -> ATT -> hfst-txt2fst -j ->
#             hfst-fst2fst -w. Apertium's .bin holds several sections
#             (punctuation, lexicon, ...); -j joins them into one transducer,
#             without which lookup sees the first section only.
#   script    a build script the card names, run with OUT_DIR
#             (e.g. eval_standards/crk/analyzer/build.sh, the Plains Cree fragment)
set -euo pipefail
out=$(mkdir -p "${1:-build/fst}" && cd "${1:-build/fst}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Listed first, so that a card error stops the build before anything is written.
"${PYTHON:-python3}" -m services.structural.analyzer_builds list > "$work/builds"
while read -r kind file source; do
  started=$(date +%s%N)
  case "$kind" in
    apertium)
      lt-print -H "$source" > "$work/$file.att"
      hfst-txt2fst -j -i "$work/$file.att" -o "$work/$file.hfst"
      hfst-fst2fst -w -i "$work/$file.hfst" -o "$out/$file" ;;
    script)
      "$repo/$source" "$out" ;;
  esac
  [[ -f "$out/$file" ]] || { echo "$0: $kind build from $source wrote no $file" >&2; exit 1; }
  printf '%s  %s bytes  %s ms\n' "$file" "$(stat -c %s "$out/$file")" \
    "$(( ($(date +%s%N) - started) / 1000000 ))"
done < "$work/builds"
