#!/usr/bin/env bash
# test_startup.sh SRCDIR BUILDDIR - the start-up benchmarks run and report what they say:
# bench/startup.sh (one short round, glibc and pcpmalloc) writes JSON with both allocators,
# glibc's ratios exactly 1 and pcpmalloc's positive; build/bench/startup-cpu prints a line per
# allocator with the first at ratio 1.000, and refuses bad arguments with exit status 2.
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
lib=$(realpath "$build/preload/libpcpmalloc.so")

if command -v hyperfine >/dev/null; then
	bash "$src/bench/startup.sh" "$build" --rounds 1 --runs 2 --loop 5 --only pcpmalloc \
		--json "$tmp/s.json" >"$tmp/out" || fail "startup.sh exited $?"
	python3 - "$tmp/s.json" <<'PY' || fail "startup.sh JSON: $(cat "$tmp/s.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert set(r) == {"glibc", "pcpmalloc"}, r
assert r["glibc"]["true_ratio"] == 1 and r["glibc"]["loop_ratio"] == 1, r
assert all(r["pcpmalloc"][k] > 0 for k in ("true_ratio", "loop_ratio", "true_cpu_ratio", "loop_cpu_ratio"))
assert r["pcpmalloc"]["true_runs"] == 2 and r["pcpmalloc"]["loop_runs"] == 1, r
PY
	grep -q '^pcpmalloc ' "$tmp/out" || fail "startup.sh printed no pcpmalloc line"
	echo "ok: startup.sh"
else
	echo "skip: startup.sh (no hyperfine)"
fi

"$build/bench/startup-cpu" 5 "" "$lib" >"$tmp/cpu" || fail "startup-cpu exited $?"
grep -Eq '^glibc +[0-9.]+ \(1\.000\) +[0-9.]+ \(1\.000\)$' "$tmp/cpu" ||
	fail "startup-cpu: glibc not at ratio 1: $(cat "$tmp/cpu")"
grep -q "^$lib " "$tmp/cpu" || fail "startup-cpu: no line for pcpmalloc: $(cat "$tmp/cpu")"
"$build/bench/startup-cpu" 3 --true "" "$lib" | grep -q '^/bin/true x 3' || fail "startup-cpu --true"
set +e
"$build/bench/startup-cpu" 0 "" 2>/dev/null
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "startup-cpu with N=0 exited $rc, want 2"
echo "ok: startup-cpu"
