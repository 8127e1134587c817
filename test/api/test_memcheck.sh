#!/usr/bin/env bash
# test_memcheck.sh LIBPCPMALLOC TARGET - valgrind's memcheck on a program running on pcpmalloc
# (LD_PRELOAD; --soname-synonyms=somalloc=nouserintercepts keeps memcheck from replacing
# pcpmalloc's malloc with its own).  pcpmalloc's memcheck mode (core/vg.h, core/vgmode.h) must make
# memcheck find a planted leak, use after free, overflow and double free, and report nothing
# for a clean program with threads, remote frees, realloc, calloc and the aligned forms.
set -euo pipefail
lib=$1
target=$2
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"

# run MODE: memcheck's log in $tmp/MODE.log, the program's stdout in $tmp/MODE.out
run() {
	local rc=0
	LD_PRELOAD=$lib valgrind --tool=memcheck --soname-synonyms=somalloc=nouserintercepts \
		--leak-check=full --show-leak-kinds=definite,possible --errors-for-leak-kinds=definite \
		--error-exitcode=99 --log-file="$tmp/$1.log" "$target" "$1" >"$tmp/$1.out" \
		2>"$tmp/$1.err" || rc=$?
	echo "== $1: exit $rc"
	return $rc
}

expect() { # MODE PATTERN WHAT
	grep -Eq -- "$2" "$tmp/$1.log" || fail "$1: memcheck did not report $3 (no /$2/)"
}

# clean_with NAME VAR=VALUE: the clean program under memcheck with one setting more must exit 0
# with zero errors (memcheck's log in $tmp/NAME.log, stderr in $tmp/NAME.err)
clean_with() {
	local rc=0
	env "$2" LD_PRELOAD="$lib" valgrind --tool=memcheck \
		--soname-synonyms=somalloc=nouserintercepts --error-exitcode=99 \
		--log-file="$tmp/$1.log" "$target" clean >"$tmp/$1.out" 2>"$tmp/$1.err" || rc=$?
	echo "== clean, $2: exit $rc"
	[ $rc -eq 0 ] || fail "clean with $2: exit $rc (99 = memcheck found errors)"
	expect "$1" 'ERROR SUMMARY: 0 errors' "zero errors with $2"
}

# The clean program: pcpmalloc ran, memcheck mode was on, zero errors.
rc=0
run clean || rc=$?
[ $rc -eq 0 ] || fail "clean: exit $rc (99 = memcheck found errors)"
grep -qx "pcpmalloc: yes" "$tmp/clean.out" || fail "clean: pcpmalloc was not the allocator"
grep -qx "usable: 5" "$tmp/clean.out" || fail "clean: memcheck mode off ($(grep usable "$tmp/clean.out"))"
expect clean 'ERROR SUMMARY: 0 errors' "zero errors"
grep -q 'definitely lost' "$tmp/clean.log" && fail "clean: a leak reported"

# The mode forced (PCPMALLOC_VALGRIND=1) under memcheck: no false report either (realloc
# copied the whole slot, the bytes past the block included: 2200 invalid reads).
clean_with forced PCPMALLOC_VALGRIND=1

# Secure mode asked for as well: memcheck mode wins (one warning), no false report (secure
# mode's canaries and junk were written into no-access bytes: invalid writes).
clean_with secure PCPMALLOC_SECURE=1
grep -q 'PCPMALLOC_SECURE=1 ignored' "$tmp/secure.err" || fail "secure: no warning that secure mode is off"

# Planted leaks (a slab object, a page run, a huge mapping): definitely lost, allocated in
# plant_leak, and nothing else.
rc=0
run leak || rc=$?
# memcheck's leak check reads every word of the allocator's metadata as a possible pointer:
# a word that happens to fall inside the 10 MiB block (a time stamp, a counter: seen about 1
# run in 10 on a loaded machine, never the same way twice) makes it "possibly lost".  Such a
# run is tried once more; a pointer the allocator really keeps fails both.
if grep -q '10,485,760 bytes in 1 blocks are possibly lost' "$tmp/leak.log"; then
	echo "== leak: the huge block read as possibly lost (an aliasing word): once more"
	rc=0
	run leak || rc=$?
fi
[ $rc -eq 99 ] || fail "leak: exit $rc, want 99"
expect leak 'definitely lost: 10,585,860 bytes in 3 blocks' "the three leaks"
for n in '100 bytes' '100,000 bytes' '10,485,760 bytes'; do
	grep -A8 "$n in 1 blocks are definitely lost" "$tmp/leak.log" | grep -q plant_leak ||
		fail "leak: no leak of $n allocated in plant_leak"
done
expect leak 'ERROR SUMMARY: 3 errors' "exactly three errors"

# A planted use after free, read after 1000 allocations of the same size.
rc=0
run uaf || rc=$?
[ $rc -eq 99 ] || fail "uaf: exit $rc, want 99"
grep -A3 'Invalid read of size' "$tmp/uaf.log" | grep -q plant_uaf || fail "uaf: no invalid read in plant_uaf"
expect uaf "free'd" "the freed block"
expect uaf 'ERROR SUMMARY: 1 errors' "exactly one error"

# One byte past a 24-byte block.
rc=0
run overflow || rc=$?
[ $rc -eq 99 ] || fail "overflow: exit $rc, want 99"
grep -A3 'Invalid write of size 1' "$tmp/overflow.log" | grep -q plant_overflow ||
	fail "overflow: no invalid write in plant_overflow"
expect overflow '0 bytes after a block of size 24' "the block overflowed"

# A double free: memcheck's report, then pcpmalloc's abort.
rc=0
run dfree || rc=$?
[ $rc -ne 0 ] || fail "dfree: exit 0"
grep -A8 'Invalid free' "$tmp/dfree.log" | grep -q plant_double_free || fail "dfree: no invalid free in plant_double_free"
grep -q 'pcpmalloc: free(): double free 0x' "$tmp/dfree.err" "$tmp/dfree.log" ||
	fail "dfree: pcpmalloc did not abort with its double-free line"

if [ $fails -ne 0 ]; then
	for f in "$tmp"/*.log; do
		echo "---- $f"
		head -n 60 "$f"
	done
	echo "$fails check(s) failed"
	exit 1
fi
echo "memcheck found the leak, the use after free, the overflow and the double free; no false report"
