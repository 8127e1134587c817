#!/usr/bin/env python3
"""make_seeds.py DIR - writes the hand-made seed inputs of the fuzz_pcpm corpus (fuzz_ops.c
explains the format: opcode byte, slot byte, arguments).  Run once; the files are checked
in beside the regression inputs (regress-*) that fuzzing found."""
import os
import struct
import sys

(MALLOC, CALLOC, REALLOC, REALLOCARRAY, POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN, VALLOC,
 PVALLOC, FREE, FREE_SIZED, USABLE, TRIM, GIVE, TAKE, THREAD_EXIT, WRITE, FREE_KEYED) = range(18)


def tiny(n):  # 1..255 (0 when n == 0)
    return bytes([1, n]) if n else bytes([0])


def slab(n):  # 0..16384
    return bytes([0x40]) + struct.pack('<H', n)


def large(n):  # 16 KiB + 64*k: page runs up to 4 MiB
    k = max(0, (n - 16384) // 64)
    return bytes([0x80]) + struct.pack('<H', min(k, 0xffff))


def paged(n):  # 16 KiB + 1 .. 32 KiB, any byte: the paged slab classes and the run above
    return bytes([0xa0]) + struct.pack('<H', n - 16385)


def edge(i):  # index into edge_sizes[]
    return bytes([0xc0, i])


def op(code, slot, *args):
    return bytes([code, slot]) + b''.join(args)


def pow2_align(shift):
    return bytes([shift])


seeds = {
    'basic': op(MALLOC, 0, tiny(24)) + op(MALLOC, 1, slab(3000)) + op(USABLE, 0) +
    op(FREE, 0) + op(FREE_SIZED, 1),
    'calloc': b''.join(op(CALLOC, i, large(20000 * (i + 1)), bytes([i])) for i in range(6)) +
    op(CALLOC, 7, edge(0x2a), bytes([255])),
    'realloc_walk': op(MALLOC, 3, tiny(10)) + b''.join(
        op(REALLOC, 3, s) for s in (slab(100), slab(9000), large(70000), large(3 << 20),
                                    edge(33), edge(36), large(40000), tiny(5), edge(37))),
    'aligned': b''.join(op(POSIX_MEMALIGN, i, slab(100 * i), pow2_align(i + 3)) for i in range(12)) +
    b''.join(op(ALIGNED_ALLOC, 16 + i, tiny(i), pow2_align(i)) for i in range(24)) +
    op(MEMALIGN, 40, slab(50), bytes([0x83]), struct.pack('<H', 48)) +
    op(VALLOC, 41, tiny(1)) + op(PVALLOC, 42, slab(4097)),
    'bad_align': op(POSIX_MEMALIGN, 1, tiny(8), bytes([0x80])) +
    op(ALIGNED_ALLOC, 2, tiny(8), bytes([0x83]), struct.pack('<H', 24)) +
    op(MEMALIGN, 3, tiny(8), bytes([0x81])) + op(MEMALIGN, 4, tiny(8), bytes([0x82])),
    'impossible': b''.join(op(MALLOC, i, edge(37 + i)) for i in range(8)) +
    op(MALLOC, 9, tiny(7)) + op(REALLOC, 9, edge(37)) + op(REALLOCARRAY, 9, tiny(3), bytes([255])),
    'handoff': b''.join(op(MALLOC, i, slab(64 * i + 16)) + op(GIVE, i) for i in range(20)) +
    b''.join(op(TAKE, i, struct.pack('<H', 900 * i)) for i in range(20)) + op(THREAD_EXIT, 0) +
    op(TAKE, 30, struct.pack('<H', 50000)) + op(GIVE, 30),
    'huge_cache': b''.join(op(MALLOC, i, edge(30 + i)) for i in range(7)) +
    b''.join(op(FREE, i) for i in range(7)) + b''.join(op(MALLOC, i, edge(29 + i)) for i in range(7)) +
    op(TRIM, 0, b'\0'),
    'trim': b''.join(op(MALLOC, i, large(30000 + 5000 * i)) for i in range(16)) +
    b''.join(op(FREE, i) for i in range(0, 16, 2)) + op(TRIM, 0, b'\0') +
    b''.join(op(WRITE, i) for i in range(1, 16, 2)),
    'keyed': b''.join(op(MALLOC, i, tiny(16 + 7 * i)) for i in range(32)) +
    b''.join(op(FREE, i) for i in range(0, 32, 3)) +
    b''.join(op(FREE_KEYED, i, bytes([i])) for i in range(1, 32, 3)) +
    b''.join(op(MALLOC, i, large(20000)) + op(FREE_KEYED, i, b'\0') for i in range(40, 44)),
    # the paged classes (16-28 KiB) at their boundaries: reuse, calloc after reuse, realloc
    # across them, aligned forms, hand-offs to another thread
    'paged': b''.join(op(MALLOC, i, paged(n)) for i, n in
                      enumerate((16385, 20479, 20480, 20481, 24576, 28672, 28673, 32768))) +
    b''.join(op(FREE, i) for i in range(0, 8, 2)) +
    b''.join(op(CALLOC, 8 + i, paged(20480 + 4096 * (i % 3)), bytes([1])) for i in range(6)) +
    b''.join(op(REALLOC, i, paged(32768 - 2048 * i)) for i in range(1, 8, 2)) +
    b''.join(op(POSIX_MEMALIGN, 20 + i, paged(20000 + 2000 * i), pow2_align(12 + i)) for i in range(5)) +
    b''.join(op(GIVE, 8 + i) for i in range(6)) + op(THREAD_EXIT, 0) +
    b''.join(op(TAKE, 30 + i, struct.pack('<H', 16385 + 3000 * i)) for i in range(5)) +
    op(TRIM, 0, b'\0'),
}

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    # an odd first byte asks for the leak check at the end: USABLE (11) on an empty slot
    with open(os.path.join(out, 'seed-' + name), 'wb') as f:
        f.write(op(USABLE, 63) + data)
