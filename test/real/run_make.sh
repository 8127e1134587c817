#!/usr/bin/env bash
# make -j2 under pcpmalloc vs glibc: a generated project of 40 C files, a header and a Makefile
# with pattern rules and automatic dependencies, built with two jobs; make, every gcc driver,
# cc1, as, collect2 and ld inherit the preload.  Both builds happen in the same directory, so
# objects and executable must be byte-identical.  Then a no-op make and an incremental rebuild.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
real_init "$@"

NMOD=40     # source files besides main.c
NFUNC=24    # functions per file
[[ $REAL_SIZE == long ]] && NMOD=120

gen_project() {
	local i j
	{
		echo '#include <stdint.h>'
		for i in $(seq -w 1 "$NMOD"); do echo "uint64_t mod${i}_run(uint64_t seed);"; done
	} >mods.h
	for i in $(seq -w 1 "$NMOD"); do
		{
			cat <<C
#include <stdlib.h>
#include <string.h>
#include "mods.h"

struct rec_$i { uint64_t key; char name[$((10#$i % 17 + 8))]; struct rec_$i *next; };

static uint64_t step_$i(uint64_t x) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x; }

C
			for j in $(seq 1 "$NFUNC"); do
				cat <<C
static uint64_t work_${i}_$j(uint64_t *s)
{
	struct rec_$i *head = NULL;
	uint64_t sum = 0;
	for (int n = 0; n < $((10#$i * 10 + j * 100)); n++) {
		struct rec_$i *r = malloc(sizeof(*r));
		r->key = step_$i(*s = step_$i(*s)) % $((j * 1000 + 10#$i));
		memset(r->name, 'a' + (int)(r->key % 26), sizeof(r->name) - 1);
		r->name[sizeof(r->name) - 1] = 0;
		r->next = head;
		head = r;
	}
	while (head) {
		struct rec_$i *next = head->next;
		sum = sum * $((j * 2 + 1)) + head->key + strlen(head->name);
		free(head);
		head = next;
	}
	return sum;
}

C
			done
			echo "uint64_t mod${i}_run(uint64_t seed)"
			echo "{"
			echo "	uint64_t s = seed + $((10#$i)), r = 0;"
			for j in $(seq 1 "$NFUNC"); do echo "	r ^= work_${i}_$j(&s) << $j;"; done
			echo "	return r;"
			echo "}"
		} >"mod$i.c"
	done
	{
		echo '#include <inttypes.h>'
		echo '#include <stdio.h>'
		echo '#include "mods.h"'
		echo 'int main(void)'
		echo '{'
		echo '	uint64_t all = 0;'
		for i in $(seq -w 1 "$NMOD"); do
			echo "	uint64_t r$i = mod${i}_run($((10#$i * 7919)));"
			echo "	printf(\"mod$i %016\" PRIx64 \"\\n\", r$i);"
			echo "	all ^= r$i;"
		done
		echo '	printf("all %016" PRIx64 "\n", all);'
		echo '	return 0;'
		echo '}'
	} >main.c
	cat >Makefile <<'MK'
CC = gcc
CFLAGS = -std=gnu11 -O2 -g -Wall -MMD -MP
SRCS := $(sort $(wildcard *.c))
OBJS := $(patsubst %.c,%.o,$(SRCS))

all: prog

prog: $(OBJS)
	$(CC) -o $@ $(OBJS)

%.o: %.c
	$(CC) $(CFLAGS) -c -o $@ $<

-include $(OBJS:.o=.d)
MK
}

workload() {
	gen_project
	# make, and for every source file a gcc driver, cc1 and as; then the link.
	run -p $((1 + 3 * (NMOD + 1))) make make -j2 >/dev/null
	echo "== objects"
	sha256sum ./*.o prog
	echo "== program output"
	./prog
	echo "== make again (nothing to do)"
	run make-noop make -j2
	echo "== incremental rebuild of mod03"
	touch -d '2000-01-01 00:00:00' mod03.o
	run make-rebuild make -j2
	sha256sum mod03.o prog
}
real_compare workload
