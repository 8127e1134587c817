#!/usr/bin/env bash
# test_remotefree.sh SRC BUILD - bench/remotefree in a small size (200 objects x 5 rounds):
# a row for glibc and pcpmalloc (and each installed peer) with six positive figures, and
# pcpmalloc's remote free counted (a --toggle-collect on a folded or renamed loop counts 0).
set -euo pipefail
src=$1 build=$2
command -v valgrind >/dev/null || { echo "valgrind not installed: skipped"; exit 77; }
out=$(bash "$src/bench/remotefree" "$build" 32 200 5)
echo "$out"
echo "$out" | awk '
  $1 == "glibc" || $1 == "pcpmalloc" { seen[$1] = 1 }
  $1 ~ /^(glibc|jemalloc|mimalloc|tcmalloc|pcpmalloc)$/ {
    if (NF != 7) { print "bad row: " $0; bad = 1 }
    for (i = 2; i <= 7; i++) if (!($i + 0 > 0)) { print "not positive: " $0; bad = 1 }
  }
  END {
    if (!seen["glibc"] || !seen["pcpmalloc"]) { print "missing rows"; bad = 1 }
    exit bad
  }'
