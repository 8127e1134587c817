#!/usr/bin/env bash
# heuristics.sh - the five kernel PCP heuristics, each switched off and on in the workload
# built to expose it, side by side with pcpmalloc-ab (interleaved runs), and a Markdown
# report with the kernel post's figure beside ours (kernel-pcp.md §11).
# Usage: bench/heuristics.sh [-n RUNS] [-o REPORT.md]    (default 5 runs, stdout)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5 out=/dev/stdout
while [ $# -gt 0 ]; do
  case "$1" in
    -n) runs=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    *) echo "usage: bench/heuristics.sh [-n RUNS] [-o REPORT.md]" >&2; exit 2 ;;
  esac
done
[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null
ab=build/bench/pcpmalloc-ab
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
P=pcpmalloc:PCPMALLOC_
xl=(build/bench/wl-xthread -p 1 -n 2000000 -s 8192 -S 32768)
xs=(build/bench/wl-xthread -p 1 -n 10000000 -s 16 -S 256)
# small objects: their slabs are order-0 pages, the only order alloc_factor scales
burst=(build/bench/wl-burst -t 2 -m 128 -b 4 -i 50 -s 16 -S 256)
# bursts with idle gaps of several decay periods between them
idle=(build/bench/wl-burst -t 2 -m 64 -b 6 -i 250 -s 16 -S 256)
run() { # name, allocators..., -- command
  local name=$1; shift
  echo "== $name" >&2
  "$ab" -q -n "$runs" --json "$tmp/$name.json" "$@" >"$tmp/$name.txt"
}
run free_high_batch -a ${P}FREE_HIGH_BATCH=0 -a ${P}FREE_HIGH_BATCH=1 -- "${xl[@]}"
run free_high -a ${P}FREE_HIGH=0 -a ${P}FREE_HIGH=1 -- "${xl[@]}"
run fbatch -a ${P}FBATCH=15 -a ${P}FBATCH=31 -- "${xs[@]}"
run alloc_factor -a ${P}ALLOC_SCALE=0 -a ${P}ALLOC_SCALE=1 -- "${burst[@]}"
run count_min -a ${P}DECAY_MODE=mainline,PCPMALLOC_DECAY_MS=100 \
    -a ${P}DECAY_MODE=count_min,PCPMALLOC_DECAY_MS=100 -- "${idle[@]}"
run count_min_make -a ${P}DECAY_MODE=mainline,PCPMALLOC_DECAY_MS=100 \
    -a ${P}DECAY_MODE=count_min,PCPMALLOC_DECAY_MS=100 --workload make
/usr/bin/python3 bench/heuristics_report.py "$tmp" "$runs" >"$out"
