#!/usr/bin/env bash
# zonegrow.sh - the zone's growths and its lock's holds at 224 virtual CPUs (bench/scale.sh's
# machine, PCPMALLOC_CPU_SOURCE=tid, and its run lengths), one line per run, from the JSON
# statistics: growths, zone lock acquisitions, mean and longest hold, holds of 2^18 cycles
# or more (count and total), time per growth (outside the zone lock since issue 22), the
# grower lock's longest hold and waits, huge_lock acquisitions.  Libraries without a key
# print 0 for it.
#
# Usage: bench/zonegrow.sh [-r RUNS] LIB.so...      (default: build/preload/libpcpmalloc.so)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3
if [ "${1:-}" = -r ]; then runs=$2; shift 2; fi
[ $# -gt 0 ] || set -- build/preload/libpcpmalloc.so
syn='pack:2 numa:1 l3:1(size=110100480) l2:56(size=2097152) core:1 pu:2'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for lib in "$@"; do
	lib=$(readlink -f "$lib")
	for wl in "wl-xthread -s 8192 -S 32768 -p 16 -n 20000" "wl-churn -s 4096 -S 16384 -t 32 -n 50000" \
		"wl-churn -s 16384 -S 32768 -k 250 -t 32 -n 25000"; do
		for _ in $(seq "$runs"); do
			# shellcheck disable=SC2086
			LD_PRELOAD=$lib PCPMALLOC_STATS=json PCPMALLOC_STATS_FILE=$tmp/st.json \
				PCPMALLOC_CPU_SOURCE=tid PCPMALLOC_TOPOLOGY_SYNTHETIC="$syn" \
				build/bench/$wl >/dev/null
			python3 - "$tmp/st.json" "$(basename "$lib")" "$wl" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
g = lambda k: s.get(k, 0)
print('%-16s %-34s grow %3d  zone_lock %6d  hold mean %6.0f ns  max %9.1f us  long %3d (%6.1f ms)'
      '  per growth %7.1f us  grow waits %d (%7.1f us)  huge_lock %d' % (
          sys.argv[2], sys.argv[3].split(' -t')[0].split(' -p')[0], g('zone_grow'), g('zone_lock'),
          g('zone_lock_hold_ns'), g('zone_lock_hold_max_ns') / 1e3, g('zone_lock_long_holds'),
          g('zone_lock_long_hold_ns') / 1e6, g('zone_grow_ns') / max(1, g('zone_grow')) / 1e3,
          g('zone_grow_waits'), g('zone_grow_wait_ns') / 1e3, g('huge_lock')))
PY
		done
	done
done
