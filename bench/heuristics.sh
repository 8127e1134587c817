#!/usr/bin/env bash
# heuristics.sh - the five kernel PCP heuristics, each switched off and on in the workload
# built to expose it, side by side with pcpmalloc-ab (interleaved runs), and a Markdown
# report with the kernel post's figure beside ours (kernel-pcp.md §11).
# Each pair runs once more on a synthetic 224-CPU machine (PCPMALLOC_TOPOLOGY_SYNTHETIC, one
# CPU per thread): the tables' 224-CPU columns give its counters.
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
# the 224-CPU column: the same pair once more on a synthetic 2-socket 224-CPU machine, each
# thread on a CPU of its own (thread-id hash), for the counters (times there mean nothing)
big="PCPMALLOC_CPU_SOURCE=tid,PCPMALLOC_TOPOLOGY_SYNTHETIC=pack:2 numa:1 l3:1(size=110100480) l2:56(size=2097152) core:1 pu:2"
run() { # name, allocators..., -- command
  local name=$1; shift
  echo "== $name" >&2
  "$ab" -q -n "$runs" --json "$tmp/$name.json" "$@" >"$tmp/$name.txt"
  local a=() seen=0
  for x in "$@"; do
    if [ $seen = 1 ]; then a+=("${x/,PCPMALLOC_SHEAVES=0/},$big"); seen=0; continue; fi
    [ "$x" = -a ] && seen=1
    a+=("$x")
  done
  "$ab" -q -n 1 --json "$tmp/$name-224.json" "${a[@]}" >"$tmp/$name-224.txt"
}
# Seeds 1-3 act where objects and slab pages meet the pcp: on 2 CPUs they run with the
# per-CPU slab level off (PCPMALLOC_SHEAVES=0), since since issue 22 the sheaves absorb a
# producer/consumer pair's traffic there too (0 free_high drains either way); the 224-CPU
# column keeps the sheaves, to show what that level leaves to these heuristics at scale.
ns=,PCPMALLOC_SHEAVES=0
run free_high_batch -a ${P}FREE_HIGH_BATCH=0$ns -a ${P}FREE_HIGH_BATCH=1$ns -- "${xl[@]}"
run free_high -a ${P}FREE_HIGH=0$ns -a ${P}FREE_HIGH=1$ns -- "${xl[@]}"
run fbatch -a ${P}FBATCH=15$ns -a ${P}FBATCH=31$ns -- "${xs[@]}"
run alloc_factor -a ${P}ALLOC_SCALE=0 -a ${P}ALLOC_SCALE=1 -- "${burst[@]}"
# count_min acts in the decays that run while a pcp is in use (it keeps what was taken since
# the last one); decay is lazy here (a refill runs it once its period is over), so it runs
# only inside the bursts.  A 64 MiB burst takes about one 100 ms period on an idle 2-CPU VM
# (4 decays in the whole run, no effect) but several under load (-24 %): with 25 ms periods
# every burst spans several decays on either (bench/RESULTS.md, issue 22 sixth round, nhalf).
run count_min -a ${P}DECAY_MODE=mainline,PCPMALLOC_DECAY_MS=25 \
    -a ${P}DECAY_MODE=count_min,PCPMALLOC_DECAY_MS=25 -- "${idle[@]}"
run count_min_make -a ${P}DECAY_MODE=mainline,PCPMALLOC_DECAY_MS=100 \
    -a ${P}DECAY_MODE=count_min,PCPMALLOC_DECAY_MS=100 --workload make
/usr/bin/python3 bench/heuristics_report.py "$tmp" "$runs" >"$out"
