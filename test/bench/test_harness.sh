#!/usr/bin/env bash
# test_harness.sh - pcpmalloc-ab as a user meets it: a failing command, a missing or unknown
# allocator, --check catching different outputs, and small real runs under glibc and
# pcpmalloc with their table, verdict, CSV, JSON (with pcpmalloc's stats) and plot.
# Usage: test_harness.sh BUILD/bench/pcpmalloc-ab
set -uo pipefail
ab=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
run() { # out-prefix, args...: runs the harness, keeps stdout, stderr and the exit status
	local p=$1
	shift
	"$ab" -q "$@" >"$tmp/$p.out" 2>"$tmp/$p.err"
	echo $? >"$tmp/$p.rc"
}
rc() { cat "$tmp/$1.rc"; }
has() { grep -q -- "$2" "$tmp/$1" || { fail "$3: no '$2' in $1:"; sed 's/^/    /' "$tmp/$1"; return 1; }; }

# 1. a failing command: exit 1, one clear line naming the command, the allocator and the status
run f -n 2 -a glibc -a pcpmalloc -- sh -c 'echo oops >&2; exit 3'
[ "$(rc f)" = 1 ] || fail "failing command: exit $(rc f), want 1"
has f.err "FAILED: .*sh -c .* under glibc (warm-up run): exit status 3" "failing command" &&
	has f.err "| oops" "failing command shows its stderr" && ok "failing command"
# ... also when it fails only under one allocator, after the warm-up
run f2 -n 2 -w 0 -a glibc -a pcpmalloc -- sh -c 'test -z "$LD_PRELOAD"'
[ "$(rc f2)" = 1 ] || fail "failing under pcpmalloc: exit $(rc f2), want 1"
has f2.err "under pcpmalloc (run 1 of 2): exit status 1" "failing under one allocator" && ok "failing under one allocator"
# ... and a command that does not exist
run f3 -n 1 -a glibc -- /nonexistent/prog
[ "$(rc f3)" = 1 ] || fail "missing command: exit $(rc f3), want 1"
has f3.err "command not found: /nonexistent/prog" "missing command" && ok "missing command"

# ... and one that hangs, with --timeout
run f4 -n 1 -a glibc --timeout 1 -- sleep 30
[ "$(rc f4)" = 1 ] || fail "hanging command: exit $(rc f4), want 1"
has f4.err "under glibc (warm-up run): timed out after 1 s" "timeout" && ok "timeout"

# 2. a missing allocator is reported and skipped; the others run
run m -n 2 -a glibc -a foo=/nonexistent.so -a pcpmalloc -- true
[ "$(rc m)" = 0 ] || fail "missing allocator: exit $(rc m), want 0"
has m.err "skipping allocator foo=/nonexistent.so: /nonexistent.so not found" "missing allocator" &&
	has m.out "verdict: pcpmalloc vs glibc" "missing allocator: the others still compared" &&
	! grep -q "foo=" "$tmp/m.out" && ok "missing allocator skipped"
# ... a misspelt name is a usage error (exit 2), not a comparison with nothing in it
run m3 -n 1 -a glibc -a nosuchalloc -- true
[ "$(rc m3)" = 2 ] || fail "unknown allocator: exit $(rc m3), want 2"
has m3.err "unknown allocator 'nosuchalloc'" "unknown allocator refused" && ok "unknown allocator refused"
# ... a known allocator under a name of one's own (NAME=pcpmalloc:VAR=...) is that allocator,
# not a file called "pcpmalloc" that is missing (it was skipped as one)
run m4 -n 1 -a glibc -a 'sec=pcpmalloc:PCPMALLOC_SECURE=1' -- true
[ "$(rc m4)" = 0 ] || fail "NAME=pcpmalloc: exit $(rc m4), want 0"
! grep -q "skipping allocator" "$tmp/m4.err" && has m4.out "sec=pcpmalloc" "NAME=pcpmalloc: its column" &&
	has m4.out "verdict: sec=pcpmalloc.* vs glibc" "NAME=pcpmalloc compared" && ok "NAME=known allocator"
# ... and when none is left, exit 2
run m2 -n 1 -a foo=/nonexistent.so -- true
[ "$(rc m2)" = 2 ] || fail "no allocator left: exit $(rc m2), want 2"
has m2.err "no allocator left" "no allocator left" && ok "no allocator left"

# ... and a malformed or unknown PCPMALLOC_* setting of a column: the library's warning is
# shown (once per allocator), not swallowed with the command's stderr
run w -n 2 -a glibc -a 'pcpmalloc:PCPMALLOC_BATCH=abc' -a 'pcpmalloc:PCPMALLOC_BTCH=3' -- true
[ "$(rc w)" = 0 ] || fail "bad setting: exit $(rc w), want 0"
has w.err "pcpmalloc:PCPMALLOC_BATCH=abc: pcpmalloc: ignoring PCPMALLOC_BATCH=abc" "malformed setting warned" &&
	has w.err "pcpmalloc:PCPMALLOC_BTCH=3: pcpmalloc: ignoring PCPMALLOC_BTCH" "unknown setting warned" &&
	[ "$(grep -c 'ignoring PCPMALLOC_BATCH=abc' "$tmp/w.err")" = 1 ] && ok "bad settings warned once"

# 3. --check: same output passes, different output fails
run c1 -n 2 --check -a glibc -a pcpmalloc -- echo same
[ "$(rc c1)" = 0 ] || fail "--check with equal outputs: exit $(rc c1)"
run c2 -n 1 --check -a glibc -a pcpmalloc -- sh -c 'echo "${LD_PRELOAD:-none}"'
[ "$(rc c2)" = 1 ] || fail "--check with different outputs: exit $(rc c2), want 1"
has c2.err "FAILED --check: .* differs" "--check" && ok "--check"

# 4. a real run of a command and of a workload, with every output format
run r -n 3 -a glibc -a pcpmalloc -a 'pcpmalloc:PCPMALLOC_FREE_HIGH=0' --csv "$tmp/r.csv" \
	--json "$tmp/r.json" --plot "$tmp/r.svg" -- true
[ "$(rc r)" = 0 ] || { fail "run of true: exit $(rc r)"; cat "$tmp/r.err"; }
for pat in "^Min    wall" "^Median rss" "^Hmean  user" "^Stddev sys" "Welch" \
	"verdict: pcpmalloc vs glibc" "verdict: pcpmalloc:PCPMALLOC_FREE_HIGH=0 vs glibc" \
	"pcpmalloc stats (pcpmalloc, "; do
	has r.out "$pat" "table of true" || break
done
[ "$(grep -c '^true,' "$tmp/r.csv")" = 9 ] || fail "CSV: want 9 rows of 'true'"
/usr/bin/python3 - "$tmp/r.json" <<'PY' || fail "JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d['allocators'] == ['glibc', 'pcpmalloc', 'pcpmalloc:PCPMALLOC_FREE_HIGH=0'], d['allocators']
runs = d['results']['true']
assert all(len(runs[a]) == 3 for a in d['allocators'])
assert all(r['exit'] == 0 and r['rss'] > 0 for a in runs for r in runs[a])
# pcpmalloc's JSON stats were collected for its runs only
assert all(r['stats'].get('processes') == 1 for r in runs['pcpmalloc']), runs['pcpmalloc'][0]['stats']
assert all(not r['stats'] for r in runs['glibc'])
s = d['summary']['true']['wall']['by_alloc']
assert s['glibc']['n'] == 3 and 'hmean' in s['pcpmalloc'] and 'p' in s['pcpmalloc']
PY
grep -q "<svg" "$tmp/r.svg" && grep -q "</svg>" "$tmp/r.svg" || fail "SVG plot"
ok "run of true: table, verdicts, CSV, JSON, SVG"

run w -n 2 --quick --check -a glibc -a pcpmalloc --workload churn
[ "$(rc w)" = 0 ] || { fail "workload churn: exit $(rc w)"; cat "$tmp/w.err"; }
has w.out "ops_per_s" "workload metric" && has w.out "^Hmean  rss" "workload table" && ok "workload churn"

# 5. usage errors
run u1 -n 1 --workload nosuch
[ "$(rc u1)" = 2 ] || fail "unknown workload: exit $(rc u1), want 2"
run u2 -n 1
[ "$(rc u2)" = 2 ] || fail "nothing to run: exit $(rc u2), want 2"
[ "$(rc u1)$(rc u2)" = 22 ] && ok "usage errors"

echo "$fails failures"
[ $fails = 0 ]
