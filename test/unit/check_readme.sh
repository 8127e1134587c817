#!/usr/bin/env bash
# check_readme.sh - the README's tunables table must be exactly what the code's table prints.
set -euo pipefail
tool=$1 readme=$2
expected=$("$tool")
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
