# testlib.sh - sourced by the API shell tests (test_memcheck.sh, test_verbose.sh) after their
# arguments are read: a scratch folder $tmp, removed at exit, and fail MESSAGE, which prints
# "FAIL: MESSAGE" and counts the failed check in $fails (the test exits 1 at its end if any).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
