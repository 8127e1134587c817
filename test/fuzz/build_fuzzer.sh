#!/usr/bin/env bash
# build_fuzzer.sh CLANG SRCROOT OUTPUT VERSION SOURCES... - builds the libFuzzer target fuzz_pcpm:
# pcpmalloc's core and topology sources compiled as a normal library (pcpm_* names, beside
# the process malloc) together with the operation interpreter, all instrumented for coverage
# (-fsanitize=fuzzer) and checked by ASan+UBSan.  The project itself is built with gcc;
# libFuzzer needs clang, so meson calls this script (a custom_target) with the clang it found.
set -euo pipefail
# SOURCES: the core's and topology's sources as meson lists them, and the target's own.
clang=$1 src=$2 out=$3 version=$4
shift 4
srcs=("$@")
hwloc_cflags=$(pkg-config --cflags hwloc 2>/dev/null || true)
# shellcheck disable=SC2086
exec "$clang" -std=gnu11 -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-fno-strict-aliasing -ftls-model=initial-exec -DPCPM_VERSION="\"$version\"" \
	-I"$src/core" -I"$src/topology" -I"$src/preload" $hwloc_cflags \
	"${srcs[@]}" -o "$out" -lpthread -ldl
