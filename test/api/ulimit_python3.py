"""ulimit_python3.py - a real program out of memory: python3 under `ulimit -v 512M` with
LD_PRELOAD=libpcpmalloc.so (meson sets both).  Fills memory with 8 MiB bytearrays until
MemoryError (pcpmalloc returned NULL), checks the blocks still read as written, frees them,
checks that a 1 GiB request fails cleanly, and that half as many blocks can be had again."""
import ctypes
import sys

lib = ctypes.CDLL(None)
try:
    version = lib.pcpmalloc_version
except AttributeError:
    sys.exit("pcpmalloc is not loaded (LD_PRELOAD)")
version.restype = ctypes.c_char_p

held = []
try:
    while True:
        b = bytearray(8 << 20)
        b[0] = b[-1] = len(held) % 251
        held.append(b)
except MemoryError:
    pass
n = len(held)
if n < 8:
    sys.exit(f"only {n} blocks of 8 MiB before MemoryError under the limit")
for i, b in enumerate(held):
    if b[0] != i % 251 or b[-1] != i % 251 or b[4096] != 0:
        sys.exit(f"block {i} changed")
del held, b
try:
    bytearray(1 << 30)
    sys.exit("1 GiB under a 512 MiB limit did not fail")
except MemoryError:
    pass
again = [bytearray(8 << 20) for _ in range(n // 2)]
print(f"python3 on pcpmalloc {version().decode()}: {n} x 8 MiB before MemoryError, "
      f"{len(again)} again after freeing")
