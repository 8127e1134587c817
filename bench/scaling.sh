#!/usr/bin/env bash
# scaling.sh - throughput of the scaling workloads at 1, 2, 4, 8, 16 threads under every
# allocator: builds what it needs, writes one CSV row per run, and prints per workload and
# allocator the throughput (Mops/s, median of the runs) per thread count with the speedup
# over 1 thread.  Weak scaling: every thread (or producer/consumer pair) does the same work,
# so perfect scaling doubles the throughput with the threads.  Under 8 minutes on 16 cores.
#
# Usage: bench/scaling.sh [--quick] [-b BUILD_DIR] [-o OUT.csv] [-t "1 2 4 8 16"] [-n RUNS]
#                         [-a "glibc jemalloc mimalloc tcmalloc pcpmalloc"] [-w "churn ..."]
#   --quick     1 and 2 threads, small sizes, 1 run (a check that it runs: its figures mean
#               nothing; with -o unset the CSV goes to BUILD_DIR)
#   --no-build  use BUILD_DIR as it is (the meson test does)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build
out=
threads="1 2 4 8 16"
runs=3
allocs="glibc jemalloc mimalloc tcmalloc pcpmalloc"
workloads="churn larson xthread-small xthread-large burst"
quick=0
nobuild=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 threads="1 2" runs=1 ;;
	--no-build) nobuild=1 ;;
	-b) build=$2; shift ;;
	-o) out=$2; shift ;;
	-t) threads=$2; shift ;;
	-n) runs=$2; shift ;;
	-a) allocs=$2; shift ;;
	-w) workloads=$2; shift ;;
	-h | --help) sed -n '2,14p' "$0"; exit 0 ;;
	*) echo "scaling.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$out" ] || out=$build/scaling-$(date +%Y%m%d-%H%M%S).csv  # (in the build tree, not the sources)

# build what is needed
if [ $nobuild = 0 ]; then
	[ -f "$build/build.ninja" ] || meson setup "$build" "$src" >/dev/null
	meson compile -C "$build" >/dev/null
fi
build=$(cd "$build" && pwd)

libdir=/usr/lib/x86_64-linux-gnu
declare -A lib=([glibc]="" [jemalloc]=$libdir/libjemalloc.so.2 [mimalloc]=$libdir/libmimalloc.so.2
	[tcmalloc]=$libdir/libtcmalloc_minimal.so.4 [pcpmalloc]=$build/preload/libpcpmalloc.so)
have=""
for a in $allocs; do
	if [ -z "${lib[$a]+x}" ]; then
		echo "scaling.sh: skipping unknown allocator $a" >&2
	elif [ -n "${lib[$a]}" ] && [ ! -e "${lib[$a]}" ]; then
		echo "scaling.sh: skipping $a: ${lib[$a]} not installed" >&2
	else
		have="$have $a"
	fi
done

# per-thread work: normal / quick
cmd() { # workload threads -> the command line
	local n=$2 q=$quick
	case $1 in
	churn) echo "$build/bench/wl-churn -t $n -n $((q ? 300000 : 10000000))" ;;
	larson) echo "$build/bench/wl-larson -t $n -n $((q ? 200000 : 3000000))" ;;
	xthread-small) echo "$build/bench/wl-xthread -p $n -n $((q ? 200000 : 3000000)) -s 16 -S 256" ;;
	xthread-large) echo "$build/bench/wl-xthread -p $n -n $((q ? 20000 : 300000)) -s 8192 -S 32768" ;;
	burst) echo "$build/bench/wl-burst -t $n -m $((q ? 16 : 64)) -b 2 -i 0" ;;
	*) echo "scaling.sh: unknown workload $1" >&2; return 1 ;;
	esac
}

echo "workload,allocator,threads,run,ops_per_s,wall_s" >"$out"
start=$SECONDS
total=$(($(wc -w <<<"$workloads") * $(wc -w <<<"$threads") * $(wc -w <<<"$have") * runs))
i=0
for w in $workloads; do
	for t in $threads; do
		c=$(cmd "$w" "$t")
		for ((r = 1; r <= runs; r++)); do
			for a in $have; do # interleaved
				i=$((i + 1))
				printf '\r\033[K[scaling] %s %s threads %s run %d/%d (%d s)' "$w" "$t" "$a" $i $total \
					$((SECONDS - start)) >&2
				t0=$(date +%s%N)
				if ! res=$(env ${lib[$a]:+LD_PRELOAD=${lib[$a]}} $c 2>&1); then
					printf '\n' >&2
					echo "scaling.sh: FAILED: $c under $a:" >&2
					echo "$res" >&2
					exit 1
				fi
				ms=$((($(date +%s%N) - t0) / 1000000))
				ops=$(sed -n 's/.*ops_per_s=\([0-9.]*\).*/\1/p' <<<"$res" | head -1)
				printf '%s,%s,%s,%s,%s,%d.%03d\n' "$w" "$a" "$t" "$r" "$ops" $((ms / 1000)) $((ms % 1000)) >>"$out"
			done
		done
	done
done
printf '\r\033[K' >&2
echo "scaling: $((SECONDS - start)) s, $(nproc) CPUs, CSV in $out"
/usr/bin/python3 - "$out" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ws = list(dict.fromkeys(r['workload'] for r in rows))
al = list(dict.fromkeys(r['allocator'] for r in rows))
ts = sorted({int(r['threads']) for r in rows})
med = {}
for r in rows:
    med.setdefault((r['workload'], r['allocator'], int(r['threads'])), []).append(float(r['ops_per_s']))
print('Mops/s (median) and speedup over 1 thread; threads = pairs for xthread-*')
for w in ws:
    print(f'\n{w:14}' + ''.join(f'{a:>20}' for a in al))
    for t in ts:
        cells = []
        for a in al:
            v = statistics.median(med[(w, a, t)])
            b = statistics.median(med.get((w, a, ts[0]), [v]))
            cells.append(f'{v / 1e6:10.2f} ({v / b:5.2f}x)')
        print(f'{t:>8} thr  ' + ''.join(f'{c:>20}' for c in cells))
PY
