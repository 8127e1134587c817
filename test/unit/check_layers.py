#!/usr/bin/env python3
"""check_layers.py - the layering of pcpmalloc's library, read from the code itself.

Usage: check_layers.py SOURCE_ROOT BUILD_DIR [--graph]

Three readings, all against LAYERS below (top to bottom; a file may use only files below it):
  1. symbols: `nm` of every object of libpcpmalloc.so gives the functions and variables each
     source file defines and the ones it uses; a use of a symbol defined in a file above the
     user (or in a circle) is a violation;
  2. headers: a header belongs to the .c of its name in its folder (zone.h to zone.c); an
     installed header (meson's install_headers: pcpmalloc.h, what users include) to the top
     level; a header named after no .c is a leaf (types, constants, inline helpers: free_fast.h,
     lockstat.h, stat_counters.h, sysread.h).  Every library symbol a header declares must be
     defined by the file it belongs to (by a top-level file for an installed one), and a leaf
     declares none: a declaration in the wrong header is a violation;
  3. includes: the `#include "..."` lines; a source file or header may include only headers of
     itself, of a file below it, or leaves, whose own includes count as their includer's (what
     a leaf's inline code calls is checked through the symbols); the header graph has no circle.
Exit 0 with one summary line when all three hold, else 1 with one line per violation.
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
    ['core/tcache_signal.c'],   # the thread cache parked while a signal handler runs
    ['core/tcache.c'],
    ['core/sheaf.c'],           # the slab layer's per-CPU level (CPU sheaves, objects go home)
    ['core/depot.c'],           # the node depots of free-object chains (lock-free)
    ['core/barn.c'],            # the node barns of full and empty sheaves
    ['core/slab_cpu.c'],        # a CPU's frozen slabs (SLUB's CPU slab)
    ['core/slab.c'],
    ['core/slab_order.c'],      # size classes and slab orders
    ['core/pcp.c'],
    ['core/zone_purge.c'],      # the zone's purge and dirty watermark (madvise, lock dropped)
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
    ['core/clock.c'],          # the clocks: vDSO clock_gettime, the TSC's rate
]

# Objects that are tools, not the library.
NOT_LIBRARY = {'core/tunables_main.c', 'topology/pcpmalloc-topology.c'}


def rank_table():
    rank = {}
    for i, level in enumerate(LAYERS):
        for f in level:
            rank[f] = i
    return rank


def installed_headers(build):
    """The headers meson installs (the public interface), relative to the source root."""
    import json
    inst = json.load(open(os.path.join(build, 'meson-info', 'intro-installed.json')))
    return {os.path.normpath(src) for src in inst if src.endswith('.h')}


def owner_of(header, root, public):
    """The files a header belongs to: [its .c], the top level's files for an installed
    header, or [] for a leaf."""
    if os.path.join(root, header) in public:
        return list(LAYERS[0])
    c = header[:-2] + '.c'
    return [c] if os.path.exists(os.path.join(root, c)) else []


def strip_c(text):
    """C text with comments, preprocessor lines, __attribute__((...)) and every brace body
    (inline functions, structs, initialisers) taken out: what is left is the top level's
    declarations, one per ';'."""
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    text = re.sub(r'^\s*#(?:[^\n]*\\\n)*[^\n]*', ' ', text, flags=re.M)
    text = re.sub(r'extern\s*"C"\s*\{', ' ', text)
    out, i = [], 0
    while True:
        j = text.find('__attribute__', i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        k, depth = text.find('(', j), 0
        while 0 <= k < len(text):
            depth += {'(': 1, ')': -1}.get(text[k], 0)
            if depth == 0:
                break
            k += 1
        i = k + 1
    text, out, depth = ''.join(out), [], 0
    for ch in text:
        if ch == '{':
            depth += 1
            if depth == 1:
                out.append(';')
        elif ch == '}':
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return ''.join(out)


def declared_names(text):
    """Names a header declares at its top level: functions (the name before the first '('),
    arrays and variables (before '[', else the last lower-case identifier: upper-case ones
    are macros such as PCPM_HIDDEN).  static, typedef and tag-only declarations declare no
    symbol."""
    names = set()
    for st in strip_c(text).split(';'):
        st = ' '.join(st.split())
        if not st or re.match(r'(static|typedef)\b|(struct|union|enum)\s+\w+$|enum\b', st):
            continue
        m = re.match(r'[^(\[]*?\b([A-Za-z_]\w*)\s*[(\[]', st)
        if m:
            names.add(m.group(1))
            continue
        ids = [w for w in re.findall(r'[A-Za-z_]\w*', st) if not re.fullmatch(r'[A-Z0-9_]+', w)]
        if ids:
            names.add(ids[-1])
    return names


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

    # 2. headers: what each declares is defined by the file it belongs to
    public = installed_headers(build)
    inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    files = []
    for d in ('core', 'preload', 'topology'):
        for name in sorted(os.listdir(os.path.join(root, d))):
            if name.endswith(('.c', '.h')):
                files.append(f'{d}/{name}')
    by_name = {os.path.basename(f): f for f in files if f.endswith('.h')}
    owner = {h: owner_of(h, root, public) for h in by_name.values()}
    for h in sorted(by_name.values()):
        for s in sorted(declared_names(open(os.path.join(root, h)).read())):
            d = defined.get(s)
            if d and d not in owner[h]:
                whose = ('a leaf (no .c of its name)' if not owner[h] else
                         'the top level\'s' if len(owner[h]) > 1 else owner[h][0] + "'s")
                bad.append(f'{h} declares {s}, defined in {d}: {h} is {whose}')

    # 3. includes
    includes = {}
    for f in files:
        text = open(os.path.join(root, f)).read()
        includes[f] = [by_name[h] for h in inc_re.findall(text) if h in by_name]
    def reached(f):
        """(header, via) for every header f includes, through leaves (their includes are f's)."""
        seen, todo = set(), [(h, '') for h in includes[f]]
        while todo:
            h, via = todo.pop()
            if h in seen:
                continue
            seen.add(h)
            yield h, via
            if not owner[h]:
                todo += [(n, f'{via} via {h}') for n in includes[h]]

    for f in files:
        mine = [f] if f.endswith('.c') else owner[f]
        if f in NOT_LIBRARY or not mine or any(m not in rank for m in mine):
            continue
        me = max(mine, key=lambda m: rank[m])
        for h, via in reached(f):
            o = owner[h]
            if not o or set(o) & set(mine) or any(x in NOT_LIBRARY for x in o):
                continue
            top = min(o, key=lambda x: rank.get(x, len(LAYERS)))
            if top in rank and rank[top] <= rank[me]:
                bad.append(f'{f} includes {h}{via}, whose file {top} is not below {me}')
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
