#!/usr/bin/env bash
# bench/startup.sh - process start-up cost of each allocator, as ratios to glibc.
#
#   bash bench/startup.sh [BUILD_DIR] [--rounds R] [--runs N] [--loop N] [--only a,b] [--json FILE]
#
# Two commands, timed by hyperfine under every allocator: `/bin/true` (N runs per round,
# default 20) and a shell that starts N (1000) `sh -c :` processes, every one of them with the
# allocator preloaded (1 run per round).  The allocators take turns within each of R rounds
# (default 5; the order rotates each round), and a figure is the median of all its runs
# (hyperfine --export-json keeps every run's time): on a shared machine the load changes from
# second to second, and a side-by-side, interleaved median is what stays comparable.  Prints
# each median and its ratio to glibc's, and beside them the ratios of the CPU time (user +
# sys, medians of hyperfine's per-round means), which a busy machine disturbs less than wall
# time; allocators whose library is not installed are skipped; --only picks some (glibc is
# always measured).  --json FILE writes the figures.
# Goal for pcpmalloc (issue 3): both ratios <= 1.15.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=build rounds=5 runs=20 loop=1000 json_out= only=
while [[ $# -gt 0 ]]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--loop) loop=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--json) json_out=$2; shift 2 ;;
	-h | --help) sed -n '2,16p' "$0"; exit 0 ;;
	*) build=$1; shift ;;
	esac
done
command -v hyperfine >/dev/null || { echo "startup.sh: hyperfine is not installed" >&2; exit 1; }
pcpm=$(realpath "$build/preload/libpcpmalloc.so")
[[ -f $pcpm ]] || { echo "startup.sh: no $pcpm (build first)" >&2; exit 1; }

libdir=/usr/lib/x86_64-linux-gnu
names=(glibc) libs=("")
for pair in jemalloc:$libdir/libjemalloc.so.2 mimalloc:$libdir/libmimalloc.so.2 \
	tcmalloc:$libdir/libtcmalloc_minimal.so.4 pcpmalloc:$pcpm; do
	name=${pair%%:*} lib=${pair#*:}
	[[ -z $only || ,$only, == *,$name,* ]] || continue
	[[ -e $lib ]] || continue
	names+=("$name")
	libs+=("$lib")
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The loop runs under a plain shell; only the `sh -c :` children get the allocator, so the
# figure is the cost of N process starts, not of one long-lived shell.
cat >"$tmp/loop.sh" <<EOF
i=0
while [ \$i -lt $loop ]; do LD_PRELOAD="\$1" sh -c :; i=\$((i + 1)); done
EOF

n=${#names[@]}
for ((r = 0; r < rounds; r++)); do
	for ((k = 0; k < n; k++)); do
		i=$(((k + r) % n))
		hyperfine -N --style none --warmup 2 --runs "$runs" \
			--export-json "$tmp/true.$r.${names[$i]}.json" \
			"env LD_PRELOAD=${libs[$i]} /bin/true" >/dev/null 2>&1
		hyperfine -N --style none --runs 1 \
			--export-json "$tmp/loop.$r.${names[$i]}.json" \
			"sh $tmp/loop.sh ${libs[$i]}" >/dev/null 2>&1
	done
done

python3 - "$tmp" "$loop" "$json_out" "${names[@]}" <<'EOF'
import glob, json, os, statistics, sys
tmp, loop, out, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def median(case, name):
    times, cpu = [], []
    for f in glob.glob(os.path.join(tmp, "%s.*.%s.json" % (case, name))):
        r = json.load(open(f))["results"][0]
        times += r["times"]
        cpu.append(r["user"] + r["system"])  # hyperfine keeps only the mean CPU time per call
    return statistics.median(times), len(times), statistics.median(cpu)
t = {n: median("true", n) for n in names}
l = {n: median("loop", n) for n in names}
print("%-10s %14s %8s %22s %8s   %s" % ("allocator", "/bin/true ms", "ratio", "%s x sh -c : ms" % loop,
                                          "ratio", "CPU-time ratios (user+sys)  runs"))
res = {}
for n in names:
    rt, rl = t[n][0] / t["glibc"][0], l[n][0] / l["glibc"][0]
    ct, cl = t[n][2] / t["glibc"][2], l[n][2] / l["glibc"][2]
    res[n] = {"true_median_s": t[n][0], "true_ratio": rt, "loop_median_s": l[n][0], "loop_ratio": rl,
              "true_cpu_ratio": ct, "loop_cpu_ratio": cl, "true_runs": t[n][1], "loop_runs": l[n][1]}
    print("%-10s %14.3f %8.3f %22.1f %8.3f   %6.3f %6.3f             %d/%d" %
          (n, t[n][0] * 1e3, rt, l[n][0] * 1e3, rl, ct, cl, t[n][1], l[n][1]))
print("(ratios: median over median of glibc; CPU-time ratios: /bin/true, loop; runs: timed runs of"
      " /bin/true / of the loop behind each median. Wall medians move by several % between runs"
      " on a busy machine: compare in one run, and with build/bench/startup-cpu.)")
if out:
    json.dump(res, open(out, "w"), indent=1)
EOF
