#!/usr/bin/python3
# pcpmalloc - the command for people: run a program under libpcpmalloc.so (an absolute
# LD_PRELOAD path that child processes keep), print or compare the statistics files that
# PCPMALLOC_STATS=json writes, and watch a running process's pcps live.
#
#   pcpmalloc run [--stats[=json]] [--secure] [-e VAR=value ...] -- CMD [ARG...]
#   pcpmalloc stats FILE.json [B.json]
#   pcpmalloc top PID [--once] [--json] [-d SECONDS]
#   pcpmalloc prof [--alloc|--inuse] [--rate B] [--top N] [--out DIR] -- CMD [ARG...]
#   pcpmalloc prof [--alloc] [--svg OUT.svg | --html OUT.html] DUMP   (google-pprof)
#   pcpmalloc prof --diff A.heap B.heap
#
# meson fills in the @...@ paths (preload/meson.build): build/preload/pcpmalloc uses the
# library beside it in the build tree; installed, it finds the installed library from its own
# location (bindir -> libdir), so an install under DESTDIR or a moved prefix works.
# Outside the allocator: plain Python 3, no package beyond the standard library.
import argparse
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import time

PROG = 'pcpmalloc'
VERSION = '@VERSION@'
SONAME = '@SONAME@'
BINDIR = '@BINDIR@'
LIBDIR = '@LIBDIR@'
PKGLIBEXECDIR = '@PKGLIBEXECDIR@'
HERE = os.path.dirname(os.path.realpath(__file__))
# in a build tree (a meson-private folder beside preload/): the library beside this script
IN_BUILD_TREE = os.path.isdir(os.path.join(HERE, '..', 'meson-private')) or LIBDIR.startswith('@')


def default_lib():
    """The library this copy of the command belongs to (absolute path)."""
    if IN_BUILD_TREE:
        return os.path.join(HERE, 'libpcpmalloc.so')
    return os.path.normpath(os.path.join(HERE, os.path.relpath(LIBDIR, BINDIR), SONAME))


def die(msg, code=2):
    print(f'{PROG}: {msg}', file=sys.stderr)
    sys.exit(code)


def warn(msg):
    print(f'{PROG}: warning: {msg}', file=sys.stderr)


# --- run ---------------------------------------------------------------------------------------

ELF_MAGIC = b'\x7fELF'
PT_INTERP = 3


def elf_interp(path):
    """(is_elf, interpreter or None) of an executable: None for a static ELF."""
    try:
        with open(path, 'rb') as f:
            h = f.read(64)
            if len(h) < 64 or h[:4] != ELF_MAGIC:
                return False, None
            if h[4] != 2 or h[5] != 1:   # 64-bit little-endian only (x86-64, aarch64)
                return True, '?'
            phoff, = struct.unpack_from('<Q', h, 32)
            phentsize, phnum = struct.unpack_from('<HH', h, 54)
            f.seek(phoff)
            ph = f.read(phentsize * phnum)
            for i in range(phnum):
                p_type, = struct.unpack_from('<I', ph, i * phentsize)
                if p_type == PT_INTERP:
                    off, = struct.unpack_from('<Q', ph, i * phentsize + 8)
                    size, = struct.unpack_from('<Q', ph, i * phentsize + 32)
                    f.seek(off)
                    return True, f.read(size).rstrip(b'\0').decode(errors='replace')
            return True, None
    except OSError:
        return False, None


def resolve(cmd, path_env):
    """Absolute path of the program exec would run for cmd, or None."""
    if '/' in cmd:
        return os.path.abspath(cmd) if os.path.isfile(cmd) else None
    return shutil.which(cmd, path=path_env)


def will_not_load(argv0, lib, env):
    """Why the dynamic loader will not load lib into the program argv0 names, or None.

    Follows '#!' interpreters (the program that really starts) and asks that program's own
    dynamic loader, as ldd does (--list: it maps the libraries and runs none of their code),
    whether the LD_PRELOAD entry loads: the file, its format and its architecture are checked
    by the loader itself."""
    path = resolve(argv0, env.get('PATH', os.defpath))
    if path is None:
        return None   # exec reports it
    for _ in range(4):
        try:
            with open(path, 'rb') as f:
                head = f.read(256)
        except OSError:
            return None
        if not head.startswith(b'#!'):
            break
        words = head[2:].split(b'\n', 1)[0].split()
        if not words:
            return None
        interp = words[0].decode(errors='replace')
        if os.path.basename(interp) == 'env' and len(words) > 1:
            nxt = resolve(words[1].decode(errors='replace'), env.get('PATH', os.defpath))
            if nxt is None:
                return None
            interp = nxt
        path = interp
    is_elf, ld = elf_interp(path)
    if not is_elf:
        return None   # not a program the kernel runs: exec says so
    if ld is None:
        return f'{path} is statically linked (no dynamic loader reads LD_PRELOAD)'
    st = os.stat(path)
    if (st.st_mode & stat.S_ISUID and st.st_uid != os.getuid()) or \
            (st.st_mode & stat.S_ISGID and st.st_gid != os.getgid()):
        return (f'{path} is set-user-ID or set-group-ID: the loader ignores an LD_PRELOAD '
                f'path outside the system library directories')
    if ld == '?' or not os.access(ld, os.X_OK):
        return None   # another architecture or loader: let the program run as it is
    e = dict(env)
    e['LD_TRACE_LOADED_OBJECTS'] = '1'
    try:
        r = subprocess.run([ld, path], env=e, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    real = os.path.realpath(lib)
    for line in r.stdout.decode(errors='replace').splitlines():
        parts = line.split()
        # '\tlibfoo.so => /path (0x...)' or '\t/path/lib.so (0x...)'
        for p in parts:
            if p.startswith('/') and os.path.realpath(p) == real:
                return None
    why = r.stderr.decode(errors='replace').strip().splitlines()
    return why[0] if why else f'{ld} does not list {lib} among the libraries of {path}'


def cmd_run(o):
    lib = os.path.abspath(o.lib) if o.lib else default_lib()
    if not os.path.isfile(lib):
        die(f'{lib} not found (build it with meson compile, or give --lib)')
    if not o.command:
        die('run: no command (pcpmalloc run [OPTIONS] -- CMD [ARG...])')
    env = dict(os.environ)
    # absolute path first, other preloads kept, any other pcpmalloc copy dropped; child
    # processes inherit the environment and so the library
    others = [p for p in env.get('LD_PRELOAD', '').replace(' ', ':').split(':')
              if p and not os.path.basename(p).startswith('libpcpmalloc.so')]
    env['LD_PRELOAD'] = ':'.join([lib] + others)
    if o.stats:
        env['PCPMALLOC_STATS'] = o.stats
    if o.secure:
        env['PCPMALLOC_SECURE'] = '1'
    for kv in o.env:
        k, eq, v = kv.partition('=')
        if not eq or not k:
            die(f'-e {kv!r}: want VAR=value')
        if not k.startswith('PCPMALLOC_'):
            warn(f'-e {k}: not a PCPMALLOC_* variable (set anyway)')
        env[k] = v
    if not o.no_check:
        why = will_not_load(o.command[0], lib, env)
        if why:
            warn(f'{o.command[0]} will run WITHOUT pcpmalloc: {why}')
    try:
        os.execvpe(o.command[0], o.command, env)
    except OSError as e:
        die(f'{o.command[0]}: {e.strerror}', 127 if isinstance(e, FileNotFoundError) else 126)


# --- prof --------------------------------------------------------------------------------------

def find_libgcc_s():
    """libgcc_s.so.1 of this system: preloaded under `prof`, so that the profiler walks stacks
    with its unwinder (a program built without frame pointers gives whole stacks)."""
    for d in ('/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu', '/lib/aarch64-linux-gnu',
              '/usr/lib/aarch64-linux-gnu', '/lib64', '/usr/lib64', '/lib', '/usr/lib'):
        p = os.path.join(d, 'libgcc_s.so.1')
        if os.path.exists(p):
            return p
    return None


def pprof_tool():
    for name in ('google-pprof', 'pprof-perl', 'jeprof'):
        p = shutil.which(name)
        if p:
            return p
    die('google-pprof not found: install it (Debian/Ubuntu: apt-get install google-perftools)')


def dump_program(dump):
    """The program a dump was taken in: the first file mapping in its MAPPED_LIBRARIES (the
    executable is mapped lowest), or None."""
    try:
        with open(dump, errors='replace') as f:
            maps = False
            for line in f:
                if line.startswith('MAPPED_LIBRARIES:'):
                    maps = True
                    continue
                parts = line.split()
                if maps and len(parts) >= 6 and parts[5].startswith('/'):
                    return parts[5]
    except OSError as e:
        die(f'{dump}: {e.strerror}')
    return None


def run_pprof(args, dump, program, capture=True):
    prog = program or dump_program(dump)
    if not prog or not os.path.exists(prog):
        die(f'{dump}: cannot tell which program it profiles (give --program)')
    cmd = [pprof_tool()] + args + [prog, dump]
    r = subprocess.run(cmd, capture_output=capture, text=True)
    if r.returncode:
        err = (r.stderr or '').strip().splitlines()
        die(f'google-pprof failed on {dump}: {err[-1] if err else r.returncode}')
    return r.stdout


def dump_inuse_bytes(dump):
    """The in-use bytes of a dump's header line (0 when unreadable)."""
    try:
        with open(dump, errors='replace') as f:
            head = f.readline().split()
        return int(head[3]) if head[:2] == ['heap', 'profile:'] else 0
    except (OSError, ValueError, IndexError):
        return 0


def pprof_text(o, dump, extra=()):
    """google-pprof --text, without its 'Using local file' lines, limited to --top lines."""
    args = ['--text'] + (['--alloc_space'] if o.alloc else ['--inuse_space']) + list(extra)
    out = [l for l in run_pprof(args, dump, o.program).splitlines()
           if not l.startswith('Using local file')]
    head = [l for l in out if l.startswith('Total')]
    rows = [l for l in out if not l.startswith('Total')]
    if not head:   # pprof prints nothing for an empty view
        return ('Total: 0.0 MB (no difference)' if extra else
                'Total: 0.0 MB (nothing ' + ('allocated' if o.alloc else 'in use') + ')')
    if not extra:  # which view: a dump with nothing in use shows what was allocated
        head = [h + (' allocated over the run' if o.alloc else ' in use') for h in head]
    return '\n'.join(head + rows[:o.top])


def cmd_prof(o):
    if o.alloc is None:   # a run: what it allocated; a dump: what was in use, if anything
        dumps = o.diff or [a for a in o.args if os.path.isfile(a) and a.endswith('.heap')]
        o.alloc = not dumps or not all(dump_inuse_bytes(d) for d in dumps)
    if o.diff:
        a, b = o.diff
        print(pprof_text(o, b, ['--base=' + a]))
        return 0
    if o.svg or o.html:
        if len(o.args) != 1:
            die('prof --svg/--html: one DUMP (pcpmalloc prof --svg OUT.svg DUMP)')
        dump = o.args[0]
        svg = run_pprof(['--svg'] + (['--alloc_space'] if o.alloc else []), dump, o.program)
        if o.svg:
            with open(o.svg, 'w') as f:
                f.write(svg)
            print(f'{PROG}: call graph of {dump} written to {o.svg}')
        if o.html:
            import html
            text = pprof_text(o, dump)
            with open(o.html, 'w') as f:
                f.write('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>'
                        f'{html.escape(dump)}</title></head><body>\n<h1>Heap profile: '
                        f'{html.escape(dump)}</h1>\n<pre>{html.escape(text)}</pre>\n'
                        f'{svg[svg.find("<svg"):]}\n</body></html>\n')
            print(f'{PROG}: report of {dump} written to {o.html}')
        return 0
    cmd = o.args[1:] if o.args[:1] == ['--'] else o.args
    if len(cmd) == 1 and not o.dash and os.path.isfile(cmd[0]) and \
            open(cmd[0], 'rb').read(14) == b'heap profile: ':
        print(pprof_text(o, cmd[0]))   # pcpmalloc prof DUMP: its top sites
        return 0
    if not cmd:
        die('prof: no command (pcpmalloc prof -- CMD [ARG...]) and no dump')
    lib = os.path.abspath(o.lib) if o.lib else default_lib()
    if not os.path.isfile(lib):
        die(f'{lib} not found (build it with meson compile, or give --lib)')
    out = os.path.abspath(o.out) if o.out else __import__('tempfile').mkdtemp(prefix='pcpmalloc-prof.')
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ)
    others = [p for p in env.get('LD_PRELOAD', '').replace(' ', ':').split(':')
              if p and not os.path.basename(p).startswith('libpcpmalloc.so')]
    gcc_s = find_libgcc_s()
    env['LD_PRELOAD'] = ':'.join([lib] + ([gcc_s] if gcc_s else []) + others)
    env['PCPMALLOC_PROF'] = '1'
    env['PCPMALLOC_PROF_FINAL'] = '1'
    env['PCPMALLOC_PROF_PREFIX'] = os.path.join(out, 'prof')
    if o.rate:
        env['PCPMALLOC_PROF_SAMPLE'] = str(o.rate)
    try:
        p = subprocess.Popen(cmd, env=env)
    except OSError as e:
        die(f'{cmd[0]}: {e.strerror}', 127 if isinstance(e, FileNotFoundError) else 126)
    rc = p.wait()
    dumps = sorted(f for f in os.listdir(out) if f.endswith('.heap'))
    mine = [f for f in dumps if f.startswith(f'prof.{p.pid}.') and f.endswith('.f.heap')]
    if not mine:
        die(f'{cmd[0]} left no heap profile in {out} (did it run under pcpmalloc?)', 1)
    dump = os.path.join(out, mine[-1])
    print(f'{PROG}: heap profile of {cmd[0]} (pid {p.pid}, exit status {rc}): {dump}',
          file=sys.stderr)
    if len(dumps) > len(mine):
        print(f'{PROG}: {len(dumps) - len(mine)} more profile(s) of its child processes in {out}',
              file=sys.stderr)
    print(pprof_text(o, dump, [] if o.program else []))
    return rc if rc >= 0 else 128 - rc


# --- stats -------------------------------------------------------------------------------------

def load_stats(path):
    """The statistics object(s) in path: one JSON object, or several (one per process,
    concatenated), counters summed.  Returns (object, number of processes)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        die(f'{path}: {e.strerror}')
    dec = json.JSONDecoder()
    objs, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError as e:
            die(f'{path}: not a pcpmalloc statistics file (PCPMALLOC_STATS=json): {e}', 1)
        if not isinstance(obj, dict) or obj.get('allocator') != 'pcpmalloc':
            die(f'{path}: not a pcpmalloc statistics file (PCPMALLOC_STATS=json)', 1)
        objs.append(obj)
    if not objs:
        die(f'{path}: empty', 1)
    if len(objs) == 1:
        return objs[0], 1
    tot = dict(objs[0])
    for obj in objs[1:]:
        for k, v in obj.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != 'pid':
                tot[k] = tot.get(k, 0) + v
    tot['pid'] = None
    return tot, len(objs)


# fields of the per-CPU table, as the library writes them
CPU_COLS = ['count', 'high', 'batch', 'high_min', 'high_max', 'free_count', 'alloc_factor',
            'count_min']


def counters(obj):
    return [(k, v) for k, v in obj.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != 'pid']


def fmt(v):
    if isinstance(v, float) and v != int(v):
        return f'{v:.3f}'
    return f'{int(v)}'


def print_one(obj, nproc, path):
    who = f'pid {obj["pid"]}' if obj.get('pid') is not None else f'{nproc} processes summed'
    print(f'pcpmalloc {obj.get("version", "?")} statistics ({who}; {path})')
    for k, v in counters(obj):
        print(f'  {k:26} {fmt(v):>16}')
    if 'buddyinfo' in obj:
        print(f'  {"buddyinfo (free blocks per order)":34} ' +
              ' '.join(str(n) for n in obj['buddyinfo']))
    for z in obj.get('zones', []):
        print(f'  buddyinfo Node {z.get("node")}, zone Normal ' +
              ' '.join(str(n) for n in z.get('buddyinfo', [])) +
              f'   (managed {z.get("managed_pages")} pages, free {z.get("free_pages")}, '
              f'in pcps {z.get("pcp_pages")})')
    cpus = obj.get('cpus') or []
    if cpus and nproc == 1:
        print('  ' + f'{"cpu":>4}' + ''.join(f'{c:>13}' for c in CPU_COLS) + '  free_high_batch')
        for c in cpus:
            print('  ' + f'{c.get("cpu"):>4}' + ''.join(f'{c.get(k, ""):>13}' for k in CPU_COLS) +
                  f'  {"yes" if c.get("free_high_batch") else "no"}')


def print_compare(a, na, pa, b, nb, pb):
    print(f'pcpmalloc statistics: A = {pa} ({na} process{"es" if na > 1 else ""}), '
          f'B = {pb} ({nb} process{"es" if nb > 1 else ""})')
    print(f'  {"counter":26} {"A":>16} {"B":>16} {"B - A":>16} {"B / A":>8}')
    keys = [k for k, _ in counters(a)] + [k for k, _ in counters(b) if k not in a]
    for k in keys:
        va, vb = a.get(k), b.get(k)
        if not isinstance(va, (int, float)) or not isinstance(vb, (int, float)):
            print(f'  {k:26} {fmt(va) if va is not None else "-":>16} '
                  f'{fmt(vb) if vb is not None else "-":>16}')
            continue
        ratio = f'{vb / va:.3f}' if va else ('=' if vb == va else 'inf')
        mark = '' if va == vb else ' *'
        print(f'  {k:26} {fmt(va):>16} {fmt(vb):>16} {fmt(vb - va):>16} {ratio:>8}{mark}')
    ba, bb = a.get('buddyinfo'), b.get('buddyinfo')
    if ba and bb:
        print(f'  {"buddyinfo A":26} ' + ' '.join(str(n) for n in ba))
        print(f'  {"buddyinfo B":26} ' + ' '.join(str(n) for n in bb))
    print('  (* = the counters differ)')


def cmd_stats(o):
    if len(o.files) not in (1, 2):
        die('stats: give one statistics file, or two to compare')
    loaded = [load_stats(p) for p in o.files]
    if len(loaded) == 1:
        print_one(loaded[0][0], loaded[0][1], o.files[0])
    else:
        (a, na), (b, nb) = loaded
        print_compare(a, na, o.files[0], b, nb, o.files[1])
    return 0

# --- top ---------------------------------------------------------------------------------------

# The live page (core/live.c): a 64-byte header, then the statistics object as
# PCPMALLOC_STATS=json writes it.  The writer makes seq odd while it rewrites the object.
LIVE_DIR = '/dev/shm'
LIVE_MAGIC = b'PCPMLIVE'
LIVE_HEADER = struct.Struct('<8sIIQQQQII')   # magic version header_size seq len updated_ms
                                              # interval_ms pid reserved (then capacity u64)


def live_path(pid):
    return os.path.join(LIVE_DIR, f'pcpmalloc.{pid}')


def read_live(pid):
    """One consistent snapshot of the process's live page: (header dict, statistics object),
    or raises OSError/ValueError."""
    with open(live_path(pid), 'rb') as f:
        fd = f.fileno()
        for _ in range(200):
            h = os.pread(fd, LIVE_HEADER.size, 0)
            if len(h) < LIVE_HEADER.size:
                raise ValueError('short live page')
            magic, version, hsize, seq, n, updated, interval, ppid, _ = LIVE_HEADER.unpack(h)
            if magic != LIVE_MAGIC or version != 1:
                raise ValueError(f'not a pcpmalloc live page (magic {magic!r}, version {version})')
            if seq == 0 or seq & 1:      # not yet written, or being written
                time.sleep(0.002)
                continue
            text = os.pread(fd, n, hsize)
            seq2, = struct.unpack('<Q', os.pread(fd, 8, 16))
            if seq2 != seq or len(text) != n:
                time.sleep(0.001)
                continue
            obj = json.loads(text)
            return {'pid': ppid, 'seq': seq, 'updated_ms': updated, 'interval_ms': interval}, obj
    raise ValueError('the live page kept changing while it was read')


def start_ms(pid):
    """When process pid started, in ms of CLOCK_REALTIME (the clock of the page's updated_ms),
    to the second; None when it cannot be read."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            ticks = int(f.read().rsplit(')', 1)[1].split()[19])    # field 22, starttime
        with open('/proc/stat') as f:
            btime = next(int(ln.split()[1]) for ln in f if ln.startswith('btime '))
        return (btime + ticks / os.sysconf('SC_CLK_TCK')) * 1000
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def maps_pcpmalloc(pid):
    try:
        with open(f'/proc/{pid}/maps') as f:
            return 'libpcpmalloc' in f.read()
    except OSError:
        return None


def why_no_page(pid):
    if not alive(pid):
        return f'no process {pid}'
    m = maps_pcpmalloc(pid)
    if m is False:
        return f'process {pid} does not run under pcpmalloc (no libpcpmalloc in its maps)'
    return (f'process {pid} publishes no live page ({live_path(pid)}): start it with '
            f'PCPMALLOC_LIVE=1 (pcpmalloc run -e PCPMALLOC_LIVE=1 -- CMD)')


# per-CPU counters shown as events since the last refresh
CPU_EVENTS = ['refills', 'drains', 'free_high_drains', 'high_raises', 'high_decays']
# summed counters shown as events since the last refresh
EVENTS = ['malloc_calls', 'free_calls', 'refills', 'drains', 'free_high_drains', 'zone_lock',
          'zone_lock_contended', 'zone_lock_wait_ns', 'pcp_lock_contended', 'slab_lock',
          'slab_lock_contended', 'purge_runs', 'purged_bytes', 'zone_grow', 'zone_grow_ns',
          'zone_lock_long_holds', 'zone_grow_waits', 'huge_lock', 'huge_lock_contended']


def delta(now, before, keys):
    if before is None:
        return None
    return {k: now.get(k, 0) - before.get(k, 0) for k in keys if k in now}


def sample(pid, hdr, obj, prev):
    """The --json form of one refresh: the statistics object (the keys of the exit
    statistics), the page's header, and the events since the previous refresh."""
    out = dict(obj)
    out['live'] = dict(hdr, age_ms=max(0, int(time.time() * 1000) - hdr['updated_ms']))
    pobj = prev[1] if prev else None
    out['since_last'] = None
    if pobj is not None:
        d = delta(obj, pobj, EVENTS)
        d['seconds'] = (hdr['updated_ms'] - prev[0]['updated_ms']) / 1000.0
        pc = {c['cpu']: c for c in pobj.get('cpus', [])}
        d['cpus'] = [dict(cpu=c['cpu'], **delta(c, pc.get(c['cpu'], {}), CPU_EVENTS))
                     for c in obj.get('cpus', [])]
        out['since_last'] = d
    return out


def mib(b):
    return f'{b / 1048576:.1f} MiB'


def render(pid, s):
    """The text screen of one refresh."""
    o = []
    live = s['live']
    d = s['since_last']
    secs = d['seconds'] if d and d['seconds'] > 0 else None
    cmd = ''
    try:
        with open(f'/proc/{pid}/comm') as f:
            cmd = f.read().strip()
    except OSError:
        pass
    o.append(f'pcpmalloc {s.get("version", "?")}  pid {pid} {cmd}  '
             f'page updated {live["age_ms"] / 1000:.1f} s ago'
             + (f', {secs:.1f} s since the previous' if secs else ''))
    o.append(f'RSS {mib(s.get("resident_bytes", 0))}  mapped {mib(s.get("mapped_bytes", 0))}  '
             f'zone_used_peak {s.get("zone_used_peak", 0)} pages  topology {s.get("topology", "?")}')

    def ev(k):
        if not d:
            return '-'
        v = d.get(k, 0)
        return f'{v}' + (f' ({v / secs:.0f}/s)' if secs and k.endswith('_calls') else '')
    o.append(f'malloc {ev("malloc_calls")}  free {ev("free_calls")}  '
             f'(events since the last refresh; totals: malloc {s.get("malloc_calls", 0)}, '
             f'free {s.get("free_calls", 0)})')
    o.append(f'zone lock: {ev("zone_lock_contended")} of {ev("zone_lock")} contended, waited '
             f'{(d["zone_lock_wait_ns"] / 1e6 if d else 0):.2f} ms; pcp trylock failed '
             f'{ev("pcp_lock_contended")}; slab lock: {ev("slab_lock_contended")} of '
             f'{ev("slab_lock")} contended')
    o.append(f'zone lock holds over 100 us: {ev("zone_lock_long_holds")} (longest ever '
             f'{s.get("zone_lock_hold_max_ns", 0) / 1000:.0f} us); huge lock: '
             f'{ev("huge_lock_contended")} of {ev("huge_lock")} contended')
    o.append(f'purge: {ev("purge_runs")} runs, {mib(d["purged_bytes"]) if d else "-"} '
             f'(total {mib(s.get("purged_bytes", 0))}); zone grew {ev("zone_grow")} times '
             f'({(d["zone_grow_ns"] / 1e6 if d else 0):.2f} ms, outside the zone lock; '
             f'{ev("zone_grow_waits")} slept on another grower\'s commit)')
    for z in s.get('zones', []):
        o.append(f'buddyinfo Node {z.get("node")}, zone Normal ' +
                 ' '.join(f'{n:5}' for n in z.get('buddyinfo', [])) +
                 f'   free {z.get("free_pages")} of {z.get("managed_pages")} pages, '
                 f'{z.get("pcp_pages")} in pcps')
    cols = ['count', 'high', 'batch', 'high_min', 'high_max', 'free_count']
    ecols = ['refills', 'drains', 'free_high_drains']
    o.append(f'{"cpu":>4}' + ''.join(f'{c:>11}' for c in cols) +
             ''.join(f'{"+" + c:>18}' for c in ecols))
    dc = {c['cpu']: c for c in d['cpus']} if d else {}
    for c in s.get('cpus', []):
        e = dc.get(c['cpu'])
        o.append(f'{c["cpu"]:>4}' + ''.join(f'{c.get(k, ""):>11}' for k in cols) +
                 ''.join(f'{(e.get(k, 0) if e else "-"):>18}' for k in ecols))
    return '\n'.join(o)


def cmd_top(o):
    pid = o.pid
    path = live_path(pid)
    if not alive(pid):
        left = f' ({path} is a page it left behind: it was killed)' if os.path.exists(path) else ''
        die(f'no process {pid}{left}', 1)
    deadline = time.monotonic() + o.wait
    while not os.path.exists(path):
        if time.monotonic() >= deadline or not alive(pid):
            die(why_no_page(pid), 1)
        time.sleep(0.1)
    prev = None
    tty = sys.stdout.isatty() and not o.json
    shown = 0
    while True:
        try:
            hdr, obj = read_live(pid)
        except FileNotFoundError:
            if shown:
                print(f'{PROG}: process {pid} exited', file=sys.stderr)
                return 0
            die(why_no_page(pid), 1)
        except (OSError, ValueError) as e:
            die(f'{path}: {e}', 1)
        if hdr['pid'] != pid:
            die(f'{path} belongs to pid {hdr["pid"]}', 1)
        born = start_ms(pid) if prev is None else None
        if born is not None and hdr['updated_ms'] < born - 2000:
            # a page a killed process left behind, its pid now another process's: wait for
            # this one to publish over it, as for a page not there yet
            if time.monotonic() < deadline and alive(pid):
                time.sleep(0.1)
                continue
            die(f'{path} was left behind by an earlier process {pid} (last updated before '
                f'this one started); {why_no_page(pid)}', 1)
        if prev is not None and hdr['seq'] == prev[0]['seq']:
            # not republished yet: wait for the next update (a stale page of a process that
            # died without removing it is never updated again)
            if not alive(pid):
                print(f'{PROG}: process {pid} exited', file=sys.stderr)
                return 0
            if time.monotonic() - prev_t > max(5.0, 5 * hdr['interval_ms'] / 1000):
                die(f'{path} is not updated any more (last {hdr["updated_ms"]})', 1)
            time.sleep(0.05)
            continue
        prev_t = time.monotonic()
        want_delta = o.once and prev is None and not o.no_wait
        if want_delta:
            # --once: events since the last refresh need two pages: wait for the next one
            prev = (hdr, obj)
            continue
        s = sample(pid, hdr, obj, prev)
        if o.json:
            print(json.dumps(s))
        else:
            if tty:
                sys.stdout.write('\033[H\033[J')
            print(render(pid, s))
            if not tty:
                print()
        sys.stdout.flush()
        shown += 1
        if o.once or (o.count and shown >= o.count):
            return 0
        prev = (hdr, obj)
        time.sleep(o.delay)


# --- main --------------------------------------------------------------------------------------

HELP_EPILOG = f'''commands:
  run [--stats[=json]] [--secure] [-e VAR=value ...] -- CMD [ARG...]
        run CMD under pcpmalloc: LD_PRELOAD holds the library's absolute path, so every
        process CMD starts uses it too.  Warns (and still runs CMD) when the dynamic loader
        will not load the library into CMD: statically linked, set-user-ID, a library of
        the wrong architecture.  The exit status is CMD's.
  stats FILE.json [B.json]
        print a statistics file (written with PCPMALLOC_STATS=json) as a table, or compare
        two of them counter by counter.
  top PID [--once] [--json] [-d SECONDS]
        live per-CPU view of a process running under pcpmalloc with PCPMALLOC_LIVE=1.
  prof [--alloc | --inuse] [--rate BYTES] [--top N] [--out DIR] -- CMD [ARG...]
  prof [--alloc | --inuse] DUMP
  prof --svg OUT.svg DUMP  |  prof --html OUT.html DUMP  |  prof --diff A B
        heap profile (PCPMALLOC_PROF=1): run CMD sampled, dump at exit and print its top
        allocation sites with google-pprof; draw a dump's call graph; compare two dumps.

examples:
  pcpmalloc run -- python3 -c 'print(1)'
  pcpmalloc run --stats=json -e PCPMALLOC_STATS_FILE=/tmp/st.%p.json -- make -j8
  pcpmalloc stats /tmp/st.1234.json
  pcpmalloc prof -- python3 -c 'x = [str(i) for i in range(10**6)]'
  pcpmalloc-ab -a glibc -a pcpmalloc -n 5 -- make -j8       (compare allocators)

Every PCPMALLOC_* variable is listed in pcpmalloc(1) (man pcpmalloc).
library: {default_lib()}'''


def main():
    ap = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description='pcpmalloc: the Linux page allocator\'s design (buddy zone, per-CPU '
                    'pagesets, SLUB-style slabs) as a drop-in malloc.',
        epilog=HELP_EPILOG)
    ap.add_argument('--version', action='version', version=f'{PROG} {VERSION}')
    sub = ap.add_subparsers(dest='cmd', metavar='COMMAND')

    r = sub.add_parser('run', help='run a command under pcpmalloc',
                       description='Run CMD (and the processes it starts) under pcpmalloc.')
    r.add_argument('--stats', nargs='?', const='1', choices=['1', 'json'],
                   help='statistics at exit (PCPMALLOC_STATS): text, or =json; on stderr '
                        'unless -e PCPMALLOC_STATS_FILE=PATH (%%p = pid)')
    r.add_argument('--secure', action='store_true', help='hardened mode (PCPMALLOC_SECURE=1)')
    r.add_argument('-e', dest='env', action='append', default=[], metavar='VAR=value',
                   help='set an environment variable (PCPMALLOC_* tunables; repeatable)')
    r.add_argument('--lib', help='the libpcpmalloc.so to load (default: ' + default_lib() + ')')
    r.add_argument('--no-check', action='store_true',
                   help='do not ask the dynamic loader first whether the library will load')
    r.add_argument('command', nargs=argparse.REMAINDER, help='-- CMD [ARG...]')

    s = sub.add_parser('stats', help='print or compare statistics files',
                       description='Print a PCPMALLOC_STATS=json file as a table, or compare '
                                   'two counter by counter.')
    s.add_argument('files', nargs='+', metavar='FILE.json')

    t = sub.add_parser('top', help='live per-CPU view of a running process',
                       description='A live view of a process running under pcpmalloc with '
                                   'PCPMALLOC_LIVE=1: per CPU count, high, batch, high_min, '
                                   'high_max and the refills, drains and free_high drains since '
                                   'the last refresh; buddyinfo, lock contention, RSS, purge.  '
                                   'Reads the page the library publishes in /dev/shm; never '
                                   'stops or traces the process.')
    t.add_argument('pid', type=int, metavar='PID')
    t.add_argument('--once', action='store_true',
                   help='one refresh and exit (it waits for the next update of the page, '
                        'for the events since the previous one)')
    t.add_argument('--json', action='store_true',
                   help='one JSON object per refresh: the statistics object (the keys of '
                        'PCPMALLOC_STATS=json), "live" (the page) and "since_last" (events)')
    t.add_argument('-d', '--delay', type=float, default=1.0, metavar='SECONDS',
                   help='seconds between refreshes (1)')
    t.add_argument('-n', '--count', type=int, default=0, metavar='N', help='stop after N refreshes')
    t.add_argument('--no-wait', action='store_true',
                   help='with --once: print the current page at once, no events')
    t.add_argument('--wait', type=float, default=3.0, metavar='SECONDS',
                   help='how long to wait for a starting process to publish its page (3)')

    pr = sub.add_parser('prof', help='heap profile: run a command, or read a dump',
                        description='Heap profiling (PCPMALLOC_PROF=1) through google-pprof.  '
                                    '"prof -- CMD" runs CMD with profiling on and a dump at '
                                    'exit, and prints its top allocation sites (bytes allocated; --inuse: in use at exit); '
                                    '"prof DUMP" prints a dump\'s; --svg/--html draw the call '
                                    'graph; --diff A B prints B less A (google-pprof --base).')
    pr.add_argument('--alloc', action='store_true', default=None,
                    help='bytes allocated over the run (the default of "prof -- CMD": at exit '
                         'most programs have freed what they allocated)')
    pr.add_argument('--inuse', dest='alloc', action='store_false',
                    help='bytes in use when the dump was written (the default for a DUMP)')
    pr.add_argument('--top', type=int, default=20, metavar='N', help='lines printed (20)')
    pr.add_argument('--out', metavar='DIR', help='where the dumps go (default: a new /tmp folder)')
    pr.add_argument('--rate', type=int, metavar='BYTES',
                    help='mean bytes between samples (PCPMALLOC_PROF_SAMPLE, 524288)')
    pr.add_argument('--svg', metavar='OUT.svg', help='call graph of DUMP as SVG')
    pr.add_argument('--html', metavar='OUT.html', help='top sites and call graph of DUMP as HTML')
    pr.add_argument('--diff', nargs=2, metavar=('A', 'B'), help='compare two dumps: B less A')
    pr.add_argument('--program', help='the program a dump was taken in (default: read from it)')
    pr.add_argument('--lib', help='the libpcpmalloc.so to load (default: ' + default_lib() + ')')
    pr.add_argument('args', nargs=argparse.REMAINDER, help='-- CMD [ARG...], or DUMP')

    argv = sys.argv[1:]
    dash = '--' in argv
    o = ap.parse_args()
    o.dash = dash
    if o.cmd is None:
        ap.print_help(sys.stderr)
        return 2
    if o.cmd == 'run':
        if o.command[:1] == ['--']:
            o.command = o.command[1:]
        return cmd_run(o)
    if o.cmd == 'stats':
        return cmd_stats(o)
    if o.cmd == 'top':
        return cmd_top(o)
    if o.cmd == 'prof':
        return cmd_prof(o)
    return 2


if __name__ == '__main__':
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(141)
