#!/usr/bin/env bash
# test_cmd.sh - the `pcpmalloc` command of the build tree as a user meets it:
#   help   --help names every command, a bad command line exits 2 with usage, --version;
#   run    the program runs under the library with the settings given, its exit status comes
#          back, child processes keep the library, and a program the library cannot be loaded
#          into (statically linked, a broken library) runs with a warning saying so;
#   stats  a PCPMALLOC_STATS=json file as the table, two files compared counter by counter,
#          unreadable files refused with one line.
# Usage: test_cmd.sh help|run|stats BUILDDIR
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
*)
	echo "usage: $0 help|run|stats BUILDDIR" >&2
	exit 2
	;;
esac
finish
