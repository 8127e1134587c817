#!/usr/bin/env bash
# scale.sh - process-wide lock profile of the threaded suite workloads (wl-churn 16-512 B,
# 4-16 KiB, 16-32 KiB; wl-larson; wl-xthread 16-256 B and 8-32 KiB) on synthetic machines of
# 2, 16, 64 and 224 CPUs with one pcp per thread (PCPMALLOC_CPU_SOURCE=tid), from the
# statistics' exact counters: per workload and CPU count, process-wide lock acquisitions per
# 1000 malloc+free calls, their contended share, the busiest lock's mean hold time and the
# projected number of real CPUs at which it would be held half of the time (bench/scale.py
# explains the formula; bench/RESULTS.md has the figures).  Threads: min(32, CPUs), pairs
# min(16, CPUs / 2); the total work of a workload is the same at every CPU count.
#
# Usage: bench/scale.sh [-b BEFORE.so] [-a AFTER.so] [-c "2 16 64 224"] [-w "churn-16-512 ..."]
#                       [-t THREADS] [-r RUNS] [-s SCALE] [--steady K] [--json FILE] [--env NAME=VALUE]
#                       [--no-build]
#   -b   a second library shown side by side (before/after; "~" marks a hold time borrowed
#        from the other library where one does not report it)
#   -a   the library measured (default build/preload/libpcpmalloc.so)
# Example: bench/scale.sh -b /work/base/libpcpmalloc-3982229.so   (about 2 minutes here)
set -euo pipefail
cd "$(dirname "$0")/.."
nobuild=0
args=()
for a in "$@"; do
	case $a in
	--no-build) nobuild=1 ;;
	-h | --help) sed -n '2,17p' "$0"; exit 0 ;;
	*) args+=("$a") ;;
	esac
done
if [ $nobuild = 0 ]; then
	[ -f build/build.ninja ] || meson setup build >/dev/null
	meson compile -C build >/dev/null
fi
exec /usr/bin/python3 bench/scale.py --build build "${args[@]}"
