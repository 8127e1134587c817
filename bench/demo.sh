#!/usr/bin/env bash
# demo.sh - the main job: build pcpmalloc, run a real program under it with its statistics,
# then the A/B harness (build/bench/pcpmalloc-ab) on real programs - python3, make -j of a
# generated C project with gcc, sqlite3 - under glibc, jemalloc, mimalloc, tcmalloc and
# pcpmalloc (those installed), interleaved runs, with the significance of each difference.
# Usage: bench/demo.sh [-n RUNS]     (default 3; about 5 CPU-minutes with the build before it)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3
case "${1:-}" in
  -n) runs=$2 ;;
  "") ;;
  *) echo "usage: bench/demo.sh [-n RUNS]" >&2; exit 2 ;;
esac
# Debian's interpreter, not a version-manager shim that would be timed along with it
py=/usr/bin/python3
[ -x "$py" ] || py=python3
[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null
lib=$PWD/build/preload/libpcpmalloc.so

echo "== a real program under pcpmalloc, with its statistics (PCPMALLOC_STATS=1) =="
echo "(python3 bench/workloads/pychurn.py 5: dict, list and str churn; it prints its checksum)"
LD_PRELOAD=$lib PCPMALLOC_STATS=1 "$py" bench/workloads/pychurn.py 5

echo
echo "== A/B: real programs under every allocator ($runs interleaved runs each) =="
build/bench/pcpmalloc-ab --suite --only python,make,sqlite -n "$runs" --check
