#!/usr/bin/env bash
# run_fuzzer.sh FUZZER CORPUS WORKDIR SECONDS - the meson test 'fuzz_pcpm': fuzzes for a fixed
# time, starting from the checked-in corpus (read only) plus what earlier runs in WORKDIR
# found.  A crash fails the test; the input is left in WORKDIR (crash-*) to be added to
# test/fuzz/corpus as a regression input (regress-NAME) together with its fix.
set -euo pipefail
fuzzer=$1 corpus=$2 work=$3 secs=$4
mkdir -p "$work/corpus"
# -rss_limit_mb: ASan's shadow plus up to ~400 MiB of live blocks (fuzz_ops.h); -timeout: one
# input takes well under a second, but on a loaded 2-core machine (load 15) one took 10 s
exec "$fuzzer" -max_total_time="$secs" -timeout=60 -rss_limit_mb=3072 -print_final_stats=1 \
	-artifact_prefix="$work/" "$work/corpus" "$corpus"
