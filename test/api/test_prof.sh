#!/usr/bin/env bash
# test_prof.sh LIBPCPMALLOC PROF_TARGET - the heap profiler (PCPMALLOC_PROF=1, issue 25).
#
# The estimates are statistical; the sizes make the checks safe.  At the default rate (one
# sample per 512 KiB on average) the 4 KiB blocks of the three sites of `prof_target ratio`
# (512 MiB, 1 GiB and 2 GiB allocated) give about 1024, 2048 and 4096 samples: relative
# standard errors of 3.1%, 2.2% and 1.6%, so the 10% bound is 3.2 standard errors away for
# the smallest site (a failure in some 700 runs) and further for the others.  The leak (448
# blocks of 1 MiB, each sampled with probability 1 - exp(-2) = 0.86) has a standard error
# of 1.9%: 10% is 5 of them.
set -euo pipefail
lib=$1
# the environment of a suite run with profiling on (PCPMALLOC_PROF=1 meson test) must not
# leak into the cases that choose their own
unset PCPMALLOC_PROF PCPMALLOC_LEAKS PCPMALLOC_PROF_SAMPLE PCPMALLOC_PROF_FINAL PCPMALLOC_PROF_INTERVAL PCPMALLOC_PROF_SIGNAL PCPMALLOC_PROF_PREFIX
target=$2
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh"

gcc_s=
for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64 /lib /usr/lib; do
	[ -e "$d/libgcc_s.so.1" ] && { gcc_s=$d/libgcc_s.so.1; break; }
done
pprof=$(command -v google-pprof || command -v pprof || true)

# within PCT% of TRUTH?
near() { python3 -c "import sys; v,t,p=map(float,sys.argv[1:]); sys.exit(abs(v-t)>t*p/100)" "$@"; }

# 1. The ratio and the leak, with the unwinder (libgcc_s preloaded, as `pcpmalloc prof` does).
LD_PRELOAD="$lib $gcc_s" PCPMALLOC_LEAKS=1 "$target" ratio "$tmp/ratio.heap" 2>"$tmp/ratio.err" ||
	fail "ratio run failed: $(head -c 300 "$tmp/ratio.err")"
head -1 "$tmp/ratio.heap" | grep -qE '^heap profile: [0-9]+: [0-9]+ \[[0-9]+: [0-9]+\] @ heap_v2/524288$' ||
	fail "dump header: $(head -1 "$tmp/ratio.heap")"
grep -q '^MAPPED_LIBRARIES:$' "$tmp/ratio.heap" || fail "no MAPPED_LIBRARIES in the dump"
# the leak report: the largest stack first, naming leak_site, 448 MiB within 10%
first=$(grep -m1 '^Leak of' "$tmp/ratio.err" || true)
bytes=$(echo "$first" | sed -n 's/^Leak of \([0-9]*\) byte.*/\1/p')
[ -n "$bytes" ] && near "$bytes" $((448 << 20)) 10 || fail "leak estimate: '$first' (truth $((448 << 20)))"
grep -A1 -m1 '^Leak of' "$tmp/ratio.err" | grep -q '#0 .* in leak_site' || fail "leak report does not name leak_site first"
grep -q '^SUMMARY: pcpmalloc: an estimated [0-9]* byte(s) leaked' "$tmp/ratio.err" || fail "no SUMMARY line"
if [ -n "$pprof" ]; then
	"$pprof" --text --alloc_space "$target" "$tmp/ratio.heap" >"$tmp/ratio.txt" 2>/dev/null ||
		fail "google-pprof could not read the dump"
	# flat MB per site, in pprof's order
	order=$(awk '$6 ~ /^alloc_(one|two|four)$/ {print $6}' "$tmp/ratio.txt" | tr '\n' ' ')
	[ "$order" = "alloc_four alloc_two alloc_one " ] || fail "site order: '$order'"
	for s in one:512 two:1024 four:2048; do
		mb=$(awk -v f="alloc_${s%%:*}" '$6 == f {print $1}' "$tmp/ratio.txt")
		[ -n "$mb" ] && near "$mb" "${s#*:}" 10 || fail "alloc_${s%%:*}: $mb MB, truth ${s#*:} MB"
		echo "alloc_${s%%:*}: $mb MB estimated, ${s#*:} MB allocated"
	done
	"$pprof" --text "$target" "$tmp/ratio.heap" 2>/dev/null | awk '$6 == "leak_site"' | grep -q . ||
		fail "in-use view lacks leak_site"
else
	echo "SKIP: google-pprof not installed (package google-perftools): pprof checks skipped"
fi

# 2. The frame-pointer walk (no libgcc_s loaded): the leak report still names leak_site.
LD_PRELOAD=$lib PCPMALLOC_LEAKS=1 "$target" ratio "$tmp/fp.heap" 2>"$tmp/fp.err" || fail "fp run failed"
grep -A1 -m1 '^Leak of' "$tmp/fp.err" | grep -q '#0 .* in leak_site' || fail "fp walk: leak_site not named"

# 2b. Programs built without frame pointers, sampled often (4 KiB): their frame-pointer
# register holds any value, which the walk must never follow out of the stack (the
# assembler crashed on a value near the top of the address space, which wrapped a bound).
if command -v as >/dev/null && command -v cc >/dev/null; then
	cat >"$tmp/fp.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
int f(int x) { char *p = malloc(x); for (int i = 0; i < x; i++) p[i] = i; int s = 0;
	for (int i = 0; i < x; i++) s += p[i]; free(p); return s; }
int main(void) { printf("%d\n", f(1000)); return 0; }
C
	cc -O2 -S "$tmp/fp.c" -o "$tmp/fp.s" || fail "cc -S"
	for i in 1 2 3; do
		LD_PRELOAD=$lib PCPMALLOC_PROF=1 PCPMALLOC_PROF_SAMPLE=4096 as "$tmp/fp.s" -o "$tmp/fp.o" ||
			fail "the assembler under PCPMALLOC_PROF=1 PCPMALLOC_PROF_SAMPLE=4096"
	done
fi
LD_PRELOAD=$lib PCPMALLOC_PROF=1 PCPMALLOC_PROF_SAMPLE=4096 python3 -c 'x = [str(i) * 20 for i in range(100000)]' ||
	fail "python3 under PCPMALLOC_PROF=1 PCPMALLOC_PROF_SAMPLE=4096"

# 3. No leak: one line.
LD_PRELOAD=$lib PCPMALLOC_LEAKS=1 "$target" noleak 2>"$tmp/noleak.err" || fail "noleak run failed"
[ "$(wc -l <"$tmp/noleak.err")" = 1 ] && grep -q '^pcpmalloc: no leaks' "$tmp/noleak.err" ||
	fail "no-leak report: $(head -c 300 "$tmp/noleak.err")"

# 4. fork: the child's profile starts empty (no leak_site), the parent's keeps it.
LD_PRELOAD="$lib $gcc_s" PCPMALLOC_PROF=1 "$target" fork "$tmp" 2>"$tmp/fork.err" || fail "fork run failed"
if [ -n "$pprof" ]; then
	"$pprof" --text "$target" "$tmp/child.heap" 2>/dev/null >"$tmp/child.txt"
	"$pprof" --text "$target" "$tmp/parent.heap" 2>/dev/null >"$tmp/parent.txt"
	grep -q ' child_site$' "$tmp/child.txt" || fail "child profile lacks child_site"
	grep -q ' leak_site$' "$tmp/child.txt" && fail "child profile has the parent's leak_site"
	grep -q ' leak_site$' "$tmp/parent.txt" || fail "parent profile lacks leak_site"
	grep -q ' child_site$' "$tmp/parent.txt" && fail "parent profile has the child's site"
fi

# 5. Threads.
LD_PRELOAD="$lib $gcc_s" PCPMALLOC_PROF=1 PCPMALLOC_PROF_SAMPLE=65536 "$target" threads "$tmp/thr.heap" 2>"$tmp/thr.err" ||
	fail "threads run failed"
grep -q '@ heap_v2/65536$' "$tmp/thr.heap" || fail "PCPMALLOC_PROF_SAMPLE not in the header"
if [ -n "$pprof" ]; then
	"$pprof" --text --alloc_space "$target" "$tmp/thr.heap" 2>/dev/null | grep -q ' thread_site$' ||
		fail "threads: thread_site missing"
fi

# 6. A signal, the final dump, the interval dumps; the automatic names.
LD_PRELOAD=$lib PCPMALLOC_PROF=1 PCPMALLOC_PROF_SIGNAL=12 PCPMALLOC_PROF_PREFIX="$tmp/sig" \
	"$target" signal 2>"$tmp/sig.err" || fail "signal run failed: $(head -c 300 "$tmp/sig.err")"
ls "$tmp"/sig.*.0.s.heap >/dev/null 2>&1 || fail "no signal dump ($(ls "$tmp"))"
LD_PRELOAD=$lib PCPMALLOC_PROF=1 PCPMALLOC_PROF_FINAL=1 PCPMALLOC_PROF_INTERVAL=1073741824 \
	PCPMALLOC_PROF_PREFIX="$tmp/run.%p" "$target" ratio "$tmp/r2.heap" 2>"$tmp/r2.err" || fail "final run failed"
nf=$(ls "$tmp"/run.*.f.heap 2>/dev/null | wc -l)
ni=$(ls "$tmp"/run.*.i.heap 2>/dev/null | wc -l)
[ "$nf" = 1 ] || fail "$nf final dumps"
[ "$ni" -ge 2 ] || fail "$ni interval dumps for 4 GiB allocated at 1 GiB intervals"
[ -s "$tmp/r2.err" ] && fail "stderr not empty without LEAKS: $(head -c 300 "$tmp/r2.err")"

# 7. A failed dump says why in one line; the program goes on.
out=$(LD_PRELOAD=$lib PCPMALLOC_PROF=1 "$target" baddump /nonexistent/dir/x.heap 2>"$tmp/bad.err") ||
	fail "a failed dump stopped the program"
echo "$out" | grep -q 'dump returned -1, the program continued' || fail "baddump: $out"
[ "$(wc -l <"$tmp/bad.err")" = 1 ] && grep -q 'heap profile not written to /nonexistent/dir/x.heap: No such file' "$tmp/bad.err" ||
	fail "failed dump message: $(cat "$tmp/bad.err")"
out=$(LD_PRELOAD=$lib "$target" baddump "$tmp/off.heap" 2>"$tmp/off.err") || fail "dump with profiling off"
grep -q 'profiling is off' "$tmp/off.err" || fail "dump with profiling off: $(cat "$tmp/off.err")"

# 8. A malformed value: one warning, the default.
LD_PRELOAD=$lib PCPMALLOC_PROF=1 PCPMALLOC_PROF_SAMPLE=lots "$target" baddump "$tmp/m.heap" >/dev/null 2>"$tmp/m.err"
[ "$(grep -c 'PCPMALLOC_PROF_SAMPLE' "$tmp/m.err")" = 1 ] || fail "malformed PROF_SAMPLE: $(cat "$tmp/m.err")"
grep -q '@ heap_v2/524288$' "$tmp/m.heap" || fail "malformed PROF_SAMPLE: default not used"

# 9. Every allocation call is its own site: the walk starts at the program's call, also for
# posix_memalign (which wrote *out after a call that was not a tail call: the frame-pointer
# walk lost the calling function and charged its caller).
for walk in fp unwind; do
	pre=$lib
	[ "$walk" = unwind ] && pre="$lib $gcc_s"
	LD_PRELOAD="$pre" PCPMALLOC_PROF=1 PCPMALLOC_PROF_SAMPLE=1 "$target" apis "$tmp/apis.$walk.heap" ||
		fail "apis run ($walk) failed"
	if [ -n "$pprof" ]; then
		"$pprof" --text --alloc_objects "$target" "$tmp/apis.$walk.heap" 2>/dev/null >"$tmp/apis.$walk.txt"
		for f in api_malloc api_calloc api_realloc api_posix_memalign64 api_posix_memalign16 \
			api_aligned_alloc api_memalign api_valloc; do
			awk -v f="$f" '$6 == f && $1 > 0' "$tmp/apis.$walk.txt" | grep -q . ||
				fail "$walk walk: no samples charged to $f"
		done
	fi
done

# 10. A realloc that fails leaves its block allocated: still a sample (the leak report names
# its site), not forgotten as if freed.
LD_PRELOAD=$lib PCPMALLOC_LEAKS=1 PCPMALLOC_PROF_SAMPLE=4096 "$target" reallocfail >"$tmp/rf.out" 2>"$tmp/rf.err" ||
	fail "reallocfail run failed"
grep -q '^16 failed reallocs kept their block$' "$tmp/rf.out" || fail "reallocfail: $(cat "$tmp/rf.out")"
first=$(grep -m1 '^Leak of' "$tmp/rf.err" || true)
bytes=$(echo "$first" | sed -n 's/^Leak of \([0-9]*\) byte.*/\1/p')
[ -n "$bytes" ] && near "$bytes" $((16 << 20)) 10 || fail "failed reallocs' blocks: '$first' (truth $((16 << 20)))"
grep -A1 -m1 '^Leak of' "$tmp/rf.err" | grep -q '#0 .* in realloc_fail_site' ||
	fail "leak report does not name realloc_fail_site first: $(head -c 400 "$tmp/rf.err")"

# 11. Threads, signals whose handlers allocate (landing in the sampling path too), dumps from
# a handler, the program and fork children at once, every allocation sampled and at 4 KiB,
# with either walk: no deadlock (alarm), no crash, sound blocks; the dumps readable; and at
# exit no sample of the threads' or handlers' blocks left (every free found its sample).
for cfg in "1 fp" "1 unwind" "4096 fp"; do
	rate=${cfg% *} walk=${cfg#* }
	pre=$lib
	[ "$walk" = unwind ] && pre="$lib $gcc_s"
	d=$tmp/stress.$rate.$walk
	mkdir -p "$d"
	LD_PRELOAD="$pre" PCPMALLOC_LEAKS=1 PCPMALLOC_PROF_SAMPLE=$rate PCPMALLOC_PROF_SIGNAL=12 \
		PCPMALLOC_PROF_PREFIX="$d/sig" "$target" stress 2 "$d" >"$d/out" 2>"$d/err" ||
		fail "stress (rate $rate, $walk walk) failed: $(grep -v 'another dump is in progress' "$d/err" | head -c 400)"
	grep -q 'handler runs' "$d/out" || fail "stress ($rate, $walk): $(cat "$d/out")"
	ls "$d"/sig.*.s.heap >/dev/null 2>&1 || fail "stress ($rate, $walk): no dump from the signal"
	ls "$d"/child.*.heap >/dev/null 2>&1 || fail "stress ($rate, $walk): no child dump"
	for f in "$d"/main.heap $(ls "$d"/child.*.heap | head -3) $(ls "$d"/sig.*.s.heap | tail -1); do
		head -1 "$f" | grep -qE "^heap profile: [0-9]+: [0-9]+ \[[0-9]+: [0-9]+\] @ heap_v2/$rate\$" ||
			fail "stress ($rate, $walk): bad dump $f: $(head -1 "$f")"
	done
	if [ -n "$pprof" ]; then
		"$pprof" --text --alloc_space "$target" "$(ls "$d"/child.*.heap | head -1)" 2>/dev/null |
			grep -q ' child_site$' || fail "stress ($rate, $walk): child dump lacks child_site"
	fi
	grep -A1 '^Leak of' "$d/err" | grep -E ' in (stress_worker|stress_handler)\+' &&
		fail "stress ($rate, $walk): samples of freed blocks left at exit"
done

[ "$fails" = 0 ] && echo "test_prof: all checks passed"
exit $((fails > 0))
