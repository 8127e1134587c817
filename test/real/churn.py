"""Allocation churn for the python3 real-program test (test/real/run_python3.sh).

Builds and tears down dicts, lists, strings and bytes of many sizes, in the main thread and in
worker threads, and passes objects between threads through queues (so memory allocated by one
thread is freed by another).  Everything printed is a count or a checksum computed from seeded
pseudo-random data, so the output is the same on every allocator; the allocator only shows
through crashes, corruption (wrong checksums) or leaks of state between objects.

usage: churn.py [SCALE]   (SCALE: integer work multiplier, default 1)
"""

import json
import queue
import random
import re
import sys
import threading
import zlib


def crc(obj):
    """Checksum of a value's canonical JSON text."""
    return zlib.crc32(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


def word(rng, lo=1, hi=24):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_0123456789")
                   for _ in range(rng.randint(lo, hi)))


def dict_churn(rng, rounds):
    """Grow, shrink and rebuild dicts; nested dicts; many key sizes."""
    d, acc = {}, 0
    for r in range(rounds):
        for i in range(2000):
            k = word(rng, 1, 40) + str(i % 97)
            d[k] = [i, k * rng.randint(1, 6), {"r": r}]
        for k in list(d)[::3]:
            del d[k]
        if len(d) > 20000:
            # Rebuild from scratch: frees the old table and every value at once.
            d = {k: v for k, v in d.items() if len(k) % 4}
        acc = zlib.crc32(("%d:%d" % (r, len(d))).encode(), acc)
    items = sorted((k, v[0], len(v[1])) for k, v in d.items())
    return {"dict_len": len(d), "dict_crc": crc(items), "dict_acc": acc}


def list_churn(rng, rounds):
    """Appends (realloc growth), slicing, sorting, inserts and pops; lists of lists."""
    keep, acc = [], 0
    for r in range(rounds):
        lst = [rng.randint(0, 1 << 40) for _ in range(rng.randint(100, 30000))]
        lst.sort()
        mid = lst[len(lst) // 4: 3 * len(lst) // 4]
        for _ in range(200):
            mid.insert(rng.randrange(len(mid) + 1), rng.random())
            if mid:
                mid.pop(rng.randrange(len(mid)))
        nested = [[x] * (x % 7) for x in lst[:2000]]
        acc = zlib.crc32(("%d:%d:%d:%d" % (r, len(lst), len(mid), sum(map(len, nested))))
                         .encode(), acc)
        keep.append(lst[::50])
        if len(keep) > 8:
            keep.pop(0)
    flat = [x for part in keep for x in part]
    return {"list_acc": acc, "list_kept": len(flat), "list_crc": crc(flat)}


def str_churn(rng, rounds):
    """Concatenation in loops, join/split/replace, formatting, encode/decode, regex."""
    acc, total = 0, 0
    pat = re.compile(r"([a-z]+)(\d+)_")
    for r in range(rounds):
        s = ""
        for i in range(3000):
            s += word(rng) + str(i) + "_"   # in-place growth of a str
        parts = s.split("_")
        joined = "|".join(p.upper() for p in parts if p)
        rep = joined.replace("A", "<a>").replace("|", "\n")
        enc = rep.encode("utf-16").decode("utf-16")
        found = pat.findall(s)
        sub = pat.sub(lambda m: m.group(2) + m.group(1), s)
        fmt = ["{:>12}:{:08x}:{!r}".format(p[:5], zlib.crc32(p.encode()), p[-3:])
               for p in parts[:500]]
        total += len(enc) + len(sub) + len(fmt)
        acc = zlib.crc32(enc.encode() + sub.encode() + "".join(fmt).encode(), acc)
        acc = zlib.crc32(repr(found[:50]).encode(), acc)
    return {"str_acc": acc, "str_total": total}


def bytes_churn(rng, rounds):
    """Buffers from a few bytes to several MiB (the large and huge allocation paths)."""
    acc, peak = 0, 0
    for r in range(rounds):
        ba = bytearray()
        n = rng.randint(1, 64)
        while len(ba) < (1 << 20) * n // 8:
            ba += bytes([r & 0xFF]) * rng.randint(1, 70000)   # realloc growth
        big = bytes(ba) * 2
        peak = max(peak, len(big))
        chunks = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
                  for _ in range(2000)]
        acc = zlib.crc32(big[::4096] + b"".join(chunks), acc)
        del ba, big, chunks
    return {"bytes_acc": acc, "bytes_peak": peak}


def all_churn(seed, scale):
    rng = random.Random(seed)
    out = {}
    out.update(dict_churn(rng, 6 * scale))
    out.update(list_churn(rng, 10 * scale))
    out.update(str_churn(rng, 4 * scale))
    out.update(bytes_churn(rng, 4 * scale))
    return out


def producer(q, seed, count):
    rng = random.Random(seed)
    for i in range(count):
        kind = i % 4
        if kind == 0:
            item = {word(rng): [word(rng) for _ in range(rng.randint(0, 20))]}
        elif kind == 1:
            item = [rng.randint(0, 1000) for _ in range(rng.randint(0, 400))]
        elif kind == 2:
            item = word(rng, 1, 3000)
        else:
            item = bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 5000)))
        q.put(item)
    q.put(None)


def consumer(q, results, idx):
    """Frees, on this thread, everything the producer thread allocated."""
    acc, n = 0, 0
    while True:
        item = q.get()
        if item is None:
            break
        data = item if isinstance(item, bytes) else json.dumps(item, sort_keys=True).encode()
        acc = zlib.crc32(data, acc)
        n += 1
    results[idx] = {"handoff_items": n, "handoff_crc": acc}


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1

    print("main:", json.dumps(all_churn(1, scale), sort_keys=True))

    nthreads = 4
    results = [None] * nthreads

    def worker(i):
        results[i] = all_churn(100 + i, scale)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, res in enumerate(results):
        print("thread %d:" % i, json.dumps(res, sort_keys=True))

    pairs = 3
    hand = [None] * pairs
    qs = [queue.Queue(maxsize=64) for _ in range(pairs)]
    threads = []
    for i in range(pairs):
        threads.append(threading.Thread(target=producer, args=(qs[i], 200 + i, 4000 * scale)))
        threads.append(threading.Thread(target=consumer, args=(qs[i], hand, i)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, res in enumerate(hand):
        print("handoff %d:" % i, json.dumps(res, sort_keys=True))
    print("done")


if __name__ == "__main__":
    main()
