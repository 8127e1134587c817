#!/usr/bin/env bash
# test_hidden.sh HIDE VARIANT LIB TOPO_WORK API_TEST... - the API tests (short mode) and a
# busy process's lazy topology discovery, under LD_PRELOAD=LIB, with one resource of this
# machine hidden by test/hide.sh VARIANT (issue 21: no assumption of this machine).  Besides
# passing, the process must see the machine as the variant makes it:
#   cacheinfo, sys   the topology from CPUID on x86 (provisional elsewhere), not "failed"
#   numa             one zone, every CPU on node 0
#   one-cpu          one pcp slot per CPU id up to the one allowed, one CPU usable
#   no-rseq          the current CPU from sched_getcpu, not rseq
#   proc, no-thp     the topology this machine has (no /proc needed; THP not relied on)
# Exit 77 (skip) when hide.sh cannot hide the resource here.
set -u
hide=$1 variant=$2 lib=$3 work=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

run() { # name, command...: under the variant; 77 from hide.sh skips the whole test
	local name=$1
	shift
	bash "$hide" "$variant" env LD_PRELOAD="$lib" "$@" >"$tmp/out" 2>&1
	local rc=$?
	if [ $rc = 77 ] && grep -q "^skip: cannot hide" "$tmp/out"; then
		cat "$tmp/out"
		exit 77
	fi
	if [ $rc != 0 ]; then
		echo "FAIL: $name under '$variant': exit $rc"
		tail -20 "$tmp/out"
		fails=$((fails + 1))
	else
		echo "ok: $name under '$variant'"
	fi
}

for t in "$@"; do
	run "$(basename "$t")" "$t" short
done

# the machine as the process sees it: lazy discovery in a busy process, and the start-up
# configuration (PCPMALLOC_VERBOSE's block)
run "topology (busy process)" PCPMALLOC_STATS=json PCPMALLOC_STATS_FILE="$tmp/st.json" \
	PCPMALLOC_TOPOLOGY=lazy PCPMALLOC_VERBOSE=1 "$work" busy
cp "$tmp/out" "$tmp/verbose"
python3 - "$variant" "$tmp/st.json" "$tmp/verbose" <<'PY' || fails=$((fails + 1))
import glob, json, platform, re, sys
variant, path, verbose = sys.argv[1:4]
st = json.load(open(path))
text = open(verbose).read()
x86 = platform.machine() in ("x86_64", "i386", "i686", "amd64")
cacheinfo = bool(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/size"))
hidden = variant in ("cacheinfo", "sys") or not cacheinfo
want = "cpuid" if hidden and x86 else "provisional" if hidden else "sysfs"
bad = []
if st["topology"] != want:
    bad.append("topology %s (%s), not %s" % (st["topology"], st["topology_why"], want))
if variant in ("cacheinfo", "sys") and "no cacheinfo under /sys" not in st["topology_why"]:
    bad.append("reason %r" % st["topology_why"])
if any(c["slice_bytes"] <= 0 or c["high_max"] < c["high_min"] for c in st["cpus"]):
    bad.append("sizes %s" % st["cpus"])
m = re.search(r"cpus: (\d+) pcp slots, (\d+) CPUs usable; current CPU from (\S+)", text)
if not m:
    bad.append("no configuration block")
else:
    slots, usable, source = int(m.group(1)), int(m.group(2)), m.group(3)
    if variant == "one-cpu" and (usable != 1 or len(st["cpus"]) != slots):
        bad.append("one CPU: %d slots, %d usable" % (slots, usable))
    if variant == "no-rseq" and source != "sched_getcpu":
        bad.append("current CPU from %s" % source)
if variant in ("numa", "sys") and (len(st["zones"]) != 1 or any(c["node"] != 0 for c in st["cpus"])):
    bad.append("zones %d, nodes %s" % (len(st["zones"]), [c["node"] for c in st["cpus"]]))
if bad:
    print("FAIL: topology under '%s': %s" % (variant, "; ".join(bad)))
    sys.exit(1)
print("ok: topology under '%s': %s (%s), %d CPUs" % (variant, st["topology"],
      st["topology_why"] or "-", len(st["cpus"])))
PY
echo "$fails failures"
[ $fails = 0 ]
