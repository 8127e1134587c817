#!/usr/bin/env python3
"""check_layers.py - the layering of pcpmalloc's library, read from the code itself.

Usage: check_layers.py SOURCE_ROOT BUILD_DIR [--graph]

Two readings, both against LAYERS below (top to bottom; a file may use only files below it):
  1. symbols: `nm` of every object of libpcpmalloc.so gives the functions and variables each
     source file defines and the ones it uses; a use of a symbol defined in a file above the
     user (or in a circle) is a violation;
  2. includes: the `#include "..."` lines; a source file or header may include only headers
     owned by itself, by a file below it, or leaf headers (types and inline helpers that call
     nothing above their includer), and the header graph has no circle.
Exit 0 with one summary line when both hold, else 1 with one line per violation.
--graph prints the file-to-file use graph (who calls whom) instead.
"""
import os
import re
import subprocess
import sys

# Top to bottom.  Files on one line form a level: they may not use each other either.
LAYERS = [
    ['preload/preload.c', 'preload/cxx.c', 'preload/signal.c'],  # the exported API
    ['core/live.c'],            # the live page: publishes the statistics report
    ['core/stat.c'],            # the statistics report: pulls every layer's counters
    ['core/fork.c'],            # pthread_atfork: every layer's locks
    ['core/api.c'],             # the one choice of mode per call
    ['core/secure_mode.c'],     # front end: secure mode (API entries, small blocks)
    ['core/secure_large.c'],    # secure mode's page runs, huge mappings, zero-size blocks
    ['core/secure_runs.c'],     # secure mode's guarded runs: quarantine, clean cache per order
    ['core/junk_mode.c'],       # front end: junk mode
    ['core/vgmode.c'],          # front end: memcheck mode
    ['core/prof_mode.c'],       # front end: the heap profiler's sampling
    ['core/realloc.c', 'core/alloc-aligned.c', 'core/trim.c'],  # the default functions
    ['core/alloc.c'],
    ['core/free.c'],
    ['core/init.c'],            # start-up: every layer's init
    ['core/vmstat.c'],          # the periodic work: calls down into pcp, zone, huge, topology
    ['core/huge_quarantine.c'],
    ['core/large.c'],
    ['core/tcache.c'],
    ['core/sheaf.c'],           # the slab layer's per-CPU level (CPU sheaves, objects go home)
    ['core/barn.c'],            # the node barns of full and empty sheaves
    ['core/slab.c'],
    ['core/slab_order.c'],      # size classes and slab orders
    ['core/pcp.c'],
    ['core/zone.c'],
    ['core/zone_grow.c'],       # the zone's growth outside its lock (arena commit, first touch)
    ['core/huge.c'],
    ['topology/topology.c'],
    ['topology/machine.c'],     # this machine for lazy discovery: sysfs, else CPUID, else none
    ['topology/hwtopo.c', 'topology/sysfs.c', 'topology/cpuid.c'],  # hwloc walk; sysfs; CPUID
    ['topology/cpuinfo.c', 'topology/sizing.c'],  # cache slices; the kernel's pcp formulas
    ['core/arena.c'],
    ['core/early.c'],
    ['core/prof_dump.c'],       # the heap profiler's dumps and leak report
    ['core/prof.c'],            # its lock-free records and the stack walk
    ['core/secure.c', 'core/vg.c'],  # the checks of secure mode; memcheck's probe
    ['core/config.c'],
    ['core/os.c'],
]

# Headers whose name is not their .c's, and leaf headers (None): types, constants and
# inline helpers; what their inline code calls is checked through the symbols.
HEADER_OWNER = {
    'preload/pcpmalloc.h': 'preload/preload.c',
}

# Objects that are tools, not the library.
NOT_LIBRARY = {'core/tunables_main.c', 'topology/pcpmalloc-topology.c'}


def rank_table():
    rank = {}
    for i, level in enumerate(LAYERS):
        for f in level:
            rank[f] = i
    return rank


def owner_of(header, root):
    if header in HEADER_OWNER:
        return HEADER_OWNER[header]
    c = header[:-2] + '.c'
    return c if os.path.exists(os.path.join(root, c)) else None


def objects(build):
    """(source file, object path) of libpcpmalloc.so's objects, from meson's compile database."""
    import json
    db = json.load(open(os.path.join(build, 'compile_commands.json')))
    out = []
    for e in db:
        obj = e.get('output')
        src = os.path.normpath(os.path.join(e['directory'], e['file']))
        if not obj or not ('libpcpcore.a.p' in obj or 'libpcpmalloc.so.p' in obj):
            continue
        out.append((src, os.path.join(e['directory'], obj)))
    return out


def nm(path, flags):
    r = subprocess.run(['nm', '-P'] + flags + [path], capture_output=True, text=True, check=True)
    syms = set()
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            syms.add(parts[0])
    return syms


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    graph_only = '--graph' in sys.argv[3:]
    rank = rank_table()
    bad = []

    # 1. symbols
    defined, used = {}, {}
    for src, obj in objects(build):
        rel = os.path.relpath(src, root)
        if rel in NOT_LIBRARY:
            continue
        if rel not in rank:
            bad.append(f'{rel}: not in the layer table of test/unit/check_layers.py')
            continue
        for s in nm(obj, ['--defined-only', '-g']):
            defined[s] = rel
        used.setdefault(rel, set()).update(nm(obj, ['-u']))
    edges = {}
    for f, syms in sorted(used.items()):
        for s in sorted(syms):
            g = defined.get(s)
            if g and g != f:
                edges.setdefault(f, {}).setdefault(g, []).append(s)
    if graph_only:
        for f in sorted(edges, key=lambda x: rank[x]):
            print(f'{f} -> ' + ', '.join(f'{g} ({len(v)})' for g, v in sorted(edges[f].items())))
        return 0
    for f, targets in sorted(edges.items()):
        for g, syms in sorted(targets.items()):
            if rank[g] <= rank[f]:
                how = 'up to' if rank[g] < rank[f] else 'across to'
                bad.append(f'{f} calls {how} {g}: {", ".join(syms[:4])}'
                           + (' ...' if len(syms) > 4 else ''))

    # 2. includes
    inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    files = []
    for d in ('core', 'preload', 'topology'):
        for name in sorted(os.listdir(os.path.join(root, d))):
            if name.endswith(('.c', '.h')):
                files.append(f'{d}/{name}')
    by_name = {os.path.basename(f): f for f in files if f.endswith('.h')}
    includes = {}
    for f in files:
        text = open(os.path.join(root, f)).read()
        includes[f] = [by_name[h] for h in inc_re.findall(text) if h in by_name]
    for f, hs in includes.items():
        me = f if f.endswith('.c') else owner_of(f, root)
        if f in NOT_LIBRARY or me is None or me not in rank:
            continue
        for h in hs:
            o = owner_of(h, root)
            if o is None or o == me or o in NOT_LIBRARY:
                continue
            if o in rank and rank[o] <= rank[me]:
                bad.append(f'{f} includes {h}, whose file {o} is not below {me}')
    # circles among headers
    state = {}

    def visit(h, path):
        state[h] = 1
        for n in includes.get(h, []):
            if state.get(n) == 1:
                bad.append('include circle: ' + ' -> '.join(path + [h, n]))
            elif not state.get(n):
                visit(n, path + [h])
        state[h] = 2
    for h in sorted(x for x in files if x.endswith('.h')):
        if not state.get(h):
            visit(h, [])

    for b in bad:
        print(b)
    nuse = sum(len(t) for t in edges.values())
    print(f'check_layers: {len(rank)} files in {len(LAYERS)} levels, {nuse} file-to-file uses, '
          f'{len(bad)} violation(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
