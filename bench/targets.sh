#!/usr/bin/env bash
# targets.sh - every target of issue 6 measured side by side in one run under glibc, jemalloc,
# mimalloc, tcmalloc and pcpmalloc, printed as markdown tables (one per target; machine, date
# and commands stated) by bench/targets_report.py, and written to OUTDIR/targets.md with the
# raw outputs beside it.  8-15 minutes on 2 CPUs; --quick (a smoke test, about a minute)
# uses small sizes and one run, so its figures only show that everything runs.
#
#   1 fast path       bench/fastpath (callgrind instructions per malloc+free pair, 100 and 0
#                     live objects)
#   2, 3 suite        pcpmalloc-ab --suite: time and peak RSS, geomeans and worst ratios
#   4 producer/cons.  pcpmalloc-ab --suite --only xthread-small,xthread-large, nproc/2 pairs
#   5 scaling         bench/scaling.sh -w churn, threads 1, 2, 4 ... up to nproc
#   6 memory returned build/bench/wl-return: idle / idle then activity / malloc_trim(0)
#   7 start-up        bench/startup.sh, where it exists
#
# Usage: bench/targets.sh [--quick] [--no-build] [--check] [-b BUILD_DIR] [-o OUTDIR] [-n RUNS]
#                         [-T "1 2 3 4 5 6 7"]
#   --check  exit 1 unless every table asked for came out with positive numbers (meson test)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build
out=
runs=3
quick=0
nobuild=0
targets="1 2 3 4 5 6 7"
check=()
cmdline="bench/targets.sh $*"
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 runs=1 ;;
	--no-build) nobuild=1 ;;
	--check) check=(--check) ;;
	-b) build=$2; shift ;;
	-o) out=$2; shift ;;
	-n) runs=$2; shift ;;
	-T) targets=$2; shift ;;
	-h | --help) sed -n '2,17p' "$0"; exit 0 ;;
	*) echo "targets.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$out" ] || out=$PWD/targets-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ $nobuild = 0 ]; then
	[ -f "$build/build.ninja" ] || meson setup "$build" "$src" >/dev/null
	meson compile -C "$build" >/dev/null
fi
build=$(cd "$build" && pwd)
ab=$build/bench/pcpmalloc-ab
want() { [[ " $targets " == *" $1 "* ]]; }
log() { echo "[targets] $* ($((SECONDS - start)) s)" >&2; }
start=$SECONDS
ncpu=$(nproc)
allocs=(-a glibc -a jemalloc -a mimalloc -a tcmalloc -a pcpmalloc)
q=()
[ $quick = 1 ] && q=(--quick -w 0)

{
	echo "command=$cmdline"
	echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "cpus=$ncpu"
	echo "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
	echo "kernel=$(uname -r)"
	echo "glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown)"
	echo "quick=$quick"
	echo "runs=$runs"
	echo "load=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$out/meta.txt"

# 1: fast path (callgrind counts do not depend on the load)
if want 1; then
	log "target 1: bench/fastpath"
	sizes="16 32 64 128 256 512 1024 aligned64 sized32 delete32"
	[ $quick = 1 ] && sizes="64"
	echo "bench/fastpath build $sizes" >"$out/fastpath.cmd"
	if command -v valgrind >/dev/null; then
		bash "$src/bench/fastpath" "$build" -l "100 0" $sizes >"$out/fastpath.txt" \
			2>"$out/fastpath.err" ||
			echo "targets.sh: bench/fastpath failed (see $out/fastpath.err)" >&2
	else
		echo "valgrind is not installed" >"$out/fastpath.err"
	fi
fi

# 2, 3: the A/B suite (time and peak RSS)
if want 2 || want 3; then
	log "target 2, 3: pcpmalloc-ab --suite -n $runs"
	echo "pcpmalloc-ab --suite -n $runs ${q[*]}" >"$out/suite.cmd"
	"$ab" --suite -n "$runs" "${q[@]}" -q "${allocs[@]}" --json "$out/suite.json" >"$out/suite.txt" 2>"$out/suite.err" ||
		echo "targets.sh: the suite failed (see $out/suite.err)" >&2
fi

# 4: producer/consumer, one pair per two CPUs
if want 4; then
	pairs=$((ncpu / 2 > 0 ? ncpu / 2 : 1))
	log "target 4: producer/consumer, $pairs pairs"
	echo "pcpmalloc-ab --suite --only xthread-small,xthread-large -t $pairs -n $((runs + 2)) ${q[*]}" >"$out/pc.cmd"
	"$ab" --suite --only xthread-small,xthread-large -t "$pairs" -n $((runs + 2)) "${q[@]}" -q "${allocs[@]}" \
		--json "$out/pc.json" >"$out/pc.txt" 2>"$out/pc.err" ||
		echo "targets.sh: producer/consumer failed (see $out/pc.err)" >&2
fi

# 5: scaling of thread-local churn
if want 5; then
	th="1"
	for t in 2 4 8 16; do [ "$t" -le "$ncpu" ] && th="$th $t"; done
	[ $quick = 1 ] && th="1 2"
	log "target 5: bench/scaling.sh -w churn -t \"$th\""
	sq=()
	[ $quick = 1 ] && sq=(--quick)
	echo "bench/scaling.sh -w churn -t \"$th\" -n $runs ${sq[*]}" >"$out/scaling.cmd"
	bash "$src/bench/scaling.sh" "${sq[@]}" --no-build -b "$build" -w churn -t "$th" -n "$runs" \
		-o "$out/scaling.csv" >"$out/scaling.txt" 2>"$out/scaling.err" ||
		echo "targets.sh: scaling failed (see $out/scaling.err)" >&2
fi

# 6: memory returned after a burst
if want 6; then
	mib=1024 dur=2500
	[ $quick = 1 ] && mib=64 dur=1200
	libdir=/usr/lib/x86_64-linux-gnu
	declare -A lib=([glibc]="" [jemalloc]=$libdir/libjemalloc.so.2 [mimalloc]=$libdir/libmimalloc.so.2
		[tcmalloc]=$libdir/libtcmalloc_minimal.so.4 [pcpmalloc]=$build/preload/libpcpmalloc.so)
	log "target 6: wl-return -m $mib"
	echo "wl-return -m $mib -D $dur -M 0|1|2 (pcpmalloc: -M 0 with PCPMALLOC_DECAY_THREAD=1, -M 1 without)" >"$out/return.cmd"
	: >"$out/return.txt"
	for a in glibc jemalloc mimalloc tcmalloc pcpmalloc; do
		l=${lib[$a]}
		if [ -n "$l" ] && [ ! -e "$l" ]; then continue; fi
		for m in 0 1 2; do
			envs=()
			[ -n "$l" ] && envs+=(LD_PRELOAD="$l")
			[ $a = pcpmalloc ] && [ $m = 0 ] && envs+=(PCPMALLOC_DECAY_THREAD=1)
			[ $a = pcpmalloc ] && [ $m != 0 ] && envs+=(PCPMALLOC_DECAY_THREAD=0)
			if r=$(env "${envs[@]}" "$build/bench/wl-return" -m "$mib" -D "$dur" -M "$m" 2>&1); then
				grep '^# wl-return:' <<<"$r" | sed "s/^/alloc=$a /" >>"$out/return.txt"
			else
				echo "targets.sh: wl-return -M $m failed under $a: $r" >&2
			fi
		done
	done
fi

# 7: start-up (bench/startup.sh)
if want 7; then
	if [ -f "$src/bench/startup.sh" ]; then
		log "target 7: bench/startup.sh"
		sa=()
		[ $quick = 1 ] && sa=(--runs 3 --loop 50)
		echo "bench/startup.sh build ${sa[*]}" >"$out/startup.cmd"
		bash "$src/bench/startup.sh" "$build" "${sa[@]}" >"$out/startup.txt" 2>"$out/startup.err" ||
			echo "targets.sh: bench/startup.sh failed (see $out/startup.err)" >&2
	fi
fi

log "report"
/usr/bin/python3 "$src/bench/targets_report.py" "$out" "${check[@]}" >"$out/targets.md"
cat "$out/targets.md"
