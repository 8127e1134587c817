#!/usr/bin/env bash
# build_fuzzer.sh CLANG SRCROOT OUTPUT [VERSION] - builds the libFuzzer target fuzz_pcpm:
# pcpmalloc's core and topology sources compiled as a normal library (pcpm_* names, beside
# the process malloc) together with the operation interpreter, all instrumented for coverage
# (-fsanitize=fuzzer) and checked by ASan+UBSan.  The project itself is built with gcc;
# libFuzzer needs clang, so meson calls this script (a custom_target) with the clang it found.
set -euo pipefail
clang=$1 src=$2 out=$3 version=${4:-0}
core=(os.c config.c arena.c zone.c pcp.c slab.c tcache.c malloc.c stat.c vmstat.c)
topo=(sizing.c cpuinfo.c hwtopo.c topology.c)
srcs=("${core[@]/#/$src/core/}" "${topo[@]/#/$src/topology/}"
	"$src/test/fuzz/fuzz_ops.c" "$src/test/fuzz/fuzz_pcpm.c")
hwloc_cflags=$(pkg-config --cflags hwloc 2>/dev/null || true)
# shellcheck disable=SC2086
exec "$clang" -std=gnu11 -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-fno-strict-aliasing -ftls-model=initial-exec -DPCPM_VERSION="\"$version\"" \
	-I"$src/core" -I"$src/topology" -I"$src/preload" $hwloc_cflags \
	"${srcs[@]}" -o "$out" -lpthread -ldl
