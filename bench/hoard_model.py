#!/usr/bin/env python3
"""hoard_model.py - how much memory per-CPU, per-class caches of free objects keep, and how
many shared-pool exchanges they cost, in wl-churn's pattern (issue 22, fifth round).

Each of T threads (one CPU slot each, as PCPMALLOC_CPU_SOURCE=tid at 224 CPUs) keeps `slots`
slots and replaces a random one per operation with a block of wl_size()'s distribution
(bench/workloads/wl.h), rounded to pcpmalloc's class (eight per power of two).  A freed object
stays on its CPU's sheaves for its class (main + spare: up to 2 * S objects); past that one
sheaf of S goes to a shared pool (the barn: one exchange), and an allocation that finds its
class empty takes a sheaf from the pool (one exchange) or, the pool empty too, carves a new
object.  Nothing ever goes back to pages: an object carved stays resident (RSS never falls
before the decay period), so the peak is the objects carved.

Prints, for sheaves of S objects: objects carved / objects in use at the end (the RSS over
what is live, as pages: one resident page an object, as churn writes 64 bytes of each) and
exchanges per 1000 malloc+free calls.  Deterministic (seeded); a few seconds at -t 8.
"""
import argparse
import random


def class_of(n):
    """pcpmalloc's class above 4 KiB: eight per power of two (slab_order.c)."""
    p = 1 << (n - 1).bit_length()
    step = p // 16
    return (n + step - 1) // step * step


def wl_size(r, lo, hi):
    """wl.h's wl_size() for one 64-bit random number."""
    span = hi - lo + 1
    cap = span >> (0 if r % 4 == 0 else (r >> 8) % 6)
    return lo + (r >> 16) % max(cap, 1)


def run(sheaf, threads, ops, slots, lo, hi, seed=2):
    rnd = random.Random(seed)
    slot = [[0] * slots for _ in range(threads)]
    free = [dict() for _ in range(threads)]  # objects on a CPU's sheaves, per class
    pool = {}  # full sheaves in the shared pool, per class
    carved = exchanges = 0
    for _ in range(ops):
        for t in range(threads):
            mine, cached = slot[t], free[t]
            k = rnd.randrange(slots)
            c = mine[k]
            if c:
                n = cached.get(c, 0) + 1
                if n > 2 * sheaf(c):
                    pool[c] = pool.get(c, 0) + 1
                    n -= sheaf(c)
                    exchanges += 1
                cached[c] = n
            c = class_of(wl_size(rnd.getrandbits(64), lo, hi))
            n = cached.get(c, 0)
            if not n:
                if pool.get(c):
                    pool[c] -= 1
                    n = sheaf(c)
                    exchanges += 1
                else:
                    carved += 1
                    n = 1
            cached[c] = n - 1
            mine[k] = c
    live = sum(1 for t in slot for c in t if c)
    return carved / live, exchanges * 1000.0 / (2 * threads * ops)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('-t', '--threads', type=int, default=32)
    ap.add_argument('-n', '--ops', type=int, default=50000, help='operations per thread')
    ap.add_argument('-k', '--slots', type=int, default=1000)
    ap.add_argument('-s', '--lo', type=int, default=4096)
    ap.add_argument('-S', '--hi', type=int, default=16384)
    ap.add_argument('--sheaves', default='4 8 16 32 64 128',
                    help='objects per sheaf to model (a list)')
    a = ap.parse_args()
    print('objects/sheaf  carved/live  exchanges/1k calls')
    for s in [int(x) for x in a.sheaves.split()]:
        ratio, exch = run(lambda c, s=s: s, a.threads, a.ops, a.slots, a.lo, a.hi)
        print('%13d  %11.3f  %18.2f' % (s, ratio, exch))


if __name__ == '__main__':
    main()
