#!/usr/bin/python3
"""test_patterns.py BUILD/bench/pcpmalloc-ab - the seven workloads of issue 17 (and the 8-32
KiB producer/consumer at 4 pairs) as the suite runs them: one --quick run each under glibc
and pcpmalloc through the A/B harness, with --check (the same result line under both).  Each
run must exit 0 and print its deterministic line 'NAME: ops=N checksum=HEX' with N > 0 and a
'# ... ops_per_s=X' line with X > 0.  A few seconds on 2 CPUs."""
import json
import os
import re
import subprocess
import sys
import tempfile

PATTERNS = ['larson-sized', 'xmalloc', 'rpmalloc', 'ruby', 'glibc-thread', 'cache-scratch',
            'glibc-simple']
ab = sys.argv[1]
bad = []


def run(args, js):
    p = subprocess.run([ab, '--quick', '-n', '1', '-w', '0', '-q', '--check', '-a', 'glibc',
                        '-a', 'pcpmalloc', '--json', js] + args, capture_output=True, text=True)
    if p.returncode != 0:
        bad.append(f'{" ".join(args)}: exit {p.returncode}: {p.stderr.strip()[-400:]}')
        return {}
    return json.load(open(js))['results']


def check(res, name, title):
    for alloc in ('glibc', 'pcpmalloc'):
        runs = res.get(title, {}).get(alloc, [])
        if len(runs) != 1 or runs[0]['exit'] != 0:
            bad.append(f'{name} under {alloc}: no successful run ({runs!r:.300})')
            continue
        out = runs[0]['stdout']
        m = re.search(r'^([a-z-]+): ops=(\d+) checksum=([0-9a-f]{16})$', out, re.M)
        if not m or m.group(1) != name or int(m.group(2)) <= 0:
            bad.append(f'{name} under {alloc}: no result line in {out!r}')
        if runs[0].get('metrics', {}).get('ops_per_s', 0) <= 0:
            bad.append(f'{name} under {alloc}: no ops_per_s metric in {out!r}')


with tempfile.TemporaryDirectory() as d:
    res = run(['--suite', '--only', ','.join(PATTERNS)], os.path.join(d, 's.json'))
    for w in PATTERNS:
        check(res, w, w)
    # the 8-32 KiB producer/consumer of issue 17 at 4 pairs (1 pair is the suite's own run)
    res = run(['--workload', 'xthread-large', '-t', '4'], os.path.join(d, 'x.json'))
    check(res, 'xthread-large', 'xthread-large')
for b in bad:
    print('test_patterns:', b)
print('test_patterns:', 'FAILED' if bad else f'{len(PATTERNS) + 1} workloads ran and printed '
      'their lines')
sys.exit(1 if bad else 0)
