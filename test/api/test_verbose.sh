#!/usr/bin/env bash
# test_verbose.sh LIBPCPMALLOC TUNABLES TARGET - PCPMALLOC_VERBOSE=1: one configuration block
# at start (every tunable from the table with its value and where it came from, then CPUs,
# pcp sizes, arena, purge, valgrind), decision lines (arena reserved, decay thread started,
# hwloc found, a huge mapping refused under ulimit -v), and nothing at all without it.
set -euo pipefail
lib=$1
tunables=$2
target=$3
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"

# 1. Off: no output on stderr, same stdout.
LD_PRELOAD=$lib "$target" >"$tmp/off.out" 2>"$tmp/off.err"
[ -s "$tmp/off.err" ] && fail "VERBOSE unset: stderr not empty: $(head -c 300 "$tmp/off.err")"
LD_PRELOAD=$lib PCPMALLOC_VERBOSE=0 "$target" >/dev/null 2>"$tmp/off0.err"
[ -s "$tmp/off0.err" ] && fail "VERBOSE=0: stderr not empty"

# 2. On, with one value from the environment, one rejected, the decay thread and hwloc now.
LD_PRELOAD=$lib PCPMALLOC_VERBOSE=1 PCPMALLOC_DECAY_MS=500 PCPMALLOC_BATCH=lots \
	PCPMALLOC_DECAY_THREAD=1 PCPMALLOC_TOPOLOGY=now "$target" >"$tmp/on.out" 2>"$tmp/on.err"
cmp -s "$tmp/off.out" "$tmp/on.out" || fail "VERBOSE=1 changed the program's output"
err=$tmp/on.err
[ "$(grep -c 'configuration in force' "$err")" = 1 ] || fail "not exactly one configuration block"
# the block: from its first line to "end of configuration", contiguous
start=$(grep -n 'configuration in force' "$err" | cut -d: -f1)
end=$(grep -n 'pcpmalloc: end of configuration' "$err" | cut -d: -f1)
if [ -z "$start" ] || [ -z "$end" ] || [ "$end" -le "$start" ]; then
	fail "no block end"
	end=$start
fi
sed -n "${start},${end}p" "$err" >"$tmp/block"
grep -vq '^pcpmalloc: ' "$tmp/block" && fail "block lines without the pcpmalloc: prefix"
# every tunable of the table, once, with a source
names=$("$tunables" | sed -n 's/^| `\(PCPMALLOC_[A-Z0-9_]*\)`.*/\1/p')
[ -n "$names" ] || fail "no tunables from $tunables"
for n in $names; do
	c=$(grep -cE "^pcpmalloc:   $n +[^ ]+ +\((default|env|env '.*' rejected: default)\)$" "$tmp/block" || true)
	[ "$c" = 1 ] || fail "tunable $n: $c lines in the block"
done
grep -qE '^pcpmalloc:   PCPMALLOC_DECAY_MS +500 +\(env\)$' "$tmp/block" || fail "DECAY_MS 500 from env"
grep -qE "^pcpmalloc:   PCPMALLOC_BATCH +auto +\(env 'lots' rejected: default\)$" "$tmp/block" ||
	fail "BATCH rejected"
grep -qE '^pcpmalloc:   PCPMALLOC_STATS +0 +\(default\)$' "$tmp/block" || fail "STATS default"
grep -qE '^pcpmalloc:   cpus: [0-9]+ pcp slots, [0-9]+ CPUs usable' "$tmp/block" || fail "cpus line"
grep -qE '^pcpmalloc:   pcp \(cpu 0\): batch 63, high_min 252, high_max [0-9]+ pages' "$tmp/block" ||
	fail "pcp sizes line"
grep -qE '^pcpmalloc:   arena: 65536 MiB of address space reserved per arena' "$tmp/block" ||
	fail "arena line"
grep -qE '^pcpmalloc:   purge: free memory unused for 250 ms, every 250 ms' "$tmp/block" || fail "purge line"
grep -qE '^pcpmalloc:   valgrind: memcheck mode off' "$tmp/block" || fail "valgrind line"
# decisions, after the block
grep -qE '^pcpmalloc: arena [0-9]+: reserved 65536 MiB at 0x' "$err" || fail "no arena decision line"
grep -q '^pcpmalloc: decay thread started: decay and purge every 500 ms' "$err" ||
	fail "no decay-thread decision line"
grep -qE '^pcpmalloc: topology: (hwloc found [0-9]+ CPUs|.*keeping the provisional)' "$err" ||
	fail "no topology decision line"
# the warning for the rejected value comes once, before the block
[ "$(grep -c "ignoring PCPMALLOC_BATCH=lots" "$err")" = 1 ] || fail "rejected value: not one warning"

# 2b. Numbers are decimal and whole: 010 is ten (not octal 8), 0x10 and " 25" are rejected
# with one warning each and the default kept.
LD_PRELOAD=$lib PCPMALLOC_VERBOSE=1 PCPMALLOC_DIRTY_PCT=010 PCPMALLOC_DECAY_MS=0x10 \
	PCPMALLOC_DIRTY_MIN_MB=' 25' "$target" >/dev/null 2>"$tmp/num.err" || fail "number run: exit $?"
grep -qE '^pcpmalloc:   PCPMALLOC_DIRTY_PCT +10 +\(env\)$' "$tmp/num.err" || fail "010 is not ten"
[ "$(grep -c "ignoring PCPMALLOC_DECAY_MS=0x10" "$tmp/num.err")" = 1 ] || fail "0x10 not rejected once"
[ "$(grep -c "ignoring PCPMALLOC_DIRTY_MIN_MB= 25" "$tmp/num.err")" = 1 ] ||
	fail "' 25' not rejected once"
# An enum takes its names only: an index ("1" for count_min) is rejected with one warning.
LD_PRELOAD=$lib PCPMALLOC_VERBOSE=1 PCPMALLOC_DECAY_MODE=1 PCPMALLOC_CPU_SOURCE=2 \
	"$target" >/dev/null 2>"$tmp/enum.err" || fail "enum run: exit $?"
[ "$(grep -c "ignoring PCPMALLOC_DECAY_MODE=1: expected one of mainline|count_min" "$tmp/enum.err")" = 1 ] ||
	fail "enum index 1 not rejected once"
[ "$(grep -c "ignoring PCPMALLOC_CPU_SOURCE=2: expected one of rseq|getcpu|tid" "$tmp/enum.err")" = 1 ] ||
	fail "enum index 2 not rejected once"
grep -qE '^pcpmalloc:   PCPMALLOC_DECAY_MODE +mainline' "$tmp/enum.err" || fail "enum default not kept"

# 3. A huge mapping refused under ulimit -v: NULL + ENOMEM and one decision line.
(ulimit -v 1000000 && LD_PRELOAD=$lib PCPMALLOC_VERBOSE=1 "$target" huge-fail) >"$tmp/ulim.out" \
	2>"$tmp/ulim.err" || fail "huge-fail run: exit $?"
grep -qx '2 GiB: NULL, errno ENOMEM' "$tmp/ulim.out" || fail "huge-fail: $(cat "$tmp/ulim.out")"
grep -qE '^pcpmalloc: huge: mmap of 2097152 KiB .* failed: errno 12$' "$tmp/ulim.err" ||
	fail "no huge-mapping decision line"
grep -qE '^pcpmalloc:   arena: [0-9]+ MiB of address space' "$tmp/ulim.err" || fail "no arena line under ulimit"

if [ $fails -ne 0 ]; then
	echo "---- stderr of the verbose run"
	cat "$err"
	echo "---- stderr under ulimit -v"
	cat "$tmp/ulim.err"
	echo "$fails check(s) failed"
	exit 1
fi
echo "configuration block, decision lines and silence without PCPMALLOC_VERBOSE: ok"
