#!/usr/bin/perl
# Allocation churn for the perl real-program test (test/real/run_perl.sh): hashes, arrays and
# strings built and torn down, regex matching and substitution over generated text, and the same
# work in interpreter threads that hand data to each other through queues.  Output is counts and
# checksums of seeded pseudo-random data (keys always sorted), so it is the same on every
# allocator.
#
# usage: churn.pl [SCALE]
use strict;
use warnings;
use threads;
use Thread::Queue;

my $scale = shift // 1;

# Small deterministic generator (xorshift32), independent of perl's rand().
sub rng_new { my $s = shift; return \$s }
sub rng_next {
	my $r = shift;
	my $x = $$r;
	$x ^= ($x << 13) & 0xffffffff;
	$x ^= $x >> 17;
	$x ^= ($x << 5) & 0xffffffff;
	$$r = $x;
	return $x;
}
sub word {
	my ($r, $max) = @_;
	my $len = 1 + rng_next($r) % ($max // 16);
	return join '', map { chr(97 + rng_next($r) % 26) } 1 .. $len;
}

# 32-bit FNV-1a, a checksum that does not depend on the allocator or on hash order.
sub fnv {
	my $h = 2166136261;
	for my $c (unpack 'C*', $_[0]) {
		$h = (($h ^ $c) * 16777619) % 4294967296;
	}
	return $h;
}

sub hash_churn {
	my ($r, $rounds) = @_;
	my %h;
	my $acc = 0;
	for my $round (1 .. $rounds) {
		for my $i (1 .. 3000) {
			my $k = word($r, 30) . ($i % 53);
			$h{$k} = { n => $i, s => $k x (1 + $i % 5), l => [ 1 .. $i % 9 ] };
		}
		my @keys = sort keys %h;
		delete @h{ @keys[ grep { $_ % 3 == 0 } 0 .. $#keys ] };
		%h = map { $_ => $h{$_} } grep { length($_) % 4 } keys %h if keys %h > 15000;
		$acc = fnv("$round:" . scalar(keys %h) . ":$acc");
	}
	my $text = join ';', map { "$_=$h{$_}{n}/" . length($h{$_}{s}) . "/" . scalar @{ $h{$_}{l} } }
	    sort keys %h;
	return (hash_keys => scalar(keys %h), hash_crc => fnv($text), hash_acc => $acc);
}

sub array_churn {
	my ($r, $rounds) = @_;
	my (@keep, $acc);
	$acc = 0;
	for my $round (1 .. $rounds) {
		my @a = map { rng_next($r) } 1 .. (100 + rng_next($r) % 20000);
		@a = sort { $a <=> $b } @a;
		my @mid = @a[ $#a / 4 .. 3 * $#a / 4 ];
		for (1 .. 300) {
			splice @mid, rng_next($r) % (@mid + 1), 0, rng_next($r);
			splice @mid, rng_next($r) % @mid, 1 if @mid;
		}
		push @mid, shift @mid for 1 .. 100;
		my @nested = map { [ ($_) x ($_ % 7) ] } @a[ 0 .. ($#a < 1999 ? $#a : 1999) ];
		my $n = 0;
		$n += @$_ for @nested;
		$acc = fnv(join ':', $round, scalar @a, scalar @mid, $n, $acc);
		push @keep, @a[ grep { $_ % 50 == 0 } 0 .. $#a ];
		splice @keep, 0, 500 if @keep > 5000;
	}
	return (array_acc => $acc, array_kept => scalar @keep, array_crc => fnv(join ',', @keep));
}

sub string_regex_churn {
	my ($r, $rounds) = @_;
	my ($acc, $total, $matches) = (0, 0, 0);
	for my $round (1 .. $rounds) {
		my $s = '';
		$s .= word($r) . $_ . '_' for 1 .. 4000;    # in-place growth
		my @parts = split /_/, $s;
		my $joined = join '|', map { uc } grep { length } @parts;
		(my $rep = $joined) =~ s/A/<a>/g;
		$rep =~ tr/|/\n/;
		my @found = $s =~ /([a-z]+)(\d+)_/g;
		$matches += @found;
		(my $sub = $s) =~ s/([a-z]+)(\d+)_/$2$1-/g;
		my @words = ($s =~ /\b([aeiou]\w{2,5})\d/g);
		my %seen;
		$seen{$_}++ for @words;
		my $fmt = join '', map { sprintf '%12s:%08x:%s', substr($_, 0, 5), fnv($_), reverse $_ }
		    @parts[ 0 .. 499 ];
		$total += length($rep) + length($sub) + length($fmt);
		$acc = fnv(join '#', $acc, $rep, $sub, $fmt,
			map { "$_$seen{$_}" } sort keys %seen);
	}
	return (str_acc => $acc, str_total => $total, regex_matches => $matches);
}

sub all_churn {
	my ($seed, $scale) = @_;
	my $r = rng_new($seed);
	my %out = (hash_churn($r, 5 * $scale), array_churn($r, 8 * $scale),
		string_regex_churn($r, 3 * $scale));
	return join ' ', map { "$_=$out{$_}" } sort keys %out;
}

print "main: ", all_churn(2463534242, $scale), "\n";

# Interpreter threads: each clones the interpreter (a burst of allocations), churns, and
# returns its result to the main thread.
my @workers = map { my $seed = 1000 + $_; threads->create(sub { all_churn($seed, $scale) }) } 1 .. 3;
my $i = 0;
print "thread ", $i++, ": ", $_->join, "\n" for @workers;

# Producer/consumer pairs: strings and arrays built in one thread are freed in another.
my @pairs;
for my $p (1 .. 2) {
	my $q = Thread::Queue->new;
	$q->limit = 100;
	my $prod = threads->create(sub {
		my $r = rng_new(5000 + $p);
		for my $n (1 .. 3000 * $scale) {
			if ($n % 2) {
				$q->enqueue(word($r, 2000));
			} else {
				$q->enqueue([ map { word($r, 20) } 1 .. rng_next($r) % 50 ]);
			}
		}
		$q->end;
		return 0;
	});
	my $cons = threads->create(sub {
		my ($n, $acc) = (0, 0);
		while (defined(my $item = $q->dequeue)) {
			$acc = fnv($acc . (ref $item ? join(',', @$item) : $item));
			$n++;
		}
		return "items=$n crc=$acc";
	});
	push @pairs, [ $prod, $cons ];
}
for my $p (0 .. $#pairs) {
	$pairs[$p][0]->join;
	print "handoff $p: ", $pairs[$p][1]->join, "\n";
}
print "done\n";
