#!/usr/bin/env bash
# demo.sh - the main job: build pcpmalloc, run real programs under it with its statistics,
# and compare wall time and peak RSS with glibc's malloc and jemalloc (and mimalloc and
# tcmalloc where installed), runs interleaved, median of N.
# Usage: bench/demo.sh [-n RUNS]     (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5
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
libdir=/usr/lib/x86_64-linux-gnu
declare -A libs=([glibc]="" [jemalloc]=$libdir/libjemalloc.so.2 [mimalloc]=$libdir/libmimalloc.so.2
                 [tcmalloc]=$libdir/libtcmalloc_minimal.so.4 [pcpmalloc]=$lib)
allocs=""
for a in glibc jemalloc mimalloc tcmalloc pcpmalloc; do
  if [ -z "${libs[$a]}" ] || [ -e "${libs[$a]}" ]; then allocs="$allocs $a"; else echo "skipping $a: ${libs[$a]} not installed" >&2; fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# a generated multi-file C project for gcc
mkdir -p "$work/cproj"
for i in $(seq 1 24); do
  {
    echo "#include <stdio.h>"
    echo "struct s$i { int a[$((i % 5 + 1))]; double d; };"
    for j in $(seq 1 40); do
      echo "static int f${i}_$j(int x) { struct s$i v = {{0}}; v.a[0] = x * $j; return v.a[0] + (int)v.d + $i; }"
    done
    echo "int g$i(int x) { int t = 0;"
    for j in $(seq 1 40); do echo "  t += f${i}_$j(x + $j);"; done
    echo "  return t; }"
  } > "$work/cproj/mod$i.c"
done
{
  echo "#include <stdio.h>"
  for i in $(seq 1 24); do echo "int g$i(int);"; done
  echo "int main(void) { long t = 0;"
  for i in $(seq 1 24); do echo "  t += g$i($i);"; done
  echo "  printf(\"%ld\\n\", t); return 0; }"
} > "$work/cproj/main.c"

declare -A cmds=(
  [python3]="$py $PWD/bench/workloads/pychurn.py 30"
  [gcc]="gcc -O2 -o $work/cproj/prog $work/cproj/main.c $(ls "$work"/cproj/mod*.c | tr "\n" " ")"
)

echo "== a real program under pcpmalloc, with its statistics (PCPMALLOC_STATS=1) =="
LD_PRELOAD=$lib PCPMALLOC_STATS=1 "$py" bench/workloads/pychurn.py 5

echo
echo "== A/B: median wall time (s) and the highest peak RSS (MiB) of $runs interleaved runs =="
tf=$work/time.out
for w in python3 gcc; do
  for ((r = 0; r < runs; r++)); do
    for a in $allocs; do
      pre=()
      [ -n "${libs[$a]}" ] && pre=(env LD_PRELOAD="${libs[$a]}")
      /usr/bin/time -f "%e %M" -o "$tf" "${pre[@]}" ${cmds[$w]} >/dev/null
      echo "$w $a $(cat "$tf")" >> "$work/results"
    done
  done
done
python3 - "$work/results" $allocs <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
allocs = sys.argv[2:]
for w in dict.fromkeys(r[0] for r in rows):
    base = None
    print(f"\n{w:10s} {'allocator':10s} {'wall(s)':>9s} {'vs glibc':>9s} {'RSS(MiB)':>9s} {'vs glibc':>9s}")
    for a in allocs:
        t = [float(r[2]) for r in rows if r[0] == w and r[1] == a]
        m = [float(r[3]) / 1024 for r in rows if r[0] == w and r[1] == a]
        tm, mm = st.median(t), max(m)
        if base is None:
            base = (tm, mm)
        print(f"{'':10s} {a:10s} {tm:9.3f} {tm / base[0]:9.2f}x {mm:9.1f} {mm / base[1]:9.2f}x")
PY
