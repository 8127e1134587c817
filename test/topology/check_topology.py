#!/usr/bin/env python3
"""check_topology.py TOOL LIBPCPMALLOC TOPO_WORK SRCDIR CTOR_LOCK_LIB

The tool (pcpmalloc-topology --json) and the library (LD_PRELOAD, PCPMALLOC_TOPOLOGY=now,
PCPMALLOC_STATS=json) on fake machines, against per-CPU values worked out by hand from
kernel-pcp.md ("pcpmalloc's choices", section 6); the arithmetic is in test_sizing.c and
repeated in short below.  4 KiB pages; batch 63, high_min 4*63 = 252, flag when
slice pages > 3*63 = 189.  Then this machine (tool == library), hwloc missing, a bad
description, lazy discovery (a busy process reads this machine from sysfs, with the tool's
sizes, a short one does not), and lazy discovery started by a malloc whose caller holds a lock
that a library constructor, running inside another thread's dlopen, waits for (it must not
deadlock: sysfs needs no dlopen, and no thread is started).

Nothing here assumes this machine: lazy discovery must report the source this machine has
(sysfs where the kernel exports cacheinfo, else cpuid on x86, else provisional), with the L2,
L3 and slice of every CPU that lstopo-no-graphics gives; and each source is exercised on
purpose (PCPMALLOC_SYSFS_ROOT at a folder written here, at an empty folder, PCPMALLOC_CPUID=0).
The suite runs this script once more with the cacheinfo hidden (test/hide.sh cacheinfo).
"""
import glob, json, os, platform, shutil, subprocess, sys, tempfile
import xml.etree.ElementTree as ET

tool, lib, work, srcdir, ctor_lock = sys.argv[1:6]
FIELDS = ("package", "core", "node", "l2_bytes", "llc_bytes", "slice_bytes", "batch",
          "high_min", "high_max", "free_high_batch")
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL:", msg)


def cpu(pkg, core, node, l2, llc, slice_, hmax, fhb, hmin=252, batch=63):
    return dict(package=pkg, core=core, node=node, l2_bytes=l2, llc_bytes=llc,
                slice_bytes=slice_, batch=batch, high_min=hmin, high_max=hmax,
                free_high_batch=fhb)


def run_tool(src, env_extra=None):
    args = [tool, "--json"] + (["--xml", src[1]] if src[0] == "xml" else ["--synthetic", src[1]])
    env = dict(os.environ, **(env_extra or {}))
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    return {c["cpu"]: c for c in json.loads(out)["cpus"]}


def run_lib(src, env_extra=None, mode="small"):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "st.json")
        env = dict(os.environ, LD_PRELOAD=lib, PCPMALLOC_STATS="json", PCPMALLOC_STATS_FILE=path,
                   PCPMALLOC_TOPOLOGY="now")
        if src and src[0] == "xml":
            env["PCPMALLOC_TOPOLOGY_XML"] = src[1]
        elif src:
            env["PCPMALLOC_TOPOLOGY_SYNTHETIC"] = src[1]
        env.update(env_extra or {})
        p = subprocess.run([work, mode], env=env, capture_output=True, text=True)
        if p.returncode != 0:
            fail("%s: exit %d: %s" % (src, p.returncode, p.stderr))
            return None, p.stderr
        return json.load(open(path)), p.stderr


def compare(name, got, expect, ncpus):
    if len(got) != ncpus:
        fail("%s: %d CPUs, expected %d" % (name, len(got), ncpus))
    for i in range(ncpus):
        e, g = expect(i), got.get(i)
        if g is None:
            fail("%s: cpu %d missing" % (name, i))
            continue
        bad = [f for f in FIELDS if g.get(f) != e[f]]
        if bad:
            fail("%s: cpu %d: %s" % (name, i, ", ".join("%s %s != %s" % (f, g.get(f), e[f]) for f in bad)))
            return


def case(name, src, ncpus, expect, env_extra=None):
    compare(name + " (tool)", run_tool(src, env_extra), expect, ncpus)
    st, _ = run_lib(src, env_extra)
    if st is None:
        return
    if st.get("topology") != "hwloc":
        fail("%s (library): topology %s" % (name, st.get("topology")))
    compare(name + " (library)", {c["cpu"]: c for c in st["cpus"]}, expect, ncpus)
    print("ok:", name)


MiB = 1 << 20
X86 = platform.machine() in ("x86_64", "i386", "i486", "i586", "i686", "amd64")
# The source lazy discovery must find here: what this machine really has.
HAS_CACHEINFO = bool(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/size"))
MACHINE_SOURCE = "sysfs" if HAS_CACHEINFO else "cpuid" if X86 else "provisional"
print("this machine: sysfs cacheinfo %s, %s: lazy discovery should read %s" %
      ("present" if HAS_CACHEINFO else "absent", platform.machine(), MACHINE_SOURCE))


def weight(cpuset):
    return sum(bin(int(w, 16)).count("1") for w in cpuset.split(","))


def lstopo(env_extra=None):
    """Per PU os_index: L2 bytes and PUs sharing it, LLC bytes and PUs sharing it, slice, as
    lstopo-no-graphics (hwloc's own tool, not our walk) gives them; None without lstopo."""
    exe = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if not exe:
        return None
    env = dict(os.environ, **(env_extra or {}))
    env.pop("LD_PRELOAD", None)
    root = ET.fromstring(subprocess.run([exe, "--of", "xml", "-"], env=env, check=True,
                                        capture_output=True, text=True).stdout)
    pus = {}

    def walk(o, caches):
        t = o.get("type", "")
        if t.endswith("Cache") and o.get("cache_type") != "2":  # 2: instruction
            caches = caches + [(int(o.get("depth")), int(o.get("cache_size")), weight(o.get("cpuset")))]
        if t == "PU":
            l2 = [c for c in caches if c[0] == 2]
            llc = max((c for c in caches if c[0] >= 2), default=None)
            if llc:
                l2 = l2[0] if l2 else llc
                pus[int(o.get("os_index"))] = dict(l2_bytes=l2[1], l2_shared=l2[2],
                                                   llc_bytes=llc[1], llc_shared=llc[2],
                                                   slice_bytes=llc[1] // llc[2])
        for ch in o:
            walk(ch, caches)
    walk(root, [])
    return pus


def same_as_lstopo(name, cpus, ref, need=None):
    """The L2, L3 and slice of every CPU the library (or the tool) lists, against lstopo's."""
    if ref is None:
        print("skip: %s against lstopo-no-graphics (not installed: Debian's hwloc-nox)" % name)
        return
    if need and {c["cpu"] for c in cpus} != set(ref):
        fail("%s: CPUs %s, lstopo %s" % (name, sorted(c["cpu"] for c in cpus), sorted(ref)))
    for c in cpus:
        r = ref.get(c["cpu"])
        bad = [f for f in ("l2_bytes", "llc_bytes", "slice_bytes") if r is None or c[f] != r[f]]
        if bad:
            fail("%s: cpu %d: %s, lstopo %s" % (name, c["cpu"], {f: c[f] for f in bad}, r))
            return
    print("ok: %s: L2, L3 and slice of %d CPUs as lstopo-no-graphics" % (name, len(cpus)))


LSTOPO = lstopo()

# This machine, captured with lstopo --of xml: 2 cores, L2 1 MiB each, L3 32 MiB for both.
# slice 32 MiB / 2 = 16 MiB = 4096 pages; + L2 256 pages = 4352.
case("this machine (xml)", ("xml", os.path.join(srcdir, "thismachine.xml")), 2,
     lambda i: cpu(0, i, 0, MiB, 32 * MiB, 16 * MiB, 4352, True))

# 224 CPUs: 2 packages x 56 cores x 2 threads, L2 2 MiB per core, L3 105 MiB per package.
# slice 110100480 / 112 = 983040 B = 240 pages; L2 share 2 MiB / 2 = 256 pages; 496; 240 > 189.
S224 = "pack:2 numa:1 l3:1(size=110100480) l2:56(size=2097152) core:1 pu:2"
case("224-CPU server", ("synthetic", S224), 224,
     lambda i: cpu(i // 112, i // 2, i // 112, 2 * MiB, 110100480, 983040, 496, True))
# heap policy there: high_min max(1286 / 112, 252) = 252, high_max 262144 / 8 / 112 = 292.
case("224-CPU server, heap policy", ("synthetic", S224), 224,
     lambda i: cpu(i // 112, i // 2, i // 112, 2 * MiB, 110100480, 983040, 292, True),
     {"PCPMALLOC_HIGH_POLICY": "heap"})
# PCPMALLOC_CACHE_SLICE=524288: 128 slice pages; high_max 256 + 128 = 384; 128 <= 189: off.
case("224-CPU server, CACHE_SLICE=512KiB", ("synthetic", S224), 224,
     lambda i: cpu(i // 112, i // 2, i // 112, 2 * MiB, 110100480, 983040, 384, False),
     {"PCPMALLOC_CACHE_SLICE": "524288"})

# 128 CPUs: 2 packages x 8 CCDs x 4 cores x 2 threads, 32 MiB L3 per CCD, 512 KiB L2.
# slice 32 MiB / 8 = 4 MiB = 1024 pages; L2 share 256 KiB = 64 pages; 1088.
case("128-CPU server", ("synthetic", "pack:2 numa:1 l3:8(size=33554432) l2:4(size=524288) core:1 pu:2"),
     128, lambda i: cpu(i // 64, i // 2, i // 64, 512 << 10, 32 * MiB, 4 * MiB, 1088, True))

# Two L2 sizes: cores 0-3 1.25 MiB, cores 4-7 2 MiB, 2 threads each, 30 MiB L3 for 16.
# slice 31457280 / 16 = 1966080 B = 480 pages; + 160 = 640, or + 256 = 736.
case("two L2 sizes (xml)", ("xml", os.path.join(srcdir, "hybrid_l2.xml")), 16,
     lambda i: cpu(0, i // 2, 0, 1310720 if i < 8 else 2 * MiB, 31457280, 1966080,
                   640 if i < 8 else 736, True))

# No L3: one 1 MiB L2 for 4 cores is the LLC: slice 256 KiB = 64 pages, no L2 share on
# top; high_max max(64, 252) = 252; 64 <= 189: off.
case("no L3", ("synthetic", "pack:1 numa:1 l2:1(size=1048576) core:4 pu:1"), 4,
     lambda i: cpu(0, i, 0, MiB, MiB, 256 << 10, 252, False))

# 2 NUMA nodes (one per package), 8 cores each, 1 MiB L2, 16 MiB L3: slice 2 MiB = 512
# pages; + 256 = 768; heap policy: 262144 / 8 / 8 = 4096.
S2N = "pack:2 numa:1 l3:1(size=16777216) l2:8(size=1048576) core:1 pu:1"
case("2 NUMA nodes", ("synthetic", S2N), 16,
     lambda i: cpu(i // 8, i, i // 8, MiB, 16 * MiB, 2 * MiB, 768, True))
case("2 NUMA nodes, heap policy", ("synthetic", S2N), 16,
     lambda i: cpu(i // 8, i, i // 8, MiB, 16 * MiB, 2 * MiB, 4096, True),
     {"PCPMALLOC_HIGH_POLICY": "heap"})

# One zone per node, in the library: a fake machine with CPU 0 on node 0 and CPU 1 on node 1
# (one package each).  topo_work pins a thread to each CPU, allocates 8 MiB of 32 KiB runs
# there, has each CPU free the other's, then trims.  Each zone must have fed its own CPU's
# pcp (refills from both zones, no zonelist fallback), and every page of zone 1 (only ever
# used by those runs) must be back in zone 1 (free == managed): the frees of CPU 0 went back
# to the zone the pages came from.  Arenas are not mbind'ed on a fake machine.
S2CPU = "pack:2 numa:1 l3:1(size=16777216) l2:1(size=1048576) core:1 pu:1"
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "st.json")
    env = dict(os.environ, LD_PRELOAD=lib, PCPMALLOC_STATS="json", PCPMALLOC_STATS_FILE=path,
               PCPMALLOC_TOPOLOGY="now", PCPMALLOC_TOPOLOGY_SYNTHETIC=S2CPU)
    p = subprocess.run([work, "numa"], env=env, capture_output=True, text=True)
    if p.returncode == 77:
        print("skip: 2 NUMA nodes, library routing (CPU 1 not available)")
    elif p.returncode != 0:
        fail("2 NUMA nodes, routing: exit %d: %s" % (p.returncode, p.stderr))
    else:
        st = json.load(open(path))
        zs = st.get("zones", [])
        nodes = [c["node"] for c in st["cpus"]]
        if len(zs) != 2 or nodes != [0, 1]:
            fail("2 NUMA nodes, routing: %d zones, CPU nodes %s" % (len(zs), nodes))
        elif not (zs[0]["pcp_refills"] > 0 and zs[1]["pcp_refills"] > 0
                  and zs[1]["pcp_refill_pages"] >= 2048):
            fail("2 NUMA nodes, routing: refills %s" % [(z["pcp_refills"], z["pcp_refill_pages"]) for z in zs])
        elif zs[1]["free_pages"] != zs[1]["managed_pages"] or zs[1]["pgfree_zone"] != zs[1]["pgalloc_zone"]:
            fail("2 NUMA nodes, routing: zone 1 did not get its pages back: %s" % zs[1])
        elif any(z["numa_miss"] or z["numa_foreign"] or z["mbind"] for z in zs):
            fail("2 NUMA nodes, routing: fallback or binding on a fake machine: %s" % zs)
        elif sum(st["buddyinfo"]) != sum(sum(z["buddyinfo"]) for z in zs):
            fail("2 NUMA nodes: buddyinfo %s is not the zones' sum" % st["buddyinfo"])
        else:
            print("ok: 2 NUMA nodes, library routing (zone 0: %d refills, zone 1: %d refills, "
                  "%d/%d pages back)" % (zs[0]["pcp_refills"], zs[1]["pcp_refills"],
                                         zs[1]["free_pages"], zs[1]["managed_pages"]))

# This machine, live: the library's values are the tool's.
out = subprocess.run([tool, "--json"], check=True, capture_output=True, text=True).stdout
live = {c["cpu"]: c for c in json.loads(out)["cpus"]}
st, _ = run_lib(None)
if st:
    got = {c["cpu"]: c for c in st["cpus"]}
    for i, c in live.items():
        if i in got and any(got[i][f] != c[f] for f in FIELDS):
            fail("this machine: cpu %d: library %s, tool %s" % (i, {f: got[i][f] for f in FIELDS}, c))
            break
    else:
        print("ok: this machine (live, library == tool)")
    # one zone per node of this machine; arenas bound only where there are 2+ nodes
    nn = len({c["node"] for c in live.values()})
    zs = st.get("zones", [])
    if len(zs) != nn or any(z["mbind"] != (nn >= 2) or z["mbind_failed"] for z in zs):
        fail("this machine: %d nodes, zones %s" % (nn, zs))

# hwloc missing: one warning, provisional sizes kept, no crash.
off, _ = run_lib(None, {"PCPMALLOC_TOPOLOGY": "off"})
st, err = run_lib(None, {"PCPMALLOC_TOPOLOGY_LIB": "/nonexistent/libhwloc.so.15", "PCPMALLOC_VERBOSE": "1"})
if st and off:
    lines = [l for l in err.splitlines() if "topology:" in l]
    if len(lines) != 1 or "keeping the provisional" not in lines[0]:
        fail("hwloc missing: warnings %r" % lines)
    if st["topology"] != "failed" or off["topology"] != "provisional":
        fail("hwloc missing: topology %s / off %s" % (st["topology"], off["topology"]))
    if [[c[f] for f in FIELDS] for c in st["cpus"]] != [[c[f] for f in FIELDS] for c in off["cpus"]]:
        fail("hwloc missing: sizes differ from the provisional ones")
    else:
        print("ok: hwloc missing")
st, err = run_lib(("synthetic", "pack:2 garbage:x"), {"PCPMALLOC_VERBOSE": "1"})
if st and (st["topology"] != "failed" or sum("topology:" in l for l in err.splitlines()) != 1):
    fail("bad synthetic description: topology %s, stderr %r" % (st["topology"], err))
elif st:
    print("ok: bad synthetic description")

# Lazy: a short process stays provisional; a busy one (32 MiB in order-3 runs per round,
# high_max 300 so that every round refills) passes 64 refills and 50 ms and loads hwloc.
st, _ = run_lib(None, {"PCPMALLOC_TOPOLOGY": "lazy"}, "small")
if st and st["topology"] != "provisional":
    fail("lazy, short process: topology %s" % st["topology"])
st, _ = run_lib(None, {"PCPMALLOC_TOPOLOGY": "lazy"}, "busy")
SIZES = ("node", "l2_bytes", "llc_bytes", "slice_bytes", "batch", "high_min", "high_max",
         "free_high_batch")
if st and st["topology"] != MACHINE_SOURCE:
    fail("lazy, busy process: topology %s, not %s (%s; refills %s)" %
         (st["topology"], MACHINE_SOURCE, st.get("topology_why"), st.get("refills")))
elif st:
    got = {c["cpu"]: c for c in st["cpus"]}
    bad = [i for i, c in live.items() if i in got and any(got[i][f] != c[f] for f in SIZES)]
    if bad and MACHINE_SOURCE != "provisional":
        i = bad[0]
        fail("lazy (%s): cpu %d: library %s, tool (hwloc) %s" %
             (MACHINE_SOURCE, i, {f: got[i][f] for f in SIZES}, {f: live[i][f] for f in SIZES}))
    else:
        print("ok: lazy discovery (short: provisional, busy: %s after %d refills, the "
              "tool's sizes)" % (MACHINE_SOURCE, st["refills"]))
    if MACHINE_SOURCE != "provisional":
        same_as_lstopo("lazy discovery (%s)" % MACHINE_SOURCE, st["cpus"], LSTOPO)
# ... and so does one whose heap is 20 KiB blocks (a paged slab class: order-5 slabs taken
# from the zone, never through a pcp refill; the zone's allocations count too).
st, _ = run_lib(None, {"PCPMALLOC_TOPOLOGY": "lazy"}, "busy-paged")
if st and st["topology"] != MACHINE_SOURCE:
    fail("lazy, busy process of 20 KiB blocks: topology %s, not %s" % (st["topology"], MACHINE_SOURCE))
elif st:
    print("ok: lazy discovery of a heap of 20 KiB blocks (slabs from the zone)")

# Lazy discovery cannot deadlock: see dlopen_lock() in topo_work.c.  Had it dlopen'ed hwloc
# in the malloc caller, this would hang (the timeout fails it); sysfs needs no loader lock, so
# discovery completes while the caller holds the lock, and no helper thread exists (2 threads:
# main and the one inside dlopen).
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "st.json")
    env = dict(os.environ, LD_PRELOAD=lib, PCPMALLOC_STATS="json", PCPMALLOC_STATS_FILE=path,
               PCPMALLOC_TOPOLOGY="lazy", PCPMALLOC_HIGH_MAX="300")
    try:
        p = subprocess.run([work, "dlopen-lock", ctor_lock], env=env, capture_output=True,
                           text=True, timeout=60)
        st = json.load(open(path)) if p.returncode == 0 else None
        if p.returncode != 0:
            fail("discovery under a held lock: exit %d: %s" % (p.returncode, p.stderr))
        elif "holding the lock: 2" not in p.stdout or st["topology"] != MACHINE_SOURCE:
            fail("discovery under a held lock: %r, topology %s" % (p.stdout, st["topology"]))
        else:
            print("ok: lazy discovery while the caller holds a lock a constructor needs (no deadlock)")
    except subprocess.TimeoutExpired:
        fail("discovery under a held lock: deadlock (timeout)")

# Each source of lazy discovery on purpose, on any machine (PCPMALLOC_SYSFS_ROOT: the folder
# read in place of /sys).  A busy process, lazy discovery; the tool's --library reads the same.
def lazy(env_extra):
    st, err = run_lib(None, dict({"PCPMALLOC_TOPOLOGY": "lazy"}, **env_extra), "busy")
    out = subprocess.run([tool, "--library", "--json"], env=dict(os.environ, **env_extra),
                         check=True, capture_output=True, text=True).stdout
    return st, json.loads(out)


def same_as_tool(name, st, tl):
    got = {c["cpu"]: c for c in st["cpus"]}
    mine = {c["cpu"]: c for c in tl["cpus"]}
    for i, c in got.items():
        if i not in mine or any(mine[i][f] != c[f] for f in SIZES):
            fail("%s: cpu %d: library %s, pcpmalloc-topology --library %s" %
                 (name, i, {f: c[f] for f in SIZES}, mine.get(i)))
            return False
    if tl["summary"]["source"] != st["topology"]:
        fail("%s: tool source %s, library %s" % (name, tl["summary"]["source"], st["topology"]))
        return False
    return True


def fake_sysfs(root, ncpu, l2, l3, per_l3, size_fmt):
    """A sysfs tree of ncpu CPUs: a private L2 of l2 KiB, an L3 of l3 KiB for each group of
    per_l3 CPUs (package = group), one NUMA node."""
    for i in range(ncpu):
        base = os.path.join(root, "devices/system/cpu/cpu%d" % i)
        g = i // per_l3 * per_l3
        for k, (lvl, typ, kib, shared) in enumerate([(1, "Data", 48, "%d" % i),
                                                     (1, "Instruction", 32, "%d" % i),
                                                     (2, "Unified", l2, "%d" % i),
                                                     (3, "Unified", l3, "%d-%d" % (g, g + per_l3 - 1))]):
            d = os.path.join(base, "cache/index%d" % k)
            os.makedirs(d)
            for f, v in (("level", lvl), ("type", typ), ("size", size_fmt(kib)),
                         ("shared_cpu_list", shared)):
                open(os.path.join(d, f), "w").write("%s\n" % v)
        os.makedirs(os.path.join(base, "topology"))
        open(os.path.join(base, "topology/physical_package_id"), "w").write("%d\n" % (i // per_l3))
        open(os.path.join(base, "topology/core_id"), "w").write("%d\n" % (i % per_l3))
    os.makedirs(os.path.join(root, "devices/system/node/node0"))
    open(os.path.join(root, "devices/system/node/possible"), "w").write("0\n")
    open(os.path.join(root, "devices/system/node/node0/cpulist"), "w").write("0-%d\n" % (ncpu - 1))


with tempfile.TemporaryDirectory() as d:
    empty = os.path.join(d, "empty")
    os.mkdir(empty)
    # sysfs: a tree of the test's own.  4 CPUs per L3 of 12 MiB: slice 3 MiB = 768 pages, +
    # L2 512 KiB = 128 pages: high_max 896, flag on (768 > 189); with an L3 of 1 MiB (sizes
    # in "M"): slice 256 KiB = 64 pages, high_max max(192, 252) = 252, flag off.
    for name, l3, size_fmt, hmax, fhb in (("12 MiB L3", 12288, lambda k: "%dK" % k, 896, True),
                                          ("1 MiB L3", 1024, lambda k: "%dM" % (k >> 10) if k >= 1024 else "%dK" % k, 252, False)):
        root = os.path.join(d, "sys-" + name.split()[0])
        fake_sysfs(root, 64, 512, l3, 4, size_fmt)
        st, tl = lazy({"PCPMALLOC_SYSFS_ROOT": root})
        if not st:
            continue
        bad = [c for c in st["cpus"] if (c["l2_bytes"], c["llc_bytes"], c["slice_bytes"], c["high_max"],
                                        c["free_high_batch"], c["package"], c["core"], c["node"])
               != (512 << 10, l3 << 10, (l3 << 10) // 4, hmax, fhb, c["cpu"] // 4, c["cpu"] % 4, 0)]
        if st["topology"] != "sysfs" or st["topology_why"] or bad:
            fail("sysfs source, %s: topology %s (%r), cpus %s" % (name, st["topology"],
                                                                  st["topology_why"], bad[:1]))
        elif same_as_tool("sysfs source, " + name, st, tl):
            print("ok: sysfs source, a folder of the test's own (%s: high_max %d, free_high_batch %s)"
                  % (name, hmax, fhb))
    # cpuid: sysfs without cacheinfo (an empty folder); on x86, the sizes hwloc's CPUID
    # backend gives (HWLOC_COMPONENTS=-linux: hwloc's x86 backend alone)
    off, _ = run_lib(None, {"PCPMALLOC_TOPOLOGY": "off"})
    st, tl = lazy({"PCPMALLOC_SYSFS_ROOT": empty})
    why = "sysfs: no cacheinfo under %s/devices/system/cpu" % empty
    if st and X86:
        if st["topology"] != "cpuid" or st["topology_why"] != why:
            fail("cpuid source: topology %s (%r)" % (st["topology"], st["topology_why"]))
        elif same_as_tool("cpuid source", st, tl):
            same_as_lstopo("cpuid source (sysfs root empty)", st["cpus"],
                           lstopo({"HWLOC_COMPONENTS": "-linux"}) if LSTOPO is not None else None)
    elif st:
        if st["topology"] != "provisional" or "cpuid: no CPUID" not in st["topology_why"]:
            fail("no cpuid here: topology %s (%r)" % (st["topology"], st["topology_why"]))
        else:
            print("ok: no CPUID on %s: provisional (%s)" % (platform.machine(), st["topology_why"]))
    # neither: the provisional sizes stay, with both reasons; PCPMALLOC_CACHE_SLICE still
    # sizes them (524288: 128 pages: high_max = L2 share + 128 pages, at least 252; flag off)
    for extra in ({}, {"PCPMALLOC_CACHE_SLICE": "524288"}):
        label = " (CACHE_SLICE=512KiB)" if extra else ""
        env = dict({"PCPMALLOC_SYSFS_ROOT": empty, "PCPMALLOC_CPUID": "0"}, **extra)
        st, tl = lazy(env)
        ref, _ = run_lib(None, dict({"PCPMALLOC_TOPOLOGY": "off"}, **extra))
        if not st or not ref:
            continue
        prov = [[c[f] for f in FIELDS] for c in st["cpus"]]
        if (st["topology"] != "provisional" or st["topology_why"] != why + "; cpuid: off (PCPMALLOC_CPUID=0)"
                or prov != [[c[f] for f in FIELDS] for c in ref["cpus"]]):
            fail("no source%s: topology %s (%r), sizes %s, not %s" % (
                label, st["topology"], st["topology_why"], prov[:1], [[c[f] for f in FIELDS] for c in ref["cpus"]][:1]))
        elif extra and any(c["free_high_batch"] or c["high_max"] != max(252, (c["l2_bytes"] >> 12) + 128
                                                                      if c["llc_bytes"] != c["l2_bytes"] else 252)
                           for c in st["cpus"]):
            fail("no source, PCPMALLOC_CACHE_SLICE=524288: %s" % st["cpus"][:1])
        elif same_as_tool("no source" + label, st, tl):
            print("ok: no source%s: provisional sizes, reason %r" % (label, st["topology_why"]))
    if off and off["topology_why"] != "PCPMALLOC_TOPOLOGY=off":
        fail("PCPMALLOC_TOPOLOGY=off: reason %r" % off["topology_why"])

# A fake machine past the kernel's largest NR_CPUS (8192) is refused with one warning and
# this machine used (hwloc took minutes on a flat 99,999-PU description, in every process).
HUGE = "pack:1 numa:1 core:1 pu:99999"
st, err = run_lib(("synthetic", HUGE))
ref, _ = run_lib(None)
if st and ref:
    if err.count("ignoring PCPMALLOC_TOPOLOGY_SYNTHETIC: a machine of more than 8192 CPUs") != 1:
        fail("99,999 PUs: not one warning: %r" % err)
    elif len(st["cpus"]) != len(ref["cpus"]):
        fail("99,999 PUs: %d CPUs, this machine has %d" % (len(st["cpus"]), len(ref["cpus"])))
    else:
        print("ok: 99,999 PUs refused, this machine's %d CPUs used" % len(st["cpus"]))
p = subprocess.run([tool, "--synthetic", HUGE], capture_output=True, text=True, timeout=60)
if p.returncode != 2 or "more than 8192 CPUs" not in p.stderr:
    fail("tool, 99,999 PUs: exit %d, %r" % (p.returncode, p.stderr))

print("%d failures" % failures)
sys.exit(1 if failures else 0)
