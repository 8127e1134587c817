#!/usr/bin/env bash
# bench/startup.sh - process start-up cost of each allocator, as ratios to glibc.
#
#   bash bench/startup.sh [BUILD_DIR] [--runs N] [--loop N] [--json FILE]
#
# Two commands, each run by hyperfine under every allocator side by side in one invocation
# (so the machine's load hits all alike): `/bin/true`, and a shell that starts N (1000)
# `sh -c :` processes, every one of them with the allocator preloaded.  Prints the median wall
# time of each and its ratio to glibc's median, one line per allocator; allocators whose
# library is not installed are skipped.  Medians, not means: a start-up time has a long tail
# on a shared machine.  --json FILE writes the figures as JSON for other scripts.
# Goal for pcpmalloc (issue 3): both ratios <= 1.15.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=build runs=40 loop=1000 json_out=
while [[ $# -gt 0 ]]; do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--loop) loop=$2; shift 2 ;;
	--json) json_out=$2; shift 2 ;;
	-h | --help) sed -n '2,13p' "$0"; exit 0 ;;
	*) build=$1; shift ;;
	esac
done
command -v hyperfine >/dev/null || { echo "startup.sh: hyperfine is not installed" >&2; exit 1; }
pcpm=$(realpath "$build/preload/libpcpmalloc.so")
[[ -f $pcpm ]] || { echo "startup.sh: no $pcpm (build first)" >&2; exit 1; }

libdir=/usr/lib/x86_64-linux-gnu
names=(glibc) libs=("")
for pair in jemalloc:libjemalloc.so.2 mimalloc:libmimalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4; do
	if [[ -e $libdir/${pair#*:} ]]; then
		names+=("${pair%%:*}")
		libs+=("$libdir/${pair#*:}")
	fi
done
names+=(pcpmalloc) libs+=("$pcpm")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The loop runs under a plain shell; only the `sh -c :` children get the allocator, so the
# figure is the cost of 1000 process starts, not of one long-lived shell.
cat >"$tmp/loop.sh" <<EOF
i=0
while [ \$i -lt $loop ]; do LD_PRELOAD="\$1" sh -c :; i=\$((i + 1)); done
EOF

bench() { # name of the case, command template with @LIB@
	local case=$1 tmpl=$2 args=()
	for i in "${!names[@]}"; do
		args+=(-n "${names[$i]}" "${tmpl//@LIB@/${libs[$i]}}")
	done
	hyperfine -N --style none --warmup 3 --runs "$3" --export-json "$tmp/$case.json" \
		"${args[@]}" >/dev/null
}

bench true "env LD_PRELOAD=@LIB@ /bin/true" "$runs"
bench loop "sh $tmp/loop.sh @LIB@" "$(( runs / 8 > 3 ? runs / 8 : 3 ))"

python3 - "$tmp/true.json" "$tmp/loop.json" "$loop" "$json_out" <<'EOF'
import json, sys
true_j, loop_j, loop, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
med = lambda f: {r["command"]: r["median"] for r in json.load(open(f))["results"]}
t, l = med(true_j), med(loop_j)
print("%-10s %14s %8s %22s %8s" % ("allocator", "/bin/true ms", "ratio", "%s x sh -c : ms" % loop, "ratio"))
res = {}
for name in t:
    rt, rl = t[name] / t["glibc"], l[name] / l["glibc"]
    res[name] = {"true_median_s": t[name], "true_ratio": rt, "loop_median_s": l[name], "loop_ratio": rl}
    print("%-10s %14.3f %8.3f %22.1f %8.3f" % (name, t[name] * 1e3, rt, l[name] * 1e3, rl))
if out:
    json.dump(res, open(out, "w"), indent=1)
EOF
