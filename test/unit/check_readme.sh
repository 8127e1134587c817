#!/usr/bin/env bash
# check_readme.sh - the README's tunables table must be exactly what the code's table prints.
set -euo pipefail
# With --update as third argument it rewrites the README's table instead.
tool=$1 readme=$2
expected=$("$tool")
if [ "${3:-}" = --update ]; then
	python3 - "$readme" "$expected" <<'PY'
import sys
path, table = sys.argv[1], sys.argv[2].splitlines()
lines = open(path).read().split("\n")
start = lines.index(table[0])
end = start
while end < len(lines) and lines[end].startswith("|"):
	end += 1
lines[start:end] = table
open(path, "w").write("\n".join(lines))
PY
	exit 0
fi
if ! grep -qxF -- "$(echo "$expected" | head -1)" "$readme"; then
	echo "README.md has no tunables table header" >&2
	exit 1
fi
missing=0
while IFS= read -r line; do
	grep -qxF -- "$line" "$readme" || { echo "README.md lacks: $line" >&2; missing=1; }
done <<<"$expected"
n_readme=$(grep -c '^| `PCPMALLOC_' "$readme")
n_code=$(echo "$expected" | grep -c '^| `PCPMALLOC_')
[ "$n_readme" = "$n_code" ] || { echo "README.md lists $n_readme tunables, the code $n_code" >&2; missing=1; }
exit $missing
