#!/usr/bin/env bash
# Compile the Plains Cree test fragment into an HFST optimized-lookup analyzer.
#
#   build.sh OUT_DIR   ->  OUT_DIR/crk-fragment.hfstol
#
# The result analyzes: looking up a surface form (ê-nipâyân) returns its
# analyses (PV/e+nipâw+V+AI+Cnj+1Sg). Needs the HFST command-line tools
# (Debian/Ubuntu package `hfst`).
#
# Steps:
#   1. hfst-lexc      lexc -> generator (upper = analysis, lower = surface);
#                     --Werror so that e.g. an unused sublexicon fails the build.
#   2. hfst-invert    generator -> analyzer (input = surface).
#   3. hfst-substitute  every flag arc @F@:@F@ becomes @F@:@0@ (epsilon on the
#                     analysis side). Lookup still checks the flag on the
#                     input side, but the flag no longer shows up in the
#                     returned analysis: hfst-optimized-lookup hides flags
#                     itself, the Python binding's lookup() does not.
#   4. hfst-fst2fst -w  -> weighted optimized-lookup format (.hfstol).
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lexc="$here/crk-fragment.lexc"
out_dir=$1
mkdir -p "$out_dir"

for tool in hfst-lexc hfst-invert hfst-substitute hfst-fst2fst; do
    command -v "$tool" >/dev/null || { echo "$0: $tool not found (install the hfst package)" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

hfst-lexc --Werror --format=openfst-tropical -o "$work/generator.hfst" "$lexc"
hfst-invert -i "$work/generator.hfst" -o "$work/analyzer-flags.hfst"

# One relabelling per flag diacritic declared in the lexc file.
grep -o '@[PNRDCU]\.[A-Za-z0-9_.]*@' "$lexc" | sort -u \
    | awk '{ printf "%s:%s\t%s:@0@\n", $1, $1, $1 }' > "$work/flags.tsv"
if [[ -s "$work/flags.tsv" ]]; then
    hfst-substitute -F "$work/flags.tsv" -i "$work/analyzer-flags.hfst" -o "$work/analyzer.hfst"
else
    cp "$work/analyzer-flags.hfst" "$work/analyzer.hfst"
fi

hfst-fst2fst --optimized-lookup-weighted -i "$work/analyzer.hfst" -o "$out_dir/crk-fragment.hfstol"
echo "wrote $out_dir/crk-fragment.hfstol" >&2
