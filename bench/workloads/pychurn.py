# pychurn.py - a Python workload for allocator comparisons: dict, list and str churn.
# Deterministic; prints a checksum so runs under different allocators can be compared.
import sys

def churn(rounds):
    total = 0
    for r in range(rounds):
        d = {}
        for i in range(20000):
            k = "k%d_%d" % (i, r)
            d[k] = [i, str(i) * (i % 7), (i, r)]
        lst = sorted(d.keys(), key=lambda s: s[::-1])
        total += len(lst) + sum(len(v[1]) for v in d.values())
        s = "".join(x[:3] for x in lst[:5000])
        total += hash(len(s)) & 0xFFFF
        del d, lst, s
    return total

print(churn(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
