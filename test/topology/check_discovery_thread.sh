#!/usr/bin/env bash
# check_discovery_thread.sh LIB TOPO_WORK - lazy discovery on the threads least able to afford
# it (issue 26), for each source (sysfs, and an empty PCPMALLOC_SYSFS_ROOT: CPUID on x86):
#   cancel  a thread with a deferred cancellation pending runs the malloc/realloc that
#           discovers: it must meet no cancellation point inside the allocator (it died in
#           discovery's open() before, leaving the topology claimed and never published);
#   stack   a PTHREAD_STACK_MIN thread whose allocations discover: at most glibc's stack use
#           for the same work + 1 KiB (it overflowed its 16 KiB before: 8.7 KiB of buffers).
# PCPMALLOC_HIGH_MAX=300: the thread's page runs refill, so discovery is due in that thread
# (topo_work meets the age and heap conditions in main first, the refill count in the thread).
# LD_BIND_NOW=1: the loader's lazy binding (its register save area) is not counted.
set -u
lib=$1 work=$2
empty=$(mktemp -d)
trap 'rmdir "$empty"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# topo_work exits 75 when the discovery ran before the thread (a slow warm-up): run again
run() {
	local out rc
	for _ in 1 2 3 4 5; do
		out=$("$@" 2>&1)
		rc=$?
		[ $rc != 75 ] && break
	done
	echo "$out"
	return $rc
}
case $(uname -m) in x86_64 | i?86) x86=1 ;; *) x86=0 ;; esac
ls /sys/devices/system/cpu/cpu0/cache/index0/size >/dev/null 2>&1 && cacheinfo=1 || cacheinfo=0
glibc=$(run env LD_BIND_NOW=1 "$work" stack | sed -n 's/^stack: \([0-9]*\) of.*/\1/p')
[ -n "$glibc" ] || { fail "stack test under glibc: no figure"; glibc=0; }
for root in /sys "$empty"; do
	if [ "$root" = /sys ] && [ $cacheinfo = 1 ]; then want=sysfs
	elif [ $x86 = 1 ]; then want=cpuid
	else want=provisional; fi
	env=(env PCPMALLOC_HIGH_MAX=300 PCPMALLOC_SYSFS_ROOT="$root" LD_PRELOAD="$lib")
	out=$(run "${env[@]}" "$work" cancel)
	rc=$?
	if [ $rc != 0 ] || ! grep -q "finished the allocation loop (returned); topology $want" <<<"$out"; then
		fail "cancel, root $root: exit $rc: $out (want topology $want)"
	else
		echo "ok: cancel pending during discovery ($want): $out"
	fi
	out=$(run "${env[@]}" LD_BIND_NOW=1 "$work" stack)
	rc=$?
	used=$(sed -n 's/^stack: \([0-9]*\) of.*/\1/p' <<<"$out")
	if [ $rc != 0 ] || [ -z "$used" ] || ! grep -q "topology $want" <<<"$out"; then
		fail "stack, root $root: exit $rc: $out (want topology $want)"
	elif [ "$used" -gt $((glibc + 1024)) ]; then
		fail "stack, root $root: $used bytes, glibc $glibc (+1024 allowed)"
	else
		echo "ok: PTHREAD_STACK_MIN thread discovering ($want): $used bytes of stack, glibc $glibc"
	fi
done
echo "$fails failures"
[ $fails = 0 ]
