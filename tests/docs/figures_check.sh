#!/bin/sh
# tests/docs/figures_check.sh [ROOT] - performance figures live in docs/results.md only.
#
# Fails (exit 1, listing file:line) when README.md or a page under docs/ other than
# docs/results.md quotes a figure: a ratio such as "2.3x" or "864x", a rate such as
# "250 tokens/s", or "4.20 tokens per call/step". Two exceptions:
#   - README.md's copy of the headline table, between "<!-- results.sh: headline begin" and
#     "<!-- results.sh: headline end", which bench/results.sh writes: every line of it must
#     appear verbatim in docs/results.md;
#   - lines between "<!-- figures-check: off (why) -->" and "<!-- figures-check: on -->", for
#     text that is not a measurement (a program's sample output); the marker must say why.
# Tree shapes (4x2x2), hex (0x1f) and "K x V" are not figures and pass.
set -eu
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
status=0
files=$(ls README.md; find docs -name '*.md' ! -path docs/results.md | sort)
for f in $files; do
  awk -v file="$f" -v results=docs/results.md '
    BEGIN { while ((getline l < results) > 0) have[l] = 1; bad = 0 }
    /<!-- results.sh: headline begin/ { block = 1; next }
    /<!-- results.sh: headline end/ { block = 0; next }
    /<!-- figures-check: off/ {
      if ($0 !~ /figures-check: off \(.+\)/) { printf "%s:%d: figures-check: off needs a reason in parentheses\n", file, NR; bad = 1 }
      off = 1; next }
    /<!-- figures-check: on/ { off = 0; next }
    block { if (!($0 in have)) { printf "%s:%d: headline line not in docs/results.md (run bench/results.sh): %s\n", file, NR, $0; bad = 1 } next }
    off { next }
    {
      line = tolower($0)
      if (line ~ /(^|[^0-9a-z_.])[0-9]+(\.[0-9]+)?(x|×)([^0-9a-z_]|$)/ ||
          line ~ /[0-9][0-9.,]* *(tokens|tok)\/s/ ||
          line ~ /[0-9]+\.[0-9]+ (generated )?tokens per (target |verification )?(call|step)/) {
        printf "%s:%d: a figure outside docs/results.md (link to it instead): %s\n", file, NR, $0; bad = 1
      }
    }
    END { exit bad }' "$f" || status=1
done
[ "$status" = 0 ] && echo "figures check: no figures outside docs/results.md"
exit "$status"
