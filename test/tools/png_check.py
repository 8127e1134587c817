#!/usr/bin/python3
"""png_check.py FILE.png [--ink PCT] [--colour RRGGBB:N ...] - checks that a PNG is a picture
and not blank: at least PCT % of its pixels differ from its most common colour (the
background), and for each --colour at least N pixels have that colour (within 12 per
channel).  Prints what it found; exit 0 when every check holds, 1 when one does not.

Reads PNG itself (zlib and the five row filters of the PNG specification, 8-bit RGB/RGBA/grey,
not interlaced: what chromium's and matplotlib's screenshots are), so the check needs nothing
beyond Python."""
import argparse
import struct
import sys
import zlib


def read_png(path):
    data = open(path, 'rb').read()
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        raise ValueError('not a PNG file')
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack('>I4s', data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b'IHDR':
            hdr = struct.unpack('>IIBBBBB', body)
        elif kind == b'IDAT':
            idat.append(body)
        elif kind == b'IEND':
            break
    w, h, depth, ctype, _, _, interlace = hdr
    chans = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype)
    if depth != 8 or chans is None or interlace:
        raise ValueError(f'unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})')
    raw = zlib.decompress(b''.join(idat))
    stride = w * chans
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - chans] if x >= chans else 0
            b = prev[x]
            c = prev[x - chans] if x >= chans else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    px = []
    for r in rows:
        for x in range(0, stride, chans):
            if chans >= 3:
                px.append(tuple(r[x:x + 3]))
            else:
                px.append((r[x],) * 3)
    return w, h, px


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('png')
    ap.add_argument('--ink', type=float, default=1.0)
    ap.add_argument('--colour', action='append', default=[])
    o = ap.parse_args()
    try:
        w, h, px = read_png(o.png)
    except (OSError, ValueError, zlib.error, TypeError) as e:
        print(f'{o.png}: {e}')
        return 1
    counts = {}
    for p in px:
        counts[p] = counts.get(p, 0) + 1
    bg, nbg = max(counts.items(), key=lambda kv: kv[1])
    ink = 100.0 * (len(px) - nbg) / len(px)
    ok = True
    print(f'{o.png}: {w}x{h}, {len(counts)} colours, background {bg}, {ink:.1f}% ink')
    if ink < o.ink:
        print(f'  blank: {ink:.2f}% of the pixels differ from the background, want >= {o.ink}%')
        ok = False
    for spec in o.colour:
        hexc, _, n = spec.partition(':')
        want = tuple(int(hexc[i:i + 2], 16) for i in (0, 2, 4))
        got = sum(c for p, c in counts.items() if all(abs(p[i] - want[i]) <= 12 for i in range(3)))
        print(f'  #{hexc}: {got} pixels (want >= {n})')
        if got < int(n):
            ok = False
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
