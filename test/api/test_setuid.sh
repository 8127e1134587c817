#!/bin/bash
# test_setuid.sh - a set-user-ID program (AT_SECURE) linked with pcpmalloc ignores PCPMALLOC_*:
# PCPMALLOC_STATS_FILE must not let the user who starts it write a file with its privileges
# (before, the statistics went into any file named there).  Needs root (it makes a copy of
# secure_target, verbose_target.c built with -DSECURE_TARGET, set-user-ID to nobody); skipped otherwise.  A control run of the same
# program, not set-user-ID, must honour the variables, so the test can fail.
# Usage: test_setuid.sh SECURE_TARGET
set -u
target=$1
if [[ $(id -u) -ne 0 ]] || ! getent passwd nobody >/dev/null; then
	echo "SKIP: needs root and the user nobody"
	exit 77
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
chmod 755 "$d"
cp "$target" "$d/plain"
cp "$target" "$d/suid"
chown nobody "$d/suid"
chmod 4755 "$d/suid"
fail() { echo "FAIL: $*"; exit 1; }

# control: the variables work for an ordinary program
out=$(PCPMALLOC_STATS=1 PCPMALLOC_STATS_FILE="$d/plain.stats" "$d/plain" 2>&1) || fail "plain run: $out"
[[ $out == "secure 0 pcpmalloc 1" ]] || fail "plain run printed: $out"
grep -q pcpmalloc "$d/plain.stats" || fail "control: no statistics in PCPMALLOC_STATS_FILE"

# the victim: a file the set-user-ID program's user may write
echo precious > "$d/victim"
chown nobody "$d/victim"
out=$(PCPMALLOC_STATS=1 PCPMALLOC_STATS_FILE="$d/victim" PCPMALLOC_VERBOSE=1 \
	PCPMALLOC_BATCH=banana "$d/suid" 2>"$d/suid.err") || fail "set-user-ID run failed: $out"
if [[ $out == "secure 0 "* ]]; then
	echo "SKIP: no AT_SECURE for a set-user-ID program here (nosuid mount?)"
	exit 77
fi
[[ $out == "secure 1 pcpmalloc 1" ]] || fail "set-user-ID run printed: $out"
[[ $(cat "$d/victim") == precious ]] || fail "PCPMALLOC_STATS_FILE honoured in a set-user-ID program: $(head -c 200 "$d/victim")"
[[ ! -s "$d/suid.err" ]] || fail "PCPMALLOC_* read in a set-user-ID program: $(head -c 300 "$d/suid.err")"
echo "ok: PCPMALLOC_* ignored by a set-user-ID program, honoured by the same program otherwise"
