#!/usr/bin/python3
"""targets_report.py OUTDIR [--check] - the markdown tables of bench/targets.sh (issue 6).

Reads what targets.sh left in OUTDIR (meta.txt, fastpath.txt, suite.json, pc.json,
scaling.csv, return.txt, startup.txt) and prints one table per target with the target's
verdict.  --check (the meson test) exits 1 unless every table that was asked for is there
with positive, finite numbers for every allocator that ran.
"""
import csv
import json
import math
import os
import re
import statistics
import sys

ALLOCS = ['glibc', 'jemalloc', 'mimalloc', 'tcmalloc', 'pcpmalloc']
PEERS = ALLOCS[:4]
problems = []


def gmean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float('nan')


def sane(what, x):
    if x is None or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        problems.append(f'{what}: {x!r}')
        return False
    return True


def no_figures(problem, heading, why):
    """Records problem for the summary; returns the section: heading, then 'No figures' + why."""
    problems.append(problem)
    return f'{heading}\n\nNo figures{why}'


def read(d, name):
    p = os.path.join(d, name)
    return open(p).read() if os.path.exists(p) else None


def cmd(d, name):
    c = read(d, name + '.cmd')
    return f'Command: `{c.strip()}`.' if c else ''


def table(head, rows):
    out = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    out += ['| ' + ' | '.join(str(c) for c in r) + ' |' for r in rows]
    return '\n'.join(out)


def yes(ok):
    return '**met**' if ok else '**not met**'


def t1(d):
    """bench/fastpath's rows (case, live, one figure per allocator): the table at the first
    live count (100: objects of the size held live, as in real programs), the other counts
    (0) as a reference column; the verdict (issue 17) on the plain sizes with live objects."""
    txt = read(d, 'fastpath.txt')
    if not txt:
        return no_figures('target 1: no bench/fastpath output', '## Target 1: fast path',
                          ': ' + (read(d, 'fastpath.err') or '').strip())
    lines = [l.split() for l in txt.splitlines() if l.strip()]
    head = lines[0][2:]
    cells, order, lives = {}, [], []
    for l in lines[1:]:
        if not re.fullmatch(r'[a-z]*[0-9]+', l[0]) or len(l) < 3:
            continue
        v = dict(zip(head, l[2:]))
        for a, x in v.items():
            if re.fullmatch(r'[0-9.]+', x):
                sane(f'target 1 {l[0]} live {l[1]} {a}', float(x))
        if l[0] not in order:
            order.append(l[0])
        if l[1] not in lives:
            lives.append(l[1])
        cells[l[0], l[1]] = v
    notes = [l for l in txt.splitlines() if l.startswith('(sized free')]
    rows, ok = [], True
    for c in order:
        v = cells.get((c, lives[0]), {})
        num = {a: float(x) for a, x in v.items() if re.fullmatch(r'[0-9.]+', x)}
        p, m, g = num.get('pcpmalloc'), num.get('mimalloc'), num.get('glibc')
        met = p is not None and (m is None or p <= m) and (g is None or p < g)
        if c.isdigit():
            ok &= met
        ref = [' / '.join(cells.get((c, lv), {}).get(a, '-') for a in ALLOCS) for lv in lives[1:]]
        rows.append([c] + [v.get(a, '-') for a in ALLOCS] + ['yes' if met else 'no'] + ref)
    return (f'## Target 1: fast path\n\nInstructions per allocate+free pair, one thread, with '
            f'{lives[0]} objects of the size held live (callgrind). {cmd(d, "fastpath")} Target '
            f'(issue 17): pcpmalloc at most mimalloc and below glibc at every plain size: '
            f'{yes(ok)}. Cases: SIZE = malloc+free; alignedA = posix_memalign(A, A)+free; '
            f'sizedS = malloc+sized free; deleteS = operator new + sized operator delete. '
            f'{" ".join(notes)}\n\n' +
            table(['case'] + ALLOCS + ['pcpmalloc <= mimalloc, < glibc'] +
                  [f'{lv} live: ' + ' / '.join(ALLOCS) for lv in lives[1:]], rows))


def load_suite(d, name):
    s = read(d, name)
    if not s:
        return None
    j = json.loads(s)
    res = {}
    for w, m in j['summary'].items():
        res[w] = {}
        for a, st in m.get('wall', {}).get('by_alloc', {}).items():
            rss = m.get('rss', {}).get('by_alloc', {}).get(a, {}).get('median')
            res[w][a] = (st.get('median'), rss)
    return j, res


def t23(d):
    ld = load_suite(d, 'suite.json')
    if not ld:
        return no_figures('target 2/3: no suite.json', '## Targets 2 and 3: suite', ' (see suite.err).')
    j, res = ld
    allocs = [a for a in ALLOCS if all(a in res[w] for w in res)]
    rows_t, rows_m = [], []
    tr = {a: [] for a in allocs}
    mr = {a: [] for a in allocs}
    worst_t = (0, '')
    worst_m = (0, '')
    for w, byal in res.items():
        g = byal.get('glibc', (None, None))
        for a in allocs:
            sane(f'suite {w} {a} wall', byal[a][0])
            sane(f'suite {w} {a} rss', byal[a][1])
        t = {a: byal[a][0] / g[0] for a in allocs}
        m = {a: byal[a][1] / g[1] for a in allocs}
        for a in allocs:
            tr[a].append(t[a])
            mr[a].append(m[a])
        peers = [a for a in allocs if a in PEERS]
        best = min(peers, key=lambda a: t[a])
        vs_best = t['pcpmalloc'] / t[best] if 'pcpmalloc' in t else float('nan')
        if vs_best > worst_t[0]:
            worst_t = (vs_best, w)
        if 'pcpmalloc' in m and m['pcpmalloc'] > worst_m[0]:
            worst_m = (m['pcpmalloc'], w)
        rows_t.append([w, f'{g[0]:.3f}'] + [f'{t[a]:.2f}' for a in allocs[1:]] +
                      [f'{best} {t[best]:.2f}', f'{vs_best:.2f}'])
        rows_m.append([w, f'{g[1]:.1f}'] + [f'{m[a]:.2f}' for a in allocs[1:]])
    gt = {a: gmean(tr[a]) for a in allocs}
    gm = {a: gmean(mr[a]) for a in allocs}
    bestg = min((a for a in allocs if a in PEERS), key=lambda a: gt[a])
    rel = gt.get('pcpmalloc', float('nan')) / gt[bestg]
    rows_t.append(['**geomean**', '1.00'] + [f'{gt[a]:.2f}' for a in allocs[1:]] +
                  [f'{bestg} {gt[bestg]:.2f}', f'{rel:.2f}'])
    rows_m.append(['**geomean**', '1.00'] + [f'{gm[a]:.2f}' for a in allocs[1:]])
    ok2 = rel <= 0.95 and worst_t[0] <= 1.25
    ok3 = gm.get('pcpmalloc', 9) <= 1.0 and worst_m[0] <= 1.5
    machine = j.get('machine', '')
    s = (f'## Target 2: suite time ({os.cpu_count()} CPUs)\n\n{cmd(d, "suite")} {machine}; median wall '
         f'time of {j["runs_per_allocator"]} interleaved runs, as ratios to glibc (glibc column: '
         f'seconds). Target: geomean at most 0.95x the best peer\'s (here {rel:.2f}x {bestg}), no '
         f'workload above 1.25x the best peer on it (worst: {worst_t[1]} {worst_t[0]:.2f}x): '
         f'{yes(ok2)}.\n\n' +
         table(['workload', 'glibc (s)'] + allocs[1:] + ['best peer', 'pcpmalloc / best'], rows_t))
    s += (f'\n\n## Target 3: suite peak RSS\n\nSame run; median peak RSS as ratios to glibc (glibc '
          f'column: MiB). Target: pcpmalloc geomean at most 1.00 (here {gm.get("pcpmalloc", 0):.2f}), '
          f'no workload above 1.5x glibc (worst: {worst_m[1]} {worst_m[0]:.2f}x): {yes(ok3)}.\n\n' +
          table(['workload', 'glibc (MiB)'] + allocs[1:], rows_m))
    return s


def t4(d):
    ld = load_suite(d, 'pc.json')
    if not ld:
        return no_figures('target 4: no pc.json', '## Target 4: producer/consumer', ' (see pc.err).')
    j, res = ld
    rows, ok = [], True
    for w, byal in res.items():
        allocs = [a for a in ALLOCS if a in byal]
        g = byal['glibc']
        for a in allocs:
            sane(f'pc {w} {a}', byal[a][0])
        cells = [f'{byal[a][0] / g[0]:.2f} / {byal[a][1] / g[1]:.2f}' for a in allocs]
        p, m = byal.get('pcpmalloc'), byal.get('mimalloc')
        met = p and (not m or p[0] <= m[0]) and p[1] / g[1] <= 1.2
        ok &= bool(met)
        rows.append([w, f'{g[0]:.3f} s / {g[1]:.1f} MiB'] + cells[1:] + ['yes' if met else 'no'])
    return (f'## Target 4: producer/consumer\n\n{cmd(d, "pc")} One set of threads allocates, the '
            f'other frees; cells: median time / peak RSS as ratios to glibc. Target (at 16 threads; '
            f'here {os.cpu_count()} CPUs): time at most mimalloc\'s, RSS within 1.2x glibc\'s: '
            f'{yes(ok)} at this thread count.\n\n' +
            table(['workload', 'glibc'] + [a for a in ALLOCS[1:]] + ['met here'], rows))


def t5(d):
    p = os.path.join(d, 'scaling.csv')
    if not os.path.exists(p):
        return no_figures('target 5: no scaling.csv', '## Target 5: scaling', ' (see scaling.err).')
    med = {}
    for r in csv.DictReader(open(p)):
        med.setdefault((r['allocator'], int(r['threads'])), []).append(float(r['ops_per_s'] or 0))
    ts = sorted({t for _, t in med})
    rows = []
    sp16 = None
    for a in ALLOCS:
        if (a, 1) not in med:
            continue
        b = statistics.median(med[(a, 1)])
        sane(f'scaling {a} 1 thread', b)
        cells = []
        for t in ts:
            v = statistics.median(med.get((a, t), [0]))
            sane(f'scaling {a} {t} threads', v)
            cells.append(f'{v / 1e6:.1f} ({v / b:.2f}x)')
            if a == 'pcpmalloc' and t == 16:
                sp16 = v / b
        rows.append([a] + cells)
    verdict = (f'{yes(sp16 >= 14)} ({sp16:.1f}x)' if sp16 else
               f'open: no 16-CPU machine here ({os.cpu_count()} CPUs), figures up to {ts[-1]} threads')
    return (f'## Target 5: scaling of thread-local churn\n\n{cmd(d, "scaling")} Mops/s (median) and '
            f'speedup over 1 thread (weak scaling: every thread does the same work). Target: 16 '
            f'threads at least 14x 1 thread: {verdict}.\n\n' +
            table(['allocator'] + [f'{t} thr' for t in ts], rows))


def t6(d):
    txt = read(d, 'return.txt')
    if not txt:
        return no_figures('target 6: no wl-return output', '## Target 6: memory returned', '.')
    rows = []
    ok = {}
    for line in txt.splitlines():
        kv = dict(re.findall(r'(\w+)=(-?[\w.]+)', line))
        if 'alloc' not in kv:
            continue
        a, m = kv['alloc'], int(kv['mode'])
        mb = lambda k: int(kv[k]) / 1024  # noqa: E731
        for k in ('rss_pre_kib', 'rss_peak_kib', 'rss_end_kib'):
            sane(f'return {a} mode {m} {k}', int(kv[k]))
        pre = int(kv['rss_pre_kib'])
        lim = pre * 1.1
        if m == 0:
            what = 'idle' + (' (decay thread)' if a == 'pcpmalloc' else '')
            t = int(kv['t_within10_ms'])
            got = f'{t} ms' if t >= 0 else 'never'
            met = 0 <= t <= 2000
        elif m == 1:
            what = 'idle, then activity' + (' (no thread)' if a == 'pcpmalloc' else '')
            after = int(kv['rss_after_activity_kib'])
            got = 'after activity' if after <= lim else 'no'
            met = after <= lim
        else:
            what = f'malloc_trim(0) ({int(kv["trim_us"]) / 1000:.1f} ms)'
            first = int(kv['rss_free_kib'])
            got = 'at once' if first <= lim else 'no'
            met = first <= lim
        if a == 'pcpmalloc':
            ok[m] = met
        end_key = 'rss_after_activity_kib' if m == 1 else 'rss_2s_kib'
        nl_key = 'nolazy_after_activity_kib' if m == 1 else 'nolazy_2s_kib'
        rows.append([a, what, f'{mb("rss_pre_kib"):.0f}', f'{mb("rss_peak_kib"):.0f}',
                     f'{mb("rss_free_kib"):.0f}', f'{mb(end_key):.0f} / {mb(nl_key):.0f}',
                     f'{mb("rss_end_kib"):.0f}', got])
    allok = bool(ok) and all(ok.values())
    return (f'## Target 6: memory returned\n\n{cmd(d, "return")} A burst (half the bytes in '
            f'16-1024 B blocks, half in 16 KiB-8 MiB ones, every fourth freed by a second thread) '
            f'over a live baseline; RSS in MiB. "2 s / after" is RSS / RSS minus LazyFree 2 s '
            f'after the free (mode idle, trim) or right after the activity. Target for pcpmalloc: '
            f'back within 10% of the pre-burst RSS in <= 2 s with the decay thread, at the next '
            f'activity after PCPMALLOC_DECAY_MS without it, at once with malloc_trim(0): '
            f'{yes(allok)}.\n\n' +
            table(['allocator', 'mode', 'pre-burst', 'peak', 'right after free', '2 s / after',
                   'end', 'within 10% of pre-burst'], rows))


def t7(d):
    txt = read(d, 'startup.txt')
    if txt is None:
        return no_figures('target 7: no startup.txt', '## Target 7: start-up', ' (see startup.err).')
    return f'## Target 7: start-up\n\n{cmd(d, "startup")}\n\n```\n{txt.rstrip()}\n```'


def main():
    d = sys.argv[1]
    check = '--check' in sys.argv
    meta = dict(l.split('=', 1) for l in (read(d, 'meta.txt') or '').splitlines() if '=' in l)
    print('# pcpmalloc against the targets of issue 6\n')
    print(f'Machine: {meta.get("cpus")} CPUs ({meta.get("cpu")}), Linux {meta.get("kernel")}, '
          f'{meta.get("glibc")}; {meta.get("date")}; load average at start {meta.get("load")}; '
          f'commit {meta.get("commit")}. Command: `{meta.get("command")}`'
          f'{" (quick: small sizes, one run; the figures only show that it runs)" if meta.get("quick") == "1" else ""}.\n')
    parts = []
    files = {'1': t1, '2': t23, '4': t4, '5': t5, '6': t6, '7': t7}
    present = {'1': 'fastpath.cmd', '2': 'suite.cmd', '4': 'pc.cmd', '5': 'scaling.cmd',
               '6': 'return.cmd', '7': 'startup.cmd'}
    for k, f in files.items():
        if present[k] and not os.path.exists(os.path.join(d, present[k])):
            continue
        parts.append(f(d))
    print('\n\n'.join(parts))
    if check:
        if problems:
            print('\ntargets_report: CHECK FAILED:\n  ' + '\n  '.join(problems), file=sys.stderr)
            sys.exit(1)
        print('\ntargets_report: check passed', file=sys.stderr)


if __name__ == '__main__':
    main()
