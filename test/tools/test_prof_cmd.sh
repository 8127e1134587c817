#!/usr/bin/env bash
# test_prof_cmd.sh BUILD - `pcpmalloc prof` (issue 25) as people meet it: python3, sqlite3 and
# make run under `pcpmalloc prof -- CMD` give a profile google-pprof reads, whose top sites
# name functions of those programs; `prof DUMP`, `--svg`, `--html` and `--diff` on the dumps.
# Skipped (77) without google-pprof (package google-perftools); a program missing is skipped.
build=$1
. "$(dirname "${BASH_SOURCE[0]}")/toolslib.sh"
cmd=$build/preload/pcpmalloc
command -v google-pprof >/dev/null || { echo "SKIP: google-pprof not installed"; exit 77; }

# CMD... -> its top sites in $tmp/NAME.txt, the dump's path in $tmp/NAME.dump
prof_run() {
	local name=$1
	shift
	"$cmd" prof --out "$tmp/$name" --top 15 -- "$@" >"$tmp/$name.txt" 2>"$tmp/$name.err" ||
		{ fail "$name: pcpmalloc prof failed: $(tail -3 "$tmp/$name.err")"; return 1; }
	sed -n 's/^pcpmalloc: heap profile of .*: \(\/.*\.heap\)$/\1/p' "$tmp/$name.err" >"$tmp/$name.dump"
	has "$tmp/$name.txt" '^Total: [0-9.]+ MB' "$name: google-pprof's total"
}

if command -v python3 >/dev/null; then
	py=$(python3 -c 'import sys; print(sys.executable)')
	prof_run python "$py" -c 'x = [bytearray(100000) for i in range(300)]; y = {i: str(i) * 50 for i in range(100000)}' &&
		has "$tmp/python.txt" '% +[0-9.]+ +[0-9.]+% (Py|_Py|py)[A-Za-z_]+' "python: top sites name CPython functions"
fi
if command -v sqlite3 >/dev/null; then
	{
		echo "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v INTEGER); BEGIN;"
		for i in $(seq 1 3000); do echo "INSERT INTO t VALUES($i, 'name$i$i$i', $((i % 97)));"; done
		echo "COMMIT; CREATE INDEX ti ON t(name);"
		echo "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000) SELECT count(*), length(group_concat(x)) FROM c;"
		echo "SELECT v, count(*) FROM t GROUP BY v ORDER BY 2 DESC LIMIT 2;"
	} >"$tmp/q.sql"
	prof_run sqlite sqlite3 "$tmp/s.db" ".read $tmp/q.sql" &&
		has "$tmp/sqlite.txt" '% +[0-9.]+ +[0-9.]+% sqlite3[A-Za-z_]+' "sqlite3: top sites name SQLite functions"
fi
if command -v make >/dev/null; then
	mkdir -p "$tmp/mk"
	printf 'V := $(foreach i,$(shell seq 1 3000),var_$(i)_value)\nall: $(foreach i,1 2 3 4 5 6 7 8,t$(i))\nt%%:\n\t@: $(V)\n' >"$tmp/mk/Makefile"
	prof_run make make -s -C "$tmp/mk" &&
		has "$tmp/make.txt" '% +[0-9.]+ +[0-9.]+% (xmalloc|xcalloc|xrealloc|xstrdup|[a-z_]*variable[a-z_]*|hash_[a-z_]+)$' "make: top sites name make's functions"
fi

# A dump: its top sites, an SVG and an HTML call graph, a comparison with itself.
dump=$(cat "$tmp/python.dump" 2>/dev/null || cat "$tmp/make.dump" 2>/dev/null)
if [ -n "$dump" ] && [ -f "$dump" ]; then
	"$cmd" prof --alloc "$dump" >"$tmp/dump.txt" 2>&1 || fail "prof DUMP failed"
	has "$tmp/dump.txt" '^Total: [0-9.]+ MB (allocated over the run|in use)' "prof DUMP: the total, naming its view"
	"$cmd" prof --svg "$tmp/g.svg" "$dump" >/dev/null 2>&1 || fail "prof --svg failed"
	has "$tmp/g.svg" '<svg' "prof --svg"
	"$cmd" prof --html "$tmp/g.html" "$dump" >/dev/null 2>&1 || fail "prof --html failed"
	has "$tmp/g.html" '<pre>Total: ' "prof --html: the table"
	has "$tmp/g.html" '<svg' "prof --html: the graph"
	"$cmd" prof --alloc --diff "$dump" "$dump" >"$tmp/diff.txt" 2>&1 || fail "prof --diff failed"
	has "$tmp/diff.txt" '^Total: 0.0 MB \(no difference\)' "prof --diff of a dump with itself"
else
	fail "no dump to read"
fi
"$cmd" prof --svg "$tmp/x.svg" /nonexistent.heap >"$tmp/bad.txt" 2>&1 && fail "prof of a missing dump succeeded"
has "$tmp/bad.txt" '^pcpmalloc: ' "a missing dump: one line"
finish
