#!/usr/bin/env bash
# python3 under pcpmalloc vs glibc: dict/list/str/bytes churn in the main thread, in worker
# threads, and handed between threads (churn.py).  Run twice per allocator: with Python's own
# small-object allocator (pymalloc, the default: malloc sees arenas and large objects) and with
# PYTHONMALLOC=malloc (every object allocation is a malloc call).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
real_init "$@"

# The interpreter itself, not a wrapper script (pyenv shims and the like are shell scripts).
PY=$(python3 -c 'import sys; print(sys.executable)')
SCALE=1
[[ $REAL_SIZE == long ]] && SCALE=4

workload() {
	echo "== pymalloc"
	run python3-pymalloc "$PY" "$REAL_DIR/churn.py" "$SCALE"
	echo "== PYTHONMALLOC=malloc"
	run python3-malloc env PYTHONMALLOC=malloc "$PY" "$REAL_DIR/churn.py" "$SCALE"
}
real_compare workload
