#!/usr/bin/env python3
"""scale.py - process-wide lock profile of the threaded workloads at 2..224 virtual CPUs.

Runs bench/scale.sh's work: every threaded suite workload under one or two pcpmalloc libraries,
on synthetic machines of 2, 16, 64 and 224 CPUs (PCPMALLOC_TOPOLOGY_SYNTHETIC) with one pcp per
thread (PCPMALLOC_CPU_SOURCE=tid: the CPU is a hash of the thread id), reads the JSON statistics
(PCPMALLOC_STATS=json) and prints per workload and CPU count:

  acq/1k   process-wide lock acquisitions per 1000 malloc+free calls (every top-level
           `<name>_lock` counter of the statistics: zone, zone_grow, slab, barn, huge -
           per-CPU pcp and sheaf locks are not named so and are not counted)
  warm/MiB warm-up: the acquisitions that are not steady state, per MiB of heap growth
           (the statistics' mapped_bytes at exit): acq(L) - steady * calls(L), over MiB
  steady/1k steady state: acquisitions per 1000 calls after warm-up, from a second run of
           --steady times the operations (default 2): (acq(kL) - acq(L)) / (calls(kL) -
           calls(L)); a workload whose lock use is all warm-up reads 0
  cont%    contended share: `<name>_lock_contended` summed over `<name>_lock` summed
  hold     mean hold time (ns) of the busiest lock (`<name>_lock_hold_ns`), '-' when the library
           does not report it, '~N' when borrowed from the other library's run of the same
           workload and CPU count (before/after mode); every hold is in the mean (none is
           dropped: core/lockstat.h)
           ' (N)': the mean of the holds under 2^18 cycles, where the library counts the long
           ones apart (`<name>_lock_long_holds`, `_long_hold_ns`): on this 2-CPU VM with 32
           threads they are mostly holders the scheduler preempted
  max      the longest hold of any process-wide lock (us) and that lock, with the count of
           holds of 2^18 cycles (~100 us) or more of all locks ('-': not reported)
  N_half   real CPUs at which the busiest lock would be held half of the time:
               N_half(L) = t_call / (2 * a_L * h_L)
           t_call = the process's CPU time per malloc+free call (cpu_time_ns / calls), a_L =
           acquisitions of lock L per call, h_L = its mean hold time; each of N CPUs running
           the workload holds L for a share a_L * h_L / t_call of its time, so the lock is
           busy N * a_L * h_L / t_call of the time.  The busiest lock is the one with the
           smallest N_half.  a_L counts the busiest instance of the lock when the statistics
           give it (`<name>_lock_busiest`: the class's or node's instance taken most), else
           all instances summed as if they were one lock (a lower bound).  ' (N)': from the
           holds under 2^18 cycles (see hold)
  grow     zone growths per run (zone_grow)
  MiB      the run's peak RSS (wait4's ru_maxrss)
  by lock  acquisitions per 1000 calls of each lock (the name without `_lock`), most first.

Counters are exact on this 2-CPU VM (they count what the data structures do, not how fast it
runs); t_call and the hold times are measured here, so N_half is a projection.  Every figure
is the median of the --runs runs (default 3: one run's hold times and CPU time moved N_half
between 11 and 117 from run to run under load).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

# CPU count -> hwloc synthetic description: 2 hardware threads per core, one L2 of 2 MiB per
# core, 960 KiB of L3 per CPU (the 224-CPU server's slice); one package up to 16 CPUs.
MACHINES = {
    2: 'pack:1 numa:1 l3:1(size=1966080) l2:1(size=2097152) core:1 pu:2',
    16: 'pack:1 numa:1 l3:1(size=15728640) l2:8(size=2097152) core:1 pu:2',
    64: 'pack:2 numa:1 l3:1(size=31457280) l2:16(size=2097152) core:1 pu:2',
    224: 'pack:2 numa:1 l3:1(size=110100480) l2:56(size=2097152) core:1 pu:2',
}

# name -> (binary, fixed args, total operations, 'threads' or 'pairs', option for the count,
# option for the operations (per thread / per producer))
WORKLOADS = {
    'churn-16-512': ('wl-churn', ['-s', '16', '-S', '512'], 3200000, 'threads', '-t', '-n'),
    'churn-4k-16k': ('wl-churn', ['-s', '4096', '-S', '16384'], 1600000, 'threads', '-t', '-n'),
    'churn-16k-32k': ('wl-churn', ['-s', '16384', '-S', '32768', '-k', '250'], 800000,
                      'threads', '-t', '-n'),
    'larson': ('wl-larson', [], 3200000, 'threads', '-t', '-n'),
    'xthread-16-256': ('wl-xthread', ['-s', '16', '-S', '256'], 1600000, 'pairs', '-p', '-n'),
    'xthread-8k-32k': ('wl-xthread', ['-s', '8192', '-S', '32768'], 320000, 'pairs', '-p', '-n'),
}


def lock_profile(st):
    """{name: (acq, contended, wait_ns, hold_ns or None, acquisitions of the busiest instance,
    longest hold ns or None, long holds, their total ns)} for every top-level <name>_lock."""
    out = {}
    for k, v in st.items():
        m = re.fullmatch(r'([a-z0-9_]+)_lock', k)
        if not m or not isinstance(v, (int, float)):
            continue
        n = m.group(1)
        hold = st.get(n + '_lock_hold_ns')
        busiest = st.get(n + '_lock_busiest')
        hmax = st.get(n + '_lock_hold_max_ns')
        out[n] = (v, st.get(n + '_lock_contended', 0), st.get(n + '_lock_wait_ns', 0),
                  hold if isinstance(hold, (int, float)) and hold > 0 else None,
                  busiest if isinstance(busiest, (int, float)) else v,
                  hmax if isinstance(hmax, (int, float)) else None,
                  st.get(n + '_lock_long_holds', 0), st.get(n + '_lock_long_hold_ns', 0))
    return out


def run_one(build, lib, wl, cpus, threads, tmp, extra_env):
    binary, args, total, kind, topt, nopt = WORKLOADS[wl]
    count = max(1, min(threads, cpus)) if kind == 'threads' else max(1, min(threads // 2, cpus // 2))
    per = max(1, total // count)
    for f in glob.glob(os.path.join(tmp, 'st.*.json')):
        os.unlink(f)
    env = dict(os.environ)
    env.update({'LD_PRELOAD': lib, 'PCPMALLOC_STATS': 'json',
                'PCPMALLOC_STATS_FILE': os.path.join(tmp, 'st.%p.json'),
                'PCPMALLOC_CPU_SOURCE': 'tid', 'PCPMALLOC_TOPOLOGY_SYNTHETIC': MACHINES[cpus]})
    env.update(extra_env)
    cmd = [os.path.join(build, 'bench', binary)] + args + [topt, str(count), nopt, str(per)]
    with open(os.path.join(tmp, 'out'), 'w+') as out:
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        log = out.read()
    if p.returncode:
        sys.exit('scale.py: %s failed (%d): %s' % (' '.join(cmd), p.returncode, log[-500:]))
    files = glob.glob(os.path.join(tmp, 'st.*.json'))
    if len(files) != 1:
        sys.exit('scale.py: %s left %d statistics files' % (' '.join(cmd), len(files)))
    with open(files[0]) as f:
        st = json.load(f)
    calls = st['malloc_calls'] + st['free_calls']
    return {'workload': wl, 'cpus': cpus, 'count': count, 'kind': kind, 'calls': calls,
            'cpu_time_ns': st.get('cpu_time_ns', 0), 'locks': lock_profile(st),
            'rss_mib': ru.ru_maxrss / 1024.0, 'heap_mib': st.get('mapped_bytes', 0) / 1048576.0,
            'grow': st.get('zone_grow', 0),
            'threads_opt': topt, 'cmd': ' '.join(cmd[0:1] + cmd[1:])}


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def summarise(runs, borrow=None, long_runs=None):
    """One figure set from repeated runs (medians); borrow: {lock: hold_ns} for locks whose
    hold time this library does not report; long_runs: runs of k times the operations, for
    the steady state."""
    calls = median([r['calls'] for r in runs])
    t_call = median([r['cpu_time_ns'] / max(1, r['calls']) for r in runs])
    names = sorted({n for r in runs for n in r['locks']})
    per = {}
    for n in names:
        acq = median([r['locks'].get(n, (0, 0, 0, None, 0))[0] / max(1, r['calls']) for r in runs])
        cont = median([r['locks'].get(n, (0, 0, 0, None, 0))[1] / max(1, r['calls']) for r in runs])
        holds = [r['locks'][n][3] for r in runs if n in r['locks'] and r['locks'][n][3]]
        hold, borrowed = (median(holds), False) if holds else (None, False)
        if hold is None and borrow and borrow.get(n):
            hold, borrowed = borrow[n], True
        # the mean of the holds under 2^18 cycles: the long ones (a preempted holder on this
        # oversubscribed VM, or a system call) taken out again, where the library counts them
        shorts = []
        for r in runs:
            v = r['locks'].get(n)
            if v and v[3] and len(v) > 7 and v[0] > v[6]:
                shorts.append(max(0.0, (v[3] * v[0] - v[7]) / (v[0] - v[6])))
        hold_short = median(shorts) if shorts else hold
        top = median([r['locks'].get(n, (0, 0, 0, None, 0))[4] / max(1, r['calls']) for r in runs])
        per[n] = {'acq': acq, 'cont': cont, 'hold': hold, 'borrowed': borrowed, 'top': top,
                  'hold_short': hold_short}
    acq = sum(p['acq'] for p in per.values())
    cont = sum(p['cont'] for p in per.values())
    # steady state and warm-up, from the difference of the run lengths (exact counters)
    total = lambda r: sum(v[0] for v in r['locks'].values())
    steady, warm = None, None
    if long_runs:
        a1, c1 = median([total(r) for r in runs]), calls
        a2, c2 = median([total(r) for r in long_runs]), median([r['calls'] for r in long_runs])
        if c2 > c1:
            steady = max(0.0, (a2 - a1) / (c2 - c1))
            heap = median([r['heap_mib'] for r in runs])
            warm = max(0.0, a1 - steady * c1) / heap if heap > 0 else None
    hmax, hmax_lock = None, None
    for n in names:
        ms = [r['locks'][n][5] for r in runs if n in r['locks'] and r['locks'][n][5] is not None]
        if ms and (hmax is None or median(ms) > hmax):
            hmax, hmax_lock = median(ms), n
    longs = median([sum(v[6] for v in r['locks'].values()) for r in runs])
    busiest, nhalf = None, None
    for n, p in per.items():
        if p['top'] > 0 and p['hold']:
            nh = t_call / (2 * p['top'] * p['hold'])
            if nhalf is None or nh < nhalf:
                busiest, nhalf = n, nh
    nhalf_short = None  # the same from the holds under 2^18 cycles
    for n, p in per.items():
        if p['top'] > 0 and p['hold_short']:
            nh = t_call / (2 * p['top'] * p['hold_short'])
            nhalf_short = nh if nhalf_short is None else min(nhalf_short, nh)
    if busiest is None and per:  # no hold time anywhere: name the most acquired lock
        busiest = max(per, key=lambda n: per[n]['acq'])
    return {'calls': calls, 't_call_ns': t_call,
            'rss_mib': median([r['rss_mib'] for r in runs]), 'acq_per_1k': 1000 * acq,
            'contended_pct': 100 * cont / acq if acq else 0.0, 'busiest': busiest,
            'hold_ns': per[busiest]['hold'] if busiest else None,
            'hold_borrowed': per[busiest]['borrowed'] if busiest else False,
            'hold_short_ns': per[busiest]['hold_short'] if busiest else None,
            'n_half': nhalf, 'n_half_short': nhalf_short, 'steady_per_1k': None if steady is None else 1000 * steady,
            'warm_per_mib': warm, 'hold_max_ns': hmax, 'hold_max_lock': hmax_lock,
            'long_holds': longs, 'grow': median([r['grow'] for r in runs]),
            'locks': {n: {'acq_per_1k': 1000 * p['acq'], 'hold_ns': p['hold']}
                      for n, p in per.items()}}


def fmt_cell(s):
    hold = '-' if s['hold_ns'] is None else ('~' if s['hold_borrowed'] else '') + '%.0f' % s['hold_ns']
    if s['hold_ns'] is not None and s['hold_short_ns'] is not None and not s['hold_borrowed'] \
            and s['hold_short_ns'] != s['hold_ns']:
        hold += ' (%.0f)' % s['hold_short_ns']
    nh = '-' if s['n_half'] is None else ('~' if s['hold_borrowed'] else '') + (
        '%.0f' % s['n_half'] if s['n_half'] < 1e6 else '>1e6')
    if s['n_half'] is not None and s['n_half_short'] is not None and not s['hold_borrowed'] \
            and abs(s['n_half_short'] - s['n_half']) > 0.5:
        nh += ' (%s)' % ('%.0f' % s['n_half_short'] if s['n_half_short'] < 1e6 else '>1e6')
    by = ' '.join('%s %.3g' % (n, v['acq_per_1k']) for n, v in
                  sorted(s['locks'].items(), key=lambda kv: -kv[1]['acq_per_1k']) if v['acq_per_1k'])
    warm = '-' if s['warm_per_mib'] is None else '%.2f' % s['warm_per_mib']
    steady = '-' if s['steady_per_1k'] is None else '%.3f' % s['steady_per_1k']
    hmax = '-' if s['hold_max_ns'] is None else '%.0f %s, %d' % (
        s['hold_max_ns'] / 1000.0, s['hold_max_lock'], s['long_holds'])
    return ['%.2f' % s['acq_per_1k'], warm, steady, '%.1f' % s['contended_pct'], hold, hmax, nh,
            '%d' % s['grow'], '%.0f' % s['rss_mib'], by or '-']


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--build', default='build')
    ap.add_argument('-a', '--after', default=None, help='library (default BUILD/preload/libpcpmalloc.so)')
    ap.add_argument('-b', '--before', default=None, help='a second library, shown first')
    ap.add_argument('-c', '--cpus', default='2 16 64 224')
    ap.add_argument('-w', '--workloads', default=' '.join(WORKLOADS))
    ap.add_argument('-t', '--threads', type=int, default=32,
                    help='threads (pairs: half) at most, never more than the CPUs')
    ap.add_argument('-r', '--runs', type=int, default=3, help='runs per cell (medians)')
    ap.add_argument('--steady', type=float, default=2.0,
                    help='one more run of this many times the operations per cell, for the '
                    'steady state and the warm-up (0: none)')
    ap.add_argument('-s', '--scale', type=float, default=1.0, help='multiply the operations')
    ap.add_argument('--json', help='write every figure here')
    ap.add_argument('--env', action='append', default=[], help='NAME=VALUE for every run')
    o = ap.parse_args()
    after = o.after or os.path.join(o.build, 'preload', 'libpcpmalloc.so')
    libs = ([('before', os.path.abspath(o.before))] if o.before else []) + [
        ('after' if o.before else 'pcpmalloc', os.path.abspath(after))]
    for _, lib in libs:
        if not os.path.exists(lib):
            sys.exit('scale.py: no library ' + lib)
    cpus = [int(c) for c in o.cpus.split()]
    for c in cpus:
        if c not in MACHINES:
            sys.exit('scale.py: no machine of %d CPUs (have %s)' % (c, sorted(MACHINES)))
    wls = o.workloads.split()
    for w in wls:
        if w not in WORKLOADS:
            sys.exit('scale.py: unknown workload %s (have %s)' % (w, ' '.join(WORKLOADS)))
    if o.scale != 1.0:
        for w in wls:
            b, a, total, k, t, n = WORKLOADS[w]
            WORKLOADS[w] = (b, a, max(1, int(total * o.scale)), k, t, n)
    extra = dict(e.split('=', 1) for e in o.env)
    results, longs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for w in wls:
            for c in cpus:
                for r in range(o.runs):  # interleave the libraries run by run
                    for name, lib in libs:
                        results.setdefault((w, c, name), []).append(
                            run_one(o.build, lib, w, c, o.threads, tmp, extra))
                if o.steady > 1:
                    b, a, total, k, t, n = WORKLOADS[w]
                    WORKLOADS[w] = (b, a, int(total * o.steady), k, t, n)
                    for name, lib in libs:
                        longs[(w, c, name)] = [run_one(o.build, lib, w, c, o.threads, tmp, extra)]
                    WORKLOADS[w] = (b, a, total, k, t, n)
                print('.', end='', file=sys.stderr, flush=True)
    print(file=sys.stderr)
    summary = {}
    for (w, c, name), runs in results.items():
        summary[(w, c, name)] = summarise(runs, long_runs=longs.get((w, c, name)))
    if o.before:  # hold times the before library does not report: the after library's
        for (w, c, name), runs in results.items():
            if name == 'before':
                borrow = {n: v['hold_ns'] for n, v in summary[(w, c, 'after')]['locks'].items()}
                summary[(w, c, name)] = summarise(runs, borrow, longs.get((w, c, name)))
    cols = ['acq/1k', 'warm/MiB', 'steady/1k', 'cont%', 'hold', 'max us, lock, long', 'N_half',
            'grow', 'MiB', 'by lock']
    head = ['workload', 'CPUs', 'thr']
    for name, _ in libs:
        head += [c + (' ' + name if len(libs) > 1 else '') for c in cols]
    print('| ' + ' | '.join(head) + ' |')
    print('|' + '---|' * len(head))
    for w in wls:
        for c in cpus:
            r0 = results[(w, c, libs[0][0])][0]
            row = [w, str(c), ('%d pairs' if r0['kind'] == 'pairs' else '%d') % r0['count']]
            for name, _ in libs:
                row += fmt_cell(summary[(w, c, name)])
            print('| ' + ' | '.join(row) + ' |')
    print()
    print('acq/1k: process-wide lock acquisitions per 1000 malloc+free calls; warm/MiB: warm-up '
          'acquisitions per MiB of heap; steady/1k: acquisitions per 1000 calls after warm-up '
          '(from a run of %g times the operations); cont%%: contended share; hold: mean hold (ns) '
          'of the busiest lock (in brackets: of its holds under 2^18 cycles); max: longest hold of any lock (us), its lock, holds over 2^18 '
          'cycles; N_half = t_call / (2 a h): real CPUs at which the busiest lock would be held '
          'half of the time (in brackets: from the holds under 2^18 cycles; "~": hold time borrowed from the other library; "-": no hold time '
          'reported); grow: zone growths; MiB: peak RSS.  Medians of %d runs.' % (o.steady, o.runs))
    if o.json:
        with open(o.json, 'w') as f:
            json.dump([dict(workload=w, cpus=c, library=name, **s)
                       for (w, c, name), s in summary.items()], f, indent=1)


if __name__ == '__main__':
    main()
