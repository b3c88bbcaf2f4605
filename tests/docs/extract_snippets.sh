#!/bin/sh
# tests/docs/extract_snippets.sh IN.md OUT.cpp - the code blocks of a page that must compile.
#
# A ```cpp block right after a line "<!-- compiled: file -->" is copied as it stands (it is C++
# at namespace scope); after "<!-- compiled: body -->" it becomes the body of a function (a
# fragment of statements). Names the fragments use without defining them come from
# tests/docs/snippet_prelude.hpp. #line directives point compiler errors at the page's lines.
# Fails when the page has no such block, so that a lost marker is noticed.
set -eu
in=$1 out=$2
awk -v src="$in" '
  BEGIN { print "// Generated from " src " by tests/docs/extract_snippets.sh: edit the page, not this file."
          print "#include \"snippet_prelude.hpp\""; n = 0 }
  /^<!-- compiled: (file|body) -->/ { mode = ($0 ~ /body/) ? "body" : "file"; want = 1; next }
  want && /^```cpp/ { want = 0; inblock = 1; ++n
    if (mode == "body") print "[[maybe_unused]] static void snippet_" n "() {"
    printf "#line %d \"%s\"\n", NR + 1, src; next }
  want { want = 0 }
  inblock && /^```/ { inblock = 0; if (mode == "body") print "}"; next }
  inblock { print }
  END { if (n == 0) { print "extract_snippets.sh: no <!-- compiled: ... --> block in " src > "/dev/stderr"; exit 1 } }
' "$in" >"$out.tmp"
mv "$out.tmp" "$out"
