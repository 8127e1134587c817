#!/usr/bin/env bash
# GNU sort under pcpmalloc vs glibc on a generated 100 MB file (400 MB in long mode): in-memory
# sorts with sort's worker threads, a numeric key, unique keys, multiple keys in a UTF-8 locale,
# and an external merge sort with a small buffer and gzip-compressed temporary files (the gzip
# children are preloaded too).  Outputs are compared by SHA-256.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
real_init "$@"

MB=100
[[ $REAL_SIZE == long ]] && MB=400

# The input is generated once, on glibc, and shared by both runs.
python3 - "$((MB * 1000 * 1000))" >"$REAL_INPUT/lines.txt" <<'PY'
import random, sys
rng = random.Random(20240501)
target = int(sys.argv[1])
syll = ["ka", "ze", "mi", "to", "ra", "pu", "ne", "lo", "shi", "vo", "gri", "at", "en", "ur"]
words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 5))) for _ in range(5000)]
out, written, bits, pick = sys.stdout.buffer, 0, rng.getrandbits, rng.choice
while written < target:
    blob = "".join("%s %d %016x %s %s\n" % (pick(words), bits(31) - (1 << 30), bits(64),
                                            pick(words), pick(words))
                   for _ in range(10000)).encode()
    out.write(blob)
    written += len(blob)
PY
IN="$REAL_INPUT/lines.txt"
real_msg "input: $(wc -c <"$IN") bytes, $(wc -l <"$IN") lines"

workload() {
	echo "== sort"
	run sort-plain sort "$IN" | digest
	echo "== sort -n -k2"
	run sort-numeric sort -t ' ' -k2,2n "$IN" | digest
	echo "== sort -u -k1,1"
	run sort-unique sort -u -k1,1 "$IN" | tee uniq.txt | digest
	wc -l <uniq.txt
	echo "== sort -k4,4 -k3,3 in C.UTF-8"
	run sort-utf8 env LC_ALL=C.UTF-8 sort -k4,4 -k3,3 "$IN" | digest
	echo "== external sort, 16 MiB buffer, gzip temporaries"
	mkdir spill
	run -p 3 sort-external sort -S 16M --compress-program=gzip -T spill "$IN" | digest
}
real_compare workload
