#!/usr/bin/python3
# pcpmalloc - the command for people: run a program under libpcpmalloc.so (an absolute
# LD_PRELOAD path that child processes keep), print or compare the statistics files that
# PCPMALLOC_STATS=json writes, and watch a running process's pcps live.
#
#   pcpmalloc run [--stats[=json]] [--secure] [-e VAR=value ...] -- CMD [ARG...]
#   pcpmalloc stats FILE.json [B.json]
#   pcpmalloc top PID [--once] [--json] [-d SECONDS]
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
    import struct
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

examples:
  pcpmalloc run -- python3 -c 'print(1)'
  pcpmalloc run --stats=json -e PCPMALLOC_STATS_FILE=/tmp/st.%p.json -- make -j8
  pcpmalloc stats /tmp/st.1234.json
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

    o = ap.parse_args()
    if o.cmd is None:
        ap.print_help(sys.stderr)
        return 2
    if o.cmd == 'run':
        if o.command[:1] == ['--']:
            o.command = o.command[1:]
        return cmd_run(o)
    if o.cmd == 'stats':
        return cmd_stats(o)
    return 2


if __name__ == '__main__':
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(141)
