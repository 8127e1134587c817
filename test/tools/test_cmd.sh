#!/usr/bin/env bash
# test_cmd.sh - the `pcpmalloc` command of the build tree as a user meets it:
#   help   --help names every command, a bad command line exits 2 with usage, --version;
#   run    the program runs under the library with the settings given, its exit status comes
#          back, child processes keep the library, and a program the library cannot be loaded
#          into (statically linked, a broken library) runs with a warning saying so;
#   stats  a PCPMALLOC_STATS=json file as the table, two files compared counter by counter,
#          unreadable files refused with one line;
#   top    `pcpmalloc top --once --json PID` on a running wl-churn (PCPMALLOC_LIVE=1) gives
#          the per-CPU pcp values and counters that the process's exit statistics hold, and
#          the events since the previous refresh; the text view; the page removed at exit;
#          a process without the page and a dead pid refused with the reason.
# Usage: test_cmd.sh help|run|stats|top BUILDDIR
mode=$1 build=$(realpath "$2")
. "$(dirname "$0")/toolslib.sh"
pcpm=$build/preload/pcpmalloc
lib=$(realpath "$build/preload/libpcpmalloc.so")
unset LD_PRELOAD PCPMALLOC_STATS PCPMALLOC_STATS_FILE PCPMALLOC_SECURE
py=/usr/bin/python3
[ -x $py ] || py=$(command -v python3)

case $mode in
help)
	"$pcpm" --help >"$tmp/help.out" 2>&1
	rc=$?
	[ $rc = 0 ] || fail "--help: exit $rc"
	for w in 'run \[--stats\[=json\]\] \[--secure\] \[-e VAR=value' 'stats FILE.json \[B.json\]' \
		'top PID' 'man pcpmalloc' "library: $build/preload/libpcpmalloc.so"; do
		has "$tmp/help.out" "$w" "--help" || continue
	done
	[ "$fails" = 0 ] && ok "--help names run, stats, top, the man page and the library"
	"$pcpm" run --help >"$tmp/runhelp.out" 2>&1 && has "$tmp/runhelp.out" "--secure" "run --help" &&
		ok "run --help"
	"$pcpm" --version >"$tmp/v.out" 2>&1 && has "$tmp/v.out" '^pcpmalloc [0-9]+\.[0-9]+' "--version" &&
		ok "--version: $(cat "$tmp/v.out")"
	"$pcpm" frobnicate >"$tmp/bad.out" 2>&1
	rc=$?
	[ $rc = 2 ] && has "$tmp/bad.out" "usage:" "an unknown command" && ok "an unknown command: usage, exit 2" ||
		fail "an unknown command: exit $rc, want 2"
	"$pcpm" >"$tmp/none.out" 2>&1
	rc=$?
	[ $rc = 2 ] && ok "no command: exit 2" || fail "no command: exit $rc, want 2"
	"$pcpm" run >"$tmp/norun.out" 2>&1
	rc=$?
	[ $rc = 2 ] && has "$tmp/norun.out" "no command" "run without a command" && ok "run without a command: exit 2" ||
		fail "run without a command: exit $rc, want 2"
	"$pcpm" run -e NOEQUALS -- true >"$tmp/bade.out" 2>&1
	rc=$?
	[ $rc = 2 ] && has "$tmp/bade.out" "want VAR=value" "-e without =" && ok "-e without '=': exit 2" ||
		fail "-e without '=': exit $rc, want 2"
	;;
run)
	# settings reach the program, the exit status comes back, the library is loaded by
	# absolute path and kept in grandchildren
	"$pcpm" run --secure -e PCPMALLOC_DECAY_MS=250 -- sh -c \
		'echo "$PCPMALLOC_SECURE $PCPMALLOC_DECAY_MS $LD_PRELOAD"; sh -c "grep -c libpcpmalloc /proc/self/maps"; exit 7' \
		>"$tmp/r.out" 2>"$tmp/r.err"
	rc=$?
	[ $rc = 7 ] && ok "the command's exit status (7)" || fail "exit $rc, want 7"
	has "$tmp/r.out" "^1 250 $build/preload/libpcpmalloc.so\$" "settings and LD_PRELOAD" &&
		ok "--secure and -e reach the program; LD_PRELOAD is absolute"
	n=$(sed -n 2p "$tmp/r.out")
	[ "${n:-0}" -gt 0 ] 2>/dev/null && ok "a grandchild maps the library" || fail "a grandchild maps no libpcpmalloc"
	[ -s "$tmp/r.err" ] && { fail "unexpected stderr:"; cat "$tmp/r.err"; }
	# other preloads are kept, behind pcpmalloc
	LD_PRELOAD=/nonexistent/other.so "$pcpm" run --no-check -- sh -c 'echo "$LD_PRELOAD"' \
		>"$tmp/o.out" 2>/dev/null
	has "$tmp/o.out" "^$build/preload/libpcpmalloc.so:/nonexistent/other.so\$" "other preloads" &&
		ok "another LD_PRELOAD entry is kept after pcpmalloc's"
	# --stats: text at exit on stderr
	"$pcpm" run --stats -- "$py" -c 'print(1)' >"$tmp/s.out" 2>"$tmp/s.err"
	has "$tmp/s.err" "^pcpmalloc .* statistics \(pid [0-9]+\)" "--stats" &&
		has "$tmp/s.err" "^  malloc_calls +[1-9]" "--stats" && ok "--stats: the text table at exit"
	# a statically linked program: runs, with a warning
	"$pcpm" run -- "$build/test/tools/static_prog" >"$tmp/st.out" 2>"$tmp/st.err"
	rc=$?
	[ $rc = 0 ] && has "$tmp/st.out" "^static\$" "static program" || fail "static program: exit $rc"
	has "$tmp/st.err" "warning: .*static_prog will run WITHOUT pcpmalloc: .*statically linked" \
		"static program warning" && ok "a static program runs with a warning"
	# a broken library (not ELF): the loader ignores it; the warning says so
	printf 'not a library\n' >"$tmp/libbroken.so"
	"$pcpm" run --lib "$tmp/libbroken.so" -- "$py" -c 'print(2)' >"$tmp/b.out" 2>"$tmp/b.err"
	rc=$?
	[ $rc = 0 ] && has "$tmp/b.out" "^2\$" "broken library" || fail "broken library: exit $rc"
	has "$tmp/b.err" "warning: .* will run WITHOUT pcpmalloc: .*cannot be preloaded" \
		"broken library warning" && ok "a library the loader refuses: warning"
	# a script: the interpreter is checked (no warning when it loads)
	printf '#!/bin/sh\necho script\n' >"$tmp/s.sh"
	chmod +x "$tmp/s.sh"
	"$pcpm" run -- "$tmp/s.sh" >"$tmp/sc.out" 2>"$tmp/sc.err"
	has "$tmp/sc.out" "^script\$" "a script" && [ ! -s "$tmp/sc.err" ] && ok "a script runs, no warning" ||
		{ [ -s "$tmp/sc.err" ] && fail "a script: stderr $(cat "$tmp/sc.err")"; }
	# a missing program: 127, one line
	"$pcpm" run -- /nonexistent/prog >"$tmp/m.out" 2>&1
	rc=$?
	[ $rc = 127 ] && has "$tmp/m.out" "^pcpmalloc: /nonexistent/prog: No such file" "missing program" &&
		ok "a missing program: exit 127" || fail "missing program: exit $rc, want 127"
	;;
stats)
	LD_PRELOAD=$lib PCPMALLOC_STATS=json PCPMALLOC_STATS_FILE=$tmp/a.json "$py" -c 'print(1)' >/dev/null
	LD_PRELOAD=$lib PCPMALLOC_STATS=json PCPMALLOC_STATS_FILE=$tmp/b.json "$py" -c \
		'x = [bytearray(1000) for i in range(20000)]' >/dev/null
	[ -s "$tmp/a.json" ] && [ -s "$tmp/b.json" ] || { echo "FAIL: no statistics files written"; exit 1; }
	"$pcpm" stats "$tmp/a.json" >"$tmp/one.out" 2>&1
	rc=$?
	[ $rc = 0 ] || fail "stats a.json: exit $rc"
	# every counter of the file, with the file's value
	"$py" - "$tmp/a.json" "$tmp/one.out" <<'PY' >"$tmp/one.chk" 2>&1 || fail "stats a.json: $(cat "$tmp/one.chk")"
import json, sys
obj = json.load(open(sys.argv[1]))
table = {l.split()[0]: l.split()[1] for l in open(sys.argv[2]) if len(l.split()) == 2}
bad = [k for k, v in obj.items() if isinstance(v, int) and k != 'pid' and table.get(k) != str(v)]
if bad:
    sys.exit(f'counters missing or wrong in the table: {bad}')
if len(obj['cpus']) < 1:
    sys.exit('no cpus')
PY
	has "$tmp/one.out" "^pcpmalloc .* statistics \(pid [0-9]+; " "header" &&
		has "$tmp/one.out" "^  buddyinfo Node 0, zone Normal( [0-9]+){11}" "buddyinfo" &&
		has "$tmp/one.out" "^ +0( +[0-9]+){8}  (yes|no)\$" "the per-CPU table" &&
		[ ! -s "$tmp/one.chk" ] && ok "stats FILE: every counter, buddyinfo, the per-CPU table"
	"$pcpm" stats "$tmp/a.json" "$tmp/b.json" >"$tmp/two.out" 2>&1
	rc=$?
	[ $rc = 0 ] || fail "stats a.json b.json: exit $rc"
	"$py" - "$tmp/a.json" "$tmp/b.json" "$tmp/two.out" <<'PY' >"$tmp/two.chk" 2>&1 || fail "compare: $(cat "$tmp/two.chk")"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
rows = {l.split()[0]: l.split() for l in open(sys.argv[3]) if l.startswith('  ')}
r = rows['malloc_calls']
if r[1:4] != [str(a['malloc_calls']), str(b['malloc_calls']),
              str(b['malloc_calls'] - a['malloc_calls'])] or r[-1] != '*':
    sys.exit(f'malloc_calls row {r}')
if b['malloc_calls'] < a['malloc_calls'] + 20000:
    sys.exit('b.json does not hold the 20000 more calls')
missing = [k for k, v in a.items() if isinstance(v, int) and k != 'pid' and k not in rows]
if missing:
    sys.exit(f'counters not compared: {missing}')
PY
	[ ! -s "$tmp/two.chk" ] && has "$tmp/two.out" "B - A" "compare header" &&
		ok "stats A B: every counter as A, B, B - A, B / A"
	# several processes' objects in one file: summed
	cat "$tmp/a.json" "$tmp/a.json" >"$tmp/aa.json"
	"$pcpm" stats "$tmp/aa.json" >"$tmp/aa.out" 2>&1
	want=$(( $("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["malloc_calls"])' "$tmp/a.json") * 2 ))
	has "$tmp/aa.out" "^  malloc_calls +$want\$" "two objects summed" && has "$tmp/aa.out" "2 processes summed" "header" &&
		ok "a file of two processes' objects is summed"
	# refused: a missing file, not JSON, JSON of something else
	echo '{"x": 1}' >"$tmp/other.json"
	echo 'garbage' >"$tmp/garbage.json"
	for f in "$tmp/none.json" "$tmp/other.json" "$tmp/garbage.json"; do
		"$pcpm" stats "$f" >"$tmp/e.out" 2>&1
		rc=$?
		if [ $rc != 0 ] && [ "$(wc -l <"$tmp/e.out")" = 1 ] && has "$tmp/e.out" "^pcpmalloc: .*$(basename "$f")" "refusal"; then
			ok "$(basename "$f") refused (exit $rc): $(cat "$tmp/e.out")"
		else
			fail "$(basename "$f"): exit $rc, $(cat "$tmp/e.out")"
		fi
	done
	;;
top)
	churn=$build/bench/wl-churn
	# about 6 s of churn on two threads, whatever this machine's speed
	t0=$(date +%s%N)
	LD_PRELOAD=$lib "$churn" -n 1000000 >/dev/null
	t1=$(date +%s%N)
	n=$(( 1000000 * 6000 / ( (t1 - t0) / 1000000 + 1 ) ))
	"$pcpm" run -e PCPMALLOC_LIVE=1 --stats=json -e "PCPMALLOC_STATS_FILE=$tmp/exit.json" -- \
		"$churn" -n $n >"$tmp/churn.out" 2>"$tmp/churn.err" &
	pid=$!   # (pcpmalloc run execs the program: same pid)
	"$pcpm" top --once --json "$pid" >"$tmp/top.json" 2>"$tmp/top.err"
	rc=$?
	"$pcpm" top --once "$pid" >"$tmp/top.txt" 2>&1
	rc2=$?
	page=/dev/shm/pcpmalloc.$pid
	[ -e "$page" ] && ok "the live page $page exists while wl-churn runs" || fail "no $page while wl-churn runs"
	cp "$page" "$tmp/page.copy" 2>/dev/null
	alive_after=0
	kill -0 "$pid" 2>/dev/null && alive_after=1
	wait "$pid"
	wrc=$?
	[ $wrc = 0 ] || { fail "wl-churn under pcpmalloc run: exit $wrc"; cat "$tmp/churn.err"; }
	[ $alive_after = 1 ] || fail "wl-churn finished before top had read it (n=$n): the check proves nothing"
	[ $rc = 0 ] || { fail "top --once --json: exit $rc"; cat "$tmp/top.err"; }
	[ -e "$page" ] && fail "$page left behind after exit" || ok "the page is removed at exit"
	# A page a killed process left behind, its pid now another process's (one that does not
	# publish): top must not show the dead process's figures as this one's.
	sleep 30 &
	spid=$!
	"$py" - "$tmp/page.copy" "/dev/shm/pcpmalloc.$spid" "$spid" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
upd, = struct.unpack_from('<Q', b, 32)
struct.pack_into('<Q', b, 32, upd - 60000)          # updated_ms: a minute before
struct.pack_into('<I', b, 48, int(sys.argv[3]))     # pid: the new process's
open(sys.argv[2], 'wb').write(b)
PY
	"$pcpm" top --once --wait 0.5 "$spid" >"$tmp/stale.out" 2>&1
	src=$?
	kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
	rm -f "/dev/shm/pcpmalloc.$spid"
	if [ $src = 1 ] && has "$tmp/stale.out" "left behind by an earlier process $spid" "stale page"; then
		ok "a stale page of a reused pid refused: $(head -c 160 "$tmp/stale.out")"
	else
		fail "stale page of a reused pid: exit $src, $(head -c 300 "$tmp/stale.out")"
	fi
	"$py" - "$tmp/top.json" "$tmp/exit.json" "$pid" <<'PY' >"$tmp/top.chk" 2>&1 && ok "top --once --json: $(cat "$tmp/top.chk")" || fail "top --once --json: $(cat "$tmp/top.chk")"
import json, sys
top = json.loads(open(sys.argv[1]).read().splitlines()[0])
ex = json.load(open(sys.argv[2]))
pid = int(sys.argv[3])
errs = []
if top.get('pid') != pid or top['live']['pid'] != pid:
    errs.append(f'pid {top.get("pid")} / {top["live"]["pid"]}, want {pid}')
# the same kind of values as the exit statistics: every key, every per-CPU key
miss = sorted(set(ex) - set(top))
if miss:
    errs.append(f'keys of the exit statistics missing: {miss}')
if len(top['cpus']) != len(ex['cpus']) or not top['cpus']:
    errs.append(f'{len(top["cpus"])} CPUs, the exit statistics {len(ex["cpus"])}')
for c, e in zip(top['cpus'], ex['cpus']):
    if set(c) != set(e):
        errs.append(f'cpu {c["cpu"]} keys {sorted(set(c) ^ set(e))} differ')
        break
need = ['count', 'high', 'batch', 'high_min', 'high_max', 'free_count', 'drains',
        'free_high_drains', 'refills']
for k in need:
    if any(not isinstance(c.get(k), int) for c in top['cpus']):
        errs.append(f'cpus[].{k} not a number')
c0 = top['cpus'][0]
if not (1 <= c0['batch'] and c0['high_min'] <= c0['high'] <= c0['high_max']):
    errs.append(f'cpu 0: batch {c0["batch"]}, high {c0["high"]} not in '
                f'[{c0["high_min"]}, {c0["high_max"]}]')
# a running churn: calls counted, fewer than at exit
if not 0 < top['malloc_calls'] <= ex['malloc_calls']:
    errs.append(f'malloc_calls {top["malloc_calls"]} (exit: {ex["malloc_calls"]})')
d = top.get('since_last')
if not d or d['malloc_calls'] <= 0 or len(d['cpus']) != len(top['cpus']):
    errs.append(f'since_last: {d}')
elif any(set(x) != {'cpu', 'refills', 'drains', 'free_high_drains', 'high_raises',
                    'high_decays'} for x in d['cpus']):
    errs.append(f'since_last.cpus: {d["cpus"][0]}')
if not isinstance(top.get('zones'), list) or not top['zones'][0]['buddyinfo']:
    errs.append('no zone buddyinfo')
if errs:
    sys.exit('; '.join(errs))
print(f'{len(top["cpus"])} CPUs (cpu 0: count {c0["count"]} high {c0["high"]} batch '
      f'{c0["batch"]}), malloc_calls {top["malloc_calls"]} of {ex["malloc_calls"]} at exit, '
      f'{d["malloc_calls"]} in the last {d["seconds"]:.1f} s; the keys of the exit statistics')
PY
	[ $rc2 = 0 ] && has "$tmp/top.txt" "^pcpmalloc .* pid $pid wl-churn" "top header" &&
		has "$tmp/top.txt" "^ +cpu +count +high +batch +high_min +high_max" "top per-CPU table" &&
		has "$tmp/top.txt" "^ +0( +[0-9]+){9}\$" "top cpu 0 row" &&
		has "$tmp/top.txt" "^buddyinfo Node 0, zone Normal" "top buddyinfo" &&
		has "$tmp/top.txt" "^zone lock: [0-9]+ of [0-9]+ contended" "top lock line" && ok "top --once: the text view"
	# refusals: a pcpmalloc process without the page, a process not on pcpmalloc, no process
	"$pcpm" run -- sleep 5 &
	spid=$!
	sleep 0.5
	"$pcpm" top --once --wait 0 "$spid" >"$tmp/nolive.out" 2>&1
	rc=$?
	[ $rc = 1 ] && has "$tmp/nolive.out" "publishes no live page.*PCPMALLOC_LIVE=1" "no page" &&
		ok "a process without PCPMALLOC_LIVE: $(cat "$tmp/nolive.out")" || fail "no page: exit $rc"
	kill "$spid"
	wait "$spid" 2>/dev/null
	sleep 5 &
	gpid=$!
	"$pcpm" top --once --wait 0 "$gpid" >"$tmp/glibc.out" 2>&1
	rc=$?
	kill "$gpid"
	wait "$gpid" 2>/dev/null
	[ $rc = 1 ] && has "$tmp/glibc.out" "does not run under pcpmalloc" "glibc process" &&
		ok "a process not on pcpmalloc: refused" || fail "a process not on pcpmalloc: exit $rc"
	"$pcpm" top --once "$gpid" >"$tmp/dead.out" 2>&1
	rc=$?
	[ $rc = 1 ] && has "$tmp/dead.out" "no process $gpid" "dead pid" && ok "a dead pid: refused" ||
		fail "a dead pid: exit $rc"
	# a page left behind by a killed process: the process is gone, said so
	"$pcpm" run -e PCPMALLOC_LIVE=1 -- sleep 30 &
	kpid=$!
	for _ in $(seq 50); do [ -e "/dev/shm/pcpmalloc.$kpid" ] && break; sleep 0.1; done
	kill -9 "$kpid"
	wait "$kpid" 2>/dev/null
	"$pcpm" top --once "$kpid" >"$tmp/killed.out" 2>&1
	rc=$?
	[ $rc = 1 ] && has "$tmp/killed.out" "no process $kpid \\(/dev/shm/pcpmalloc.$kpid is a page it left behind" \
		"killed process" && ok "a killed process's page: $(cat "$tmp/killed.out")" || fail "killed process: exit $rc"
	rm -f "/dev/shm/pcpmalloc.$kpid"
	;;
*)
	echo "usage: $0 help|run|stats|top BUILDDIR" >&2
	exit 2
	;;
esac
finish
