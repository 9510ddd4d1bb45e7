#!/usr/bin/env bash
# Builds the HFST optimized-lookup analyzers the language cards name, into
# OUT_DIR (default build/fst):
#   nob, spa, eng, eus  from Debian's Apertium data (lttoolbox -> ATT -> HFST)
#   crk                 the project's Plains Cree lexc fragment
# Apertium's .bin holds several sections (punctuation, lexicon, ...); -j joins
# them into one transducer, without which lookup sees the first section only.
set -euo pipefail
out=${1:-build/fst}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

apertium=/usr/share/apertium
declare -A sources=(
  [nob]=$apertium/apertium-nno-nob/nob-nno.automorf.bin
  [spa]=$apertium/apertium-eng-spa/spa-eng.automorf.bin
  [eng]=$apertium/apertium-eng-spa/eng-spa.automorf.bin
  [eus]=$apertium/apertium-eu-es/eu-es.automorf.bin
)
for code in nob spa eng eus; do
  started=$(date +%s%N)
  lt-print -H "${sources[$code]}" > "$work/$code.att"
  hfst-txt2fst -j -i "$work/$code.att" -o "$work/$code.hfst"
  hfst-fst2fst -w -i "$work/$code.hfst" -o "$out/$code.hfstol"
  printf '%s.hfstol  %s bytes  %s ms\n' "$code" "$(stat -c %s "$out/$code.hfstol")" \
    "$(( ($(date +%s%N) - started) / 1000000 ))"
done
"$here/../../eval_standards/crk/analyzer/build.sh" "$out"
