# toolslib.sh - sourced by the tests of the commands people run (test/tools/): a scratch folder
# $tmp removed at exit, fail/ok lines, has FILE REGEX WHAT (fails and shows FILE when the
# extended regular expression is not in it), and install_into DIR, which runs `meson install`
# of the build tree $build into DIR (DESTDIR) and sets $prefix to the installed prefix.
set -uo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
has() {
	grep -Eq -- "$2" "$1" && return 0
	fail "$3: no /$2/ in $(basename "$1"):"
	sed 's/^/    | /' "$1" | head -40
	return 1
}
finish() {
	[ "$fails" = 0 ] && echo "all passed" || echo "$fails check(s) failed"
	exit $((fails > 0))
}
install_into() {
	local dest=$1
	meson install -C "$build" --no-rebuild --quiet --destdir "$dest" >"$tmp/install.log" 2>&1 || {
		echo "FAIL: meson install --destdir $dest:"
		sed 's/^/    | /' "$tmp/install.log"
		exit 1
	}
	prefix=$dest$(meson introspect --buildoptions "$build" |
		python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
	[ -x "$prefix/bin/pcpmalloc" ] || { echo "FAIL: no $prefix/bin/pcpmalloc after meson install"; exit 1; }
}
