#!/bin/sh
# tests/compile_fail/check_output.sh MAX_LINES REGEX COMPILER ARGS... - compiles with COMPILER ARGS
# and passes when the compile fails, a line of its output matches REGEX (extended) and the whole
# output has at most MAX_LINES lines: a mistake in a user's type gets one error naming it, not a
# wall of template notes. Prints the output and its line count either way.
max=$1 re=$2
shift 2
if out=$("$@" 2>&1); then
  echo "check_output.sh: it compiled, and must not"
  exit 1
fi
n=$(printf '%s\n' "$out" | wc -l)
printf '%s\n' "$out"
echo "check_output.sh: $n lines of compiler output (at most $max)"
printf '%s\n' "$out" | grep -qE -- "$re" || { echo "check_output.sh: no line matches '$re'"; exit 1; }
[ "$n" -le "$max" ] || { echo "check_output.sh: more than $max lines"; exit 1; }
