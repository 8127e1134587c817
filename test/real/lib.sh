# shellcheck shell=bash
# test/real/lib.sh - shared machinery of the real-program tests, sourced by run_*.sh.
#
# Each test runs one workload twice: first on glibc's malloc (no preload), then with
# LD_PRELOAD=libpcpmalloc.so and PCPMALLOC_STATS=json.  The standard outputs of the two runs
# must be byte-identical, every command of both runs must succeed, and every step of the
# pcpmalloc run must have left at least one stats file with malloc_calls > 0, which shows that
# pcpmalloc (not glibc) served it.
#
# A test script looks like this:
#
#     source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#     real_init "$@"                 # $1: path of libpcpmalloc.so, $2: short | long
#     workload() {                   # runs in $REAL_WORK; its stdout is what gets compared
#             run python3 "$PY" churn.py      # allocator-run step named "python3"
#             sha256sum result.txt            # helper: never preloaded
#     }
#     real_compare workload
#
# Only commands started through `run STEP ...` get the allocator under test; everything else
# (input generators, hashing, diff) runs on glibc in both runs.  `run -p N STEP ...` asks for
# at least N processes of that step with malloc_calls > 0 (for multi-process programs such as
# gcc, whose driver, cc1, as and ld must all be served).
#
# The library argument "glibc" is a development mode: both runs use glibc, the stats check is
# skipped, and the script exits 77 so that meson reports SKIP, never OK.
#
# Environment: REAL_KEEP=1 keeps the temporary directory after the test.

set -euo pipefail

REAL_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

real_msg() { printf '%s: %s\n' "$REAL_NAME" "$*" >&2; }
real_fail() {
	printf '%s: FAIL: %s\n' "$REAL_NAME" "$*" >&2
	exit 1
}

# real_init LIB [short|long]
real_init() {
	REAL_NAME="$(basename "$0" .sh)"
	REAL_NAME="${REAL_NAME#run_}"
	[[ $# -ge 1 && -n "$1" ]] || real_fail "usage: $0 /path/to/libpcpmalloc.so [short|long]"
	REAL_LIB="$1"
	REAL_SIZE="${2:-short}"
	[[ "$REAL_SIZE" == short || "$REAL_SIZE" == long ]] ||
		real_fail "second argument must be 'short' or 'long', not '$REAL_SIZE'"
	if [[ "$REAL_LIB" == glibc ]]; then
		real_msg "DEVELOPMENT MODE: both runs use glibc; nothing about pcpmalloc is tested"
	else
		[[ "$REAL_LIB" == /* ]] || REAL_LIB="$PWD/$REAL_LIB"
		[[ -f "$REAL_LIB" && -r "$REAL_LIB" ]] ||
			real_fail "library not found: $REAL_LIB (build it first: meson compile -C build)"
	fi

	# The allocator-under-test settings exist only inside `run` in the pcpmalloc run.  Other
	# PCPMALLOC_* tunables are left alone: they change nothing under glibc.
	unset LD_PRELOAD PCPMALLOC_STATS PCPMALLOC_STATS_FILE
	# The reference is glibc as programs normally get it: no debugging modes (meson test sets
	# MALLOC_PERTURB_, which makes glibc fill every block and slows the large ones down).
	unset MALLOC_PERTURB_ MALLOC_CHECK_
	# Same locale, time zone and hash seeds in both runs, independent of the caller's.
	export LC_ALL=C TZ=UTC PYTHONHASHSEED=0 PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0
	export PYTHONDONTWRITEBYTECODE=1

	REAL_TMP="$(mktemp -d "${TMPDIR:-/tmp}/pcpmalloc-real-$REAL_NAME.XXXXXX")"
	REAL_WORK="$REAL_TMP/work"
	REAL_INPUT="$REAL_TMP/input" # for inputs shared by both runs
	mkdir -p "$REAL_INPUT"
	trap real_cleanup EXIT
}

real_cleanup() {
	local rc=$?
	if [[ "${REAL_KEEP:-0}" == 1 ]]; then
		real_msg "kept $REAL_TMP"
	else
		rm -rf "$REAL_TMP"
	fi
	return $rc
}

# Describe an exit status: "exit 3" or "killed by SIGSEGV (139)".
real_status() {
	local rc=$1
	if ((rc > 128 && rc < 160)); then
		printf 'killed by SIG%s (%d)' "$(kill -l $((rc - 128)) 2>/dev/null || echo '?')" "$rc"
	else
		printf 'exit %d' "$rc"
	fi
}

# run [-p MIN_PROCS] STEP CMD [ARGS...] - run CMD under the allocator of the current run.
# STEP names the command in messages and in the stats check; use a word ([A-Za-z0-9_-]).
# stdin and stdout are the caller's; stderr is kept in $REAL_TMP/<alloc>/STEP.err.
run() {
	local min=1
	if [[ "$1" == -p ]]; then
		min=$2
		shift 2
	fi
	local step=$1
	shift
	[[ "$step" =~ ^[A-Za-z0-9_-]+$ ]] || real_fail "bad step name '$step'"
	local err="$REAL_TMP/$REAL_ALLOC/$step.err" rc=0
	# Remember the step (and its process minimum) for the stats check.
	grep -qx "$step $min" "$REAL_TMP/$REAL_ALLOC/steps" 2>/dev/null ||
		echo "$step $min" >>"$REAL_TMP/$REAL_ALLOC/steps"
	if [[ "$REAL_ALLOC" == pcpmalloc && "$REAL_LIB" != glibc ]]; then
		env LD_PRELOAD="$REAL_LIB" PCPMALLOC_STATS=json \
			PCPMALLOC_STATS_FILE="$REAL_TMP/stats/$step.%p.json" "$@" 2>>"$err" || rc=$?
	else
		"$@" 2>>"$err" || rc=$?
	fi
	if ((rc != 0)); then
		{
			printf '%s: FAIL: [%s] step %s: %s: %s\n' "$REAL_NAME" "$REAL_ALLOC" "$step" \
				"$(real_status $rc)" "$*"
			printf -- '--- stderr of step %s (last 40 lines) ---\n' "$step"
			tail -n 40 "$err"
			printf -- '--- end of stderr ---\n'
		} >&2
		exit $rc
	fi
}

# real_compare WORKLOAD_FUNCTION - run it under glibc and under pcpmalloc and compare.
real_compare() {
	local fn=$1 alloc rc
	local -A secs
	for alloc in glibc pcpmalloc; do
		rm -rf "$REAL_WORK" "$REAL_TMP/stats"
		mkdir -p "$REAL_WORK" "$REAL_TMP/$alloc" "$REAL_TMP/stats"
		: >"$REAL_TMP/$alloc/steps"
		local t0=$EPOCHREALTIME
		set +e
		(
			set -e
			REAL_ALLOC=$alloc
			cd "$REAL_WORK"
			"$fn"
		) </dev/null >"$REAL_TMP/$alloc.out"
		rc=$?
		set -e
		secs[$alloc]=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
		if ((rc != 0)); then
			{
				echo "--- last 20 lines of the $alloc run's standard output ---"
				tail -n 20 "$REAL_TMP/$alloc.out"
				echo "--- end of output ---"
			} >&2
			if [[ $alloc == glibc ]]; then
				real_fail "the workload failed under glibc ($(real_status $rc)): the test itself is broken"
			fi
			real_stats_report || true
			real_fail "the workload failed under pcpmalloc ($(real_status $rc)) but passed under glibc"
		fi
		real_msg "$alloc run: ${secs[$alloc]} s, $(wc -l <"$REAL_TMP/$alloc.out") output lines"
	done

	if ! cmp -s "$REAL_TMP/glibc.out" "$REAL_TMP/pcpmalloc.out"; then
		{
			echo "--- diff -u glibc pcpmalloc (first 60 lines) ---"
			diff -u --label glibc --label pcpmalloc "$REAL_TMP/glibc.out" \
				"$REAL_TMP/pcpmalloc.out" | head -n 60 || true # diff exits 1 on a difference
			echo "--- end of diff ---"
		} >&2
		real_fail "output under pcpmalloc differs from output under glibc"
	fi
	real_msg "outputs identical ($(wc -c <"$REAL_TMP/glibc.out") bytes," \
		"sha256 $(sha256sum <"$REAL_TMP/glibc.out" | cut -c1-16))"

	if [[ "$REAL_LIB" == glibc ]]; then
		real_msg "DEVELOPMENT MODE: comparison machinery ran; stats check skipped; reporting SKIP"
		exit 77
	fi
	real_stats_report || real_fail "pcpmalloc did not demonstrably serve every step (see above)"
	real_msg "PASS (glibc ${secs[glibc]} s, pcpmalloc ${secs[pcpmalloc]} s)"
}

# Check and summarise the stats files of the pcpmalloc run, one line per step.
real_stats_report() {
	local py
	py=$(command -v python3) || real_fail "python3 is needed to read the stats files"
	if grep -qs 'cannot be preloaded' "$REAL_TMP"/pcpmalloc/*.err; then
		real_msg "the dynamic loader refused the library:"
		grep -hs 'cannot be preloaded' "$REAL_TMP"/pcpmalloc/*.err | sort -u | head -n 5 >&2
	fi
	"$py" - "$REAL_TMP/stats" "$REAL_TMP/pcpmalloc/steps" "$REAL_NAME" <<'PY'
import glob, json, os, sys

stats_dir, steps_file, name = sys.argv[1:4]
keys = ("malloc_calls", "free_calls", "pgalloc_pcp", "pgalloc_zone")
ok = True
needs = {}   # step -> the largest process minimum asked for it, in first-use order
for line in open(steps_file):
    step, need = line.split()
    needs[step] = max(needs.get(step, 0), int(need))
for step, need in needs.items():
    files = sorted(glob.glob(os.path.join(stats_dir, step + ".*.json")))
    served, bad, total = 0, [], dict.fromkeys(keys, 0)
    for path in files:
        text = open(path, errors="replace").read()
        dec, pos, objs = json.JSONDecoder(), 0, []
        try:
            while text[pos:].strip():
                while text[pos].isspace():
                    pos += 1
                obj, pos = dec.raw_decode(text, pos)
                objs.append(obj)
        except (ValueError, IndexError) as e:
            bad.append("%s: not JSON (%s): %r" % (os.path.basename(path), e, text[:120]))
            continue
        if not objs:
            bad.append("%s: empty" % os.path.basename(path))
        for obj in objs:
            if not isinstance(obj, dict) or not isinstance(obj.get("malloc_calls"), int):
                bad.append("%s: no integer malloc_calls; keys: %s" % (
                    os.path.basename(path), sorted(obj) if isinstance(obj, dict) else type(obj)))
                continue
            if obj["malloc_calls"] > 0:
                served += 1
            for k in keys:
                if isinstance(obj.get(k), int):
                    total[k] += obj[k]
    summary = " ".join("%s=%d" % (k, total[k]) for k in keys)
    verdict = "ok" if served >= need and not bad else "FAIL"
    print("%s: stats %-4s step %s: %d files, %d processes with malloc_calls > 0 (need %d); %s"
          % (name, verdict, step, len(files), served, need, summary), file=sys.stderr)
    for b in bad[:5]:
        print("%s:   bad stats file %s" % (name, b), file=sys.stderr)
    if verdict != "ok":
        ok = False
        if not files:
            print("%s:   no stats file from step %s: the library was not loaded, the process "
                  "did not exit normally, or it did not write PCPMALLOC_STATS_FILE at exit"
                  % (name, step), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}

# Helpers for workloads.

# A deterministic digest of a file or of stdin, for outputs too large to compare inline.
digest() { sha256sum "$@" | cut -d' ' -f1; }
