"""heuristics_report.py - Markdown tables for bench/heuristics.sh: per mechanism, the kernel
post's figure beside ours, switch off vs on, medians of the interleaved runs."""
import json
import os
import statistics
import sys

d, runs = sys.argv[1], sys.argv[2]

MECH = [
    ("free_high_batch", "1. PCPF_FREE_HIGH_BATCH (keep batch pages before a free_high drain)",
     "PCPMALLOC_FREE_HIGH_BATCH=0 / 1", "wl-xthread: 1 producer/consumer pair, 8-32 KiB blocks",
     "lmbench3 AF_UNIX +70.5%; zone-lock contention 46.1% -> 21.3%; free_high drains -89.9%",
     ["ops_per_s", "free_high_drains", "zone_lock", "zone_lock_contended_pct", "rss"]),
    ("free_high", "2. free_high (drain high-order pages when a CPU mostly frees)",
     "PCPMALLOC_FREE_HIGH=0 / 1", "wl-xthread: 1 producer/consumer pair, 8-32 KiB blocks",
     "netperf-tcp Hmean +0.2% .. +5% over unlimited high-order caching",
     ["ops_per_s", "free_high_drains", "rss", "zone_lock"]),
    ("fbatch", "3. free batch by CPU count (pagevec 15 / 31)",
     "PCPMALLOC_FBATCH=15 / 31", "wl-xthread: 1 pair, 16-256 B objects freed by the other thread",
     "LRU-lock contention 8.9% -> 2.2%; throughput +7.1%",
     ["ops_per_s", "slab_lock_per_free", "slab_lock", "slab_lock_contended"]),
    ("alloc_factor", "4. alloc_factor (batch << alloc_factor refills in allocation runs)",
     "PCPMALLOC_ALLOC_SCALE=0 / 1", "wl-burst: 2 threads allocate 128 MiB each in 16-256 B objects, free, x4",
     "kernel build: zone-lock contention 12.6% -> 11.0%",
     ["wall", "zone_lock", "pages_per_refill", "zone_lock_contended_pct", "zone_lock_wait_pct"]),
    ("count_min", "5. count_min decay (RFC: decay only pages idle since the last period)",
     "PCPMALLOC_DECAY_MODE=mainline / count_min (DECAY_MS=25)",
     "wl-burst: 2 threads, 6 bursts of 64 MiB each in 16-256 B objects, 250 ms idle between",
     "8 parallel kernel builds: pages allocated from the zone -21.4%",
     ["wall", "pgalloc_zone", "decay_runs", "high_decays", "rss"]),
    ("count_min_make", "5b. count_min decay in a parallel build",
     "PCPMALLOC_DECAY_MODE=mainline / count_min (DECAY_MS=100)", "make -j2 of a generated C project with gcc",
     "8 parallel kernel builds: pages allocated from the zone -21.4%",
     ["wall", "pgalloc_zone", "decay_runs", "high_decays"]),
]


def metric(run, m):
    st = run.get("stats", {})
    if m in ("wall", "user", "sys", "rss"):
        return run[m]
    if m == "ops_per_s":
        return run.get("metrics", {}).get("ops_per_s")
    if m == "slab_lock_per_free":
        return st["slab_lock"] / max(st["free_calls"], 1)
    if m == "pages_per_refill":
        return st["refill_pages"] / max(st["refills"], 1)
    return st.get(m)


def fmt(v):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


print(f"Each table: the same workload with the switch off and on, {runs} interleaved runs each "
      "after a warm-up (`bench/heuristics.sh`), medians; pcpmalloc counters are per run. "
      "`*` marks a difference Welch's t-test finds significant at 95% (wall, RSS, ops/s). The 224-CPU "
      "columns: one run of the same pair on a synthetic 2-socket 224-CPU machine "
      "(`PCPMALLOC_TOPOLOGY_SYNTHETIC`, `PCPMALLOC_CPU_SOURCE=tid`), counters only.\n")
for key, title, switch, workload, kernel, metrics in MECH:
    path = os.path.join(d, key + ".json")
    if not os.path.exists(path):
        continue
    j = json.load(open(path))
    cmd = next(iter(j["results"]))
    res = j["results"][cmd]
    summ = j["summary"][cmd]
    off, on = j["allocators"]
    print(f"### {title}\n")
    print(f"Switch `{switch}`; workload: {workload}. The post: {kernel}.\n")
    big = None
    bpath = os.path.join(d, key + "-224.json")
    if os.path.exists(bpath):
        bj = json.load(open(bpath))
        bcmd = next(iter(bj["results"]))
        boff, bon = bj["allocators"]
        big = (bj["results"][bcmd][boff], bj["results"][bcmd][bon])
    print("| metric | off | on | change | 224 CPUs: off | on | change |")
    print("|---|---|---|---|---|---|---|")
    for m in metrics:
        a = [metric(r, m) for r in res[off]]
        b = [metric(r, m) for r in res[on]]
        a = [x for x in a if x is not None]
        b = [x for x in b if x is not None]
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        ch = f"{(mb - ma) / ma * 100:+.1f}%" if ma else "-"
        sig = summ.get(m, {}).get("by_alloc", {}).get(on, {}).get("significant")
        cells = ["-", "-", "-"]
        if big and m not in ("wall", "user", "sys", "rss", "ops_per_s"):  # counters only
            xa = [x for x in (metric(r, m) for r in big[0]) if x is not None]
            xb = [x for x in (metric(r, m) for r in big[1]) if x is not None]
            if xa and xb:
                ba, bb = statistics.median(xa), statistics.median(xb)
                cells = [fmt(ba), fmt(bb), f"{(bb - ba) / ba * 100:+.1f}%" if ba else "-"]
        print(f"| {m} | {fmt(ma)} | {fmt(mb)} | {ch}{' *' if sig else ''} | " + " | ".join(cells) + " |")
    print()
