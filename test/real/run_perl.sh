#!/usr/bin/env bash
# perl under pcpmalloc vs glibc: hash, array and string churn with regex matching and
# substitution, in the main interpreter, in ithreads, and handed between threads (churn.pl).
# Debian's perl is built with the system malloc, so every SV body and string buffer goes
# through the allocator under test.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
real_init "$@"

SCALE=1
[[ $REAL_SIZE == long ]] && SCALE=4

workload() {
	run perl perl "$REAL_DIR/churn.pl" "$SCALE"
	echo "== one-liner: word frequencies of churn.pl itself"
	run perl-oneliner perl -lne '$c{lc $_}++ for /(\w+)/g;
		END { my @k = sort { $c{$b} <=> $c{$a} || $a cmp $b } keys %c; print "$_ $c{$_}" for @k[0 .. 19] }' \
		"$REAL_DIR/churn.pl"
}
real_compare workload
