#!/bin/bash
# bench/peakgauge.so: preloaded after pcpmalloc it reports the peak RSS and the statistics'
# byte gauges sampled at it; under glibc alone, the peak RSS only.  $1: libpcpmalloc.so,
# $2: peakgauge.so, $3: wl-churn.
set -u
lib=$1 pg=$2 wl=$3
fail() { echo "FAIL: $*"; exit 1; }
out=$(PEAKGAUGE_US=200 LD_PRELOAD="$lib $pg" "$wl" -t 2 -n 20000 -s 4096 -S 16384 2>&1 >/dev/null) ||
	fail "wl-churn under pcpmalloc + peakgauge: $out"
line=$(grep '^peakgauge: ' <<<"$out") || fail "no peakgauge line: $out"
kib=$(sed -n 's/.*rss_peak_kib=\([0-9]*\).*/\1/p' <<<"$line")
[ -n "$kib" ] && [ "$kib" -gt 1000 ] || fail "rss_peak_kib: $line"
for g in tcache_bytes sheaf_bytes sheaf_home_bytes cpu_slab_bytes barn_bytes resident_bytes; do
	grep -q " $g=[0-9]" <<<"$line" || fail "no $g: $line"
done
# the top level only: the per-CPU cache sizes that follow are not repeated
[ "$(grep -o ' slice_bytes=' <<<"$line" | wc -l)" -le 1 ] || fail "nested gauges: $line"
out=$(LD_PRELOAD="$pg" "$wl" -t 2 -n 2000 2>&1 >/dev/null) || fail "under glibc: $out"
line=$(grep '^peakgauge: ' <<<"$out") || fail "no line under glibc: $out"
grep -q 'rss_peak_kib=[1-9]' <<<"$line" && ! grep -q 'sheaf_bytes' <<<"$line" ||
	fail "under glibc: $line"
echo "ok: $line"
