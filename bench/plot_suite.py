#!/usr/bin/python3
"""plot_suite.py SUITE.json OUT.(svg|png) - bench/README.md's suite plot from the A/B harness output.

SUITE.json is what `pcpmalloc-ab --suite --json FILE` writes (bench/targets.sh leaves it as
OUTDIR/suite.json).  Two panels, one group of bars per workload plus the geometric mean:
median wall time and median peak RSS, each as a ratio to glibc (lower is better).
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import json
import math
import sys

try:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit('plot_suite.py: matplotlib is not installed (Debian: apt-get install python3-matplotlib)')

ORDER = ['glibc', 'jemalloc', 'mimalloc', 'tcmalloc', 'pcpmalloc']
COLORS = {'glibc': '#888888', 'jemalloc': '#1f77b4', 'mimalloc': '#ff7f0e', 'tcmalloc': '#2ca02c',
          'pcpmalloc': '#d62728'}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    j = json.load(open(sys.argv[1]))
    summ = j['summary']
    workloads = list(summ)
    allocs = [a for a in ORDER if all(a in summ[w]['wall']['by_alloc'] for w in workloads)]
    fig, axes = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True)
    for ax, metric, what in ((axes[0], 'wall', 'time'), (axes[1], 'rss', 'peak RSS')):
        ratios = {a: [] for a in allocs}
        for w in workloads:
            g = summ[w][metric]['by_alloc']['glibc']['median']
            for a in allocs:
                ratios[a].append(summ[w][metric]['by_alloc'][a]['median'] / g)
        for a in allocs:
            ratios[a].append(math.exp(sum(map(math.log, ratios[a])) / len(ratios[a])))
        n = len(allocs)
        width = 0.8 / n
        for i, a in enumerate(allocs):
            xs = [k + (i - (n - 1) / 2) * width for k in range(len(workloads) + 1)]
            ax.bar(xs, ratios[a], width, label=a, color=COLORS.get(a))
        ax.axhline(1.0, color='black', linewidth=0.8)
        ax.set_ylabel(f'{what} / glibc')
        ax.set_ylim(0, min(max(max(v) for v in ratios.values()) * 1.05, 3.0))
        ax.grid(axis='y', alpha=0.3)
    axes[1].set_xticks(range(len(workloads) + 1))
    axes[1].set_xticklabels(workloads + ['geomean'], rotation=30, ha='right')
    axes[0].legend(ncol=len(allocs), loc='upper left', fontsize=9)
    axes[0].set_title(f'pcpmalloc-ab --suite: median of {j["runs_per_allocator"]} runs as ratios '
                      f'to glibc (lower is better); {j.get("machine", "")}', fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], metadata={'Date': None} if sys.argv[2].endswith('.svg') else None)
    print(f'plot_suite.py: wrote {sys.argv[2]}')


if __name__ == '__main__':
    main()
