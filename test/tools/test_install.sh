#!/usr/bin/env bash
# test_install.sh - what `meson install` gives a user, installed into a scratch DESTDIR (so also
# checking that the installed commands find the installed library from where they are):
#   run        `pcpmalloc run -- python3 -c 'print(1)'` prints 1 under the installed library
#              (its statistics count the calls; the child processes keep it); pcpmalloc-ab
#              and its workloads run from the installation; the man page lists every variable
#   pkgconfig  a C program linked with `pkg-config --cflags --libs pcpmalloc` runs on
#              pcpmalloc without LD_PRELOAD
# Usage: test_install.sh run|pkgconfig BUILDDIR
mode=$1 build=$(realpath "$2")
. "$(dirname "$0")/toolslib.sh"
install_into "$tmp/dest"
lib=$(ls "$prefix"/lib*/libpcpmalloc.so.0 "$prefix"/lib/*/libpcpmalloc.so.0 2>/dev/null | head -1)
[ -n "$lib" ] || { echo "FAIL: no libpcpmalloc.so.0 under $prefix"; exit 1; }
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libpcpmalloc.so.0 ] && ok "SONAME $soname" || fail "SONAME '$soname', want libpcpmalloc.so.0"
py=/usr/bin/python3
[ -x $py ] || py=$(command -v python3)

case $mode in
run)
	unset LD_PRELOAD PCPMALLOC_STATS PCPMALLOC_STATS_FILE
	"$prefix/bin/pcpmalloc" run --stats=json -e "PCPMALLOC_STATS_FILE=$tmp/st.%p.json" -- \
		"$py" -c 'print(1)' >"$tmp/run.out" 2>"$tmp/run.err"
	rc=$?
	[ $rc = 0 ] || { fail "pcpmalloc run: exit $rc"; cat "$tmp/run.err"; }
	[ "$(cat "$tmp/run.out")" = 1 ] && ok "pcpmalloc run -- python3 -c 'print(1)' prints 1" ||
		fail "printed '$(cat "$tmp/run.out")', want 1"
	if grep -q warning "$tmp/run.err"; then fail "pcpmalloc run warned:"; cat "$tmp/run.err"; fi
	n=$(ls "$tmp"/st.*.json 2>/dev/null | wc -l)
	[ "$n" -ge 1 ] && ok "$n statistics file(s)" || fail "no statistics file written"
	"$prefix/bin/pcpmalloc" stats "$tmp"/st.*.json >"$tmp/stats.out" 2>&1 ||
		fail "pcpmalloc stats on the run's file failed"
	calls=$(awk '$1 == "malloc_calls" { print $2 }' "$tmp/stats.out")
	[ "${calls:-0}" -gt 100 ] && ok "the statistics show $calls malloc calls" ||
		fail "malloc_calls '${calls:-}' in the statistics, want > 100"
	# the installed library, by absolute path, in the program and in the processes it starts
	"$prefix/bin/pcpmalloc" run -- sh -c 'grep -c libpcpmalloc /proc/self/maps; echo "$LD_PRELOAD"' \
		>"$tmp/maps.out" 2>&1
	if [ "$(head -1 "$tmp/maps.out")" -gt 0 ] 2>/dev/null && has "$tmp/maps.out" "^$lib" "LD_PRELOAD"; then
		ok "a child process maps the installed library ($(sed -n 2p "$tmp/maps.out"))"
	else
		fail "child process: $(tr '\n' ' ' <"$tmp/maps.out")"
	fi
	# the A/B harness and its workloads from the installation
	"$prefix/bin/pcpmalloc-ab" --list >"$tmp/list.out" 2>&1
	has "$tmp/list.out" "pcpmalloc +$lib\$" "pcpmalloc-ab --list names the installed library" &&
		ok "pcpmalloc-ab --list: the installed library"
	(cd "$tmp" && "$prefix/bin/pcpmalloc-ab" -q -a glibc -a pcpmalloc --workload churn --quick \
		-n 1 -w 0 >"$tmp/ab.out" 2>"$tmp/ab.err")
	rc=$?
	[ $rc = 0 ] || { fail "installed pcpmalloc-ab --workload churn: exit $rc"; cat "$tmp/ab.err"; }
	has "$tmp/ab.out" "^pcpmalloc stats \(pcpmalloc.*malloc_calls [1-9]" "pcpmalloc-ab counted the calls" &&
		ok "installed pcpmalloc-ab ran wl-churn under the installed library"
	# the man page: installed, and every PCPMALLOC_* variable of the code's table in it
	man=$prefix/share/man/man1/pcpmalloc.1
	if [ -f "$man" ]; then
		missing=0
		for v in $("$build/core/pcpmalloc-tunables" | grep -o '^| `PCPMALLOC_[A-Z_]*' | tr -d '|` '); do
			grep -qxF ".B $v" "$man" ||
				{ fail "the man page lacks $v"; missing=1; }
		done
		[ $missing = 0 ] && ok "the man page lists the $("$build/core/pcpmalloc-tunables" | grep -c '^| `PCPMALLOC_') variables"
	else
		fail "no $man"
	fi
	;;
pkgconfig)
	unset LD_PRELOAD
	pcdir=$(dirname "$(find "$prefix" -name pcpmalloc.pc | head -1)")
	[ -f "$pcdir/pcpmalloc.pc" ] || { echo "FAIL: no pcpmalloc.pc installed"; exit 1; }
	pc() { PKG_CONFIG_PATH=$pcdir pkg-config --define-variable=prefix="$prefix" "$@"; }
	flags=$(pc --cflags --libs pcpmalloc) || { echo "FAIL: pkg-config --cflags --libs pcpmalloc"; exit 1; }
	libdir=$(pc --variable=libdir pcpmalloc)
	ok "pkg-config --cflags --libs pcpmalloc: $flags"
	cat >"$tmp/prog.c" <<'C'
/* linked with -lpcpmalloc, no LD_PRELOAD: the program's malloc must be pcpmalloc's */
#include <pcpmalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	long long before = pcpmalloc_stat("malloc_calls");
	void *p[1000];
	for (int i = 0; i < 1000; i++)
		p[i] = malloc(16 + i);
	long long after = pcpmalloc_stat("malloc_calls");
	for (int i = 0; i < 1000; i++)
		free(p[i]);
	char buf[256];
	pcpmalloc_stats_json(buf, sizeof(buf));
	printf("version %s\nmalloc_calls %lld\nprefix %.26s\n", pcpmalloc_version(), after - before,
	       buf);
	return after - before >= 1000 ? 0 : 1;
}
C
	# shellcheck disable=SC2086
	if cc -o "$tmp/prog" "$tmp/prog.c" $flags -Wl,-rpath,"$libdir" 2>"$tmp/cc.err"; then
		ok "compiled and linked with pkg-config's flags"
	else
		fail "cc with pkg-config's flags:"
		cat "$tmp/cc.err"
		finish
	fi
	readelf -d "$tmp/prog" | grep -q 'NEEDED.*\[libpcpmalloc.so.0\]' && ok "the program needs libpcpmalloc.so.0" ||
		fail "the program does not list libpcpmalloc.so.0 as NEEDED"
	env -u LD_PRELOAD "$tmp/prog" >"$tmp/prog.out" 2>&1
	rc=$?
	[ $rc = 0 ] && ok "without LD_PRELOAD, its 1000 mallocs went to pcpmalloc: $(tr '\n' ' ' <"$tmp/prog.out")" ||
		{ fail "the linked program: exit $rc"; cat "$tmp/prog.out"; }
	has "$tmp/prog.out" '^prefix \{"allocator": "pcpmalloc"' "pcpmalloc_stats_json"
	;;
*)
	echo "usage: $0 run|pkgconfig BUILDDIR" >&2
	exit 2
	;;
esac
finish
