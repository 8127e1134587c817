#!/usr/bin/env bash
# gcc under pcpmalloc vs glibc: compile a generated multi-file C program (header, hand-written
# modules, and generated modules that give cc1 real work) and link it, with the driver, cc1, as,
# collect2 and ld all preloaded.  Both builds happen in the same directory, so the object files
# and the executable must be byte-identical; the program (run on glibc) must print the same.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
real_init "$@"

NGEN=4       # generated modules
NFUNC=150    # functions per generated module
[[ $REAL_SIZE == long ]] && NGEN=8 NFUNC=400

gen_sources() {
	cat >common.h <<'C'
#ifndef COMMON_H
#define COMMON_H
#include <stddef.h>
#include <stdint.h>

struct strbuf { char *buf; size_t len, cap; };
void sb_init(struct strbuf *sb);
void sb_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_release(struct strbuf *sb);

struct counter { const char *key; unsigned long count; };
struct table;
struct table *table_new(void);
void table_add(struct table *t, const char *key);
size_t table_items(struct table *t, struct counter **out);   /* sorted by key */
void table_free(struct table *t);

void merge_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

struct node { struct node *next; uint64_t value; };
struct node *list_build(uint64_t seed, size_t n);
struct node *list_reverse(struct node *head);
uint64_t list_checksum(const struct node *head);
void list_free(struct node *head);

uint64_t matrix_power_trace(unsigned dim, unsigned power, uint64_t seed);

uint64_t rng_next(uint64_t *state);
C
	for i in $(seq 1 "$NGEN"); do echo "uint64_t gen${i}_run(uint64_t x);"; done >>common.h
	echo '#endif' >>common.h

	cat >strbuf.c <<'C'
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "common.h"

void sb_init(struct strbuf *sb) { sb->buf = NULL; sb->len = sb->cap = 0; }

void sb_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = sb->cap - sb->len;
		va_start(ap, fmt);
		int n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			abort();
		if ((size_t)n < room) {
			sb->len += (size_t)n;
			return;
		}
		sb->cap = sb->cap * 2 + (size_t)n + 16;
		sb->buf = realloc(sb->buf, sb->cap);
		if (!sb->buf)
			abort();
	}
}

void sb_release(struct strbuf *sb) { free(sb->buf); sb_init(sb); }
C

	cat >table.c <<'C'
#include <stdlib.h>
#include <string.h>
#include "common.h"

struct table { struct counter *slots; size_t cap, used; };

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

struct table *table_new(void)
{
	struct table *t = calloc(1, sizeof(*t));
	t->cap = 16;
	t->slots = calloc(t->cap, sizeof(*t->slots));
	return t;
}

static void insert(struct counter *slots, size_t cap, const char *key, unsigned long count)
{
	size_t i = hash_str(key) & (cap - 1);
	while (slots[i].key) {
		if (!strcmp(slots[i].key, key)) {
			slots[i].count += count;
			return;
		}
		i = (i + 1) & (cap - 1);
	}
	slots[i].key = key;
	slots[i].count = count;
}

void table_add(struct table *t, const char *key)
{
	if ((t->used + 1) * 4 > t->cap * 3) {
		size_t ncap = t->cap * 2;
		struct counter *n = calloc(ncap, sizeof(*n));
		for (size_t i = 0; i < t->cap; i++)
			if (t->slots[i].key)
				insert(n, ncap, t->slots[i].key, t->slots[i].count);
		free(t->slots);
		t->slots = n;
		t->cap = ncap;
	}
	size_t i = hash_str(key) & (t->cap - 1);
	while (t->slots[i].key) {
		if (!strcmp(t->slots[i].key, key)) {
			t->slots[i].count++;
			return;
		}
		i = (i + 1) & (t->cap - 1);
	}
	t->slots[i].key = strdup(key);
	t->slots[i].count = 1;
	t->used++;
}

static int by_key(const void *a, const void *b)
{
	return strcmp(((const struct counter *)a)->key, ((const struct counter *)b)->key);
}

size_t table_items(struct table *t, struct counter **out)
{
	struct counter *v = malloc((t->used ? t->used : 1) * sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].key)
			v[n++] = t->slots[i];
	merge_sort(v, n, sizeof(*v), by_key);
	*out = v;
	return n;
}

void table_free(struct table *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free((void *)t->slots[i].key);
	free(t->slots);
	free(t);
}
C

	cat >sort.c <<'C'
#include <stdlib.h>
#include <string.h>
#include "common.h"

static void msort(char *a, char *tmp, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n < 2)
		return;
	size_t h = n / 2;
	msort(a, tmp, h, size, cmp);
	msort(a + h * size, tmp, n - h, size, cmp);
	size_t i = 0, j = h, k = 0;
	while (i < h && j < n) {
		if (cmp(a + j * size, a + i * size) < 0)
			memcpy(tmp + k++ * size, a + j++ * size, size);
		else
			memcpy(tmp + k++ * size, a + i++ * size, size);
	}
	while (i < h)
		memcpy(tmp + k++ * size, a + i++ * size, size);
	while (j < n)
		memcpy(tmp + k++ * size, a + j++ * size, size);
	memcpy(a, tmp, n * size);
}

void merge_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	char *tmp = malloc(n * size + 1);
	msort(base, tmp, n, size, cmp);
	free(tmp);
}
C

	cat >list.c <<'C'
#include <stdlib.h>
#include "common.h"

uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct node *list_build(uint64_t seed, size_t n)
{
	struct node *head = NULL;
	for (size_t i = 0; i < n; i++) {
		struct node *nd = malloc(sizeof(*nd));
		nd->value = rng_next(&seed);
		nd->next = head;
		head = nd;
	}
	return head;
}

struct node *list_reverse(struct node *head)
{
	struct node *prev = NULL;
	while (head) {
		struct node *next = head->next;
		head->next = prev;
		prev = head;
		head = next;
	}
	return prev;
}

uint64_t list_checksum(const struct node *head)
{
	uint64_t h = 0, i = 1;
	for (; head; head = head->next, i++)
		h = h * 31 + head->value * i;
	return h;
}

void list_free(struct node *head)
{
	while (head) {
		struct node *next = head->next;
		free(head);
		head = next;
	}
}
C

	cat >matrix.c <<'C'
#include <stdlib.h>
#include <string.h>
#include "common.h"

#define MOD 1000000007ull

static void mul(const uint64_t *a, const uint64_t *b, uint64_t *c, unsigned d)
{
	for (unsigned i = 0; i < d; i++)
		for (unsigned j = 0; j < d; j++) {
			uint64_t s = 0;
			for (unsigned k = 0; k < d; k++)
				s = (s + a[i * d + k] * b[k * d + j]) % MOD;
			c[i * d + j] = s;
		}
}

uint64_t matrix_power_trace(unsigned d, unsigned power, uint64_t seed)
{
	uint64_t *m = malloc(sizeof(uint64_t) * d * d), *r = calloc(d * d, sizeof(uint64_t));
	uint64_t *t = malloc(sizeof(uint64_t) * d * d);
	for (unsigned i = 0; i < d * d; i++)
		m[i] = rng_next(&seed) % 1000;
	for (unsigned i = 0; i < d; i++)
		r[i * d + i] = 1;
	while (power) {
		if (power & 1) {
			mul(r, m, t, d);
			memcpy(r, t, sizeof(uint64_t) * d * d);
		}
		mul(m, m, t, d);
		memcpy(m, t, sizeof(uint64_t) * d * d);
		power >>= 1;
	}
	uint64_t tr = 0;
	for (unsigned i = 0; i < d; i++)
		tr = (tr + r[i * d + i]) % MOD;
	free(m);
	free(r);
	free(t);
	return tr;
}
C

	# Generated modules: many small functions with switches, loops and string tables, so that
	# cc1 builds, optimises and frees a lot of IR.
	local g f
	for g in $(seq 1 "$NGEN"); do
		{
			echo '#include "common.h"'
			echo '#include <string.h>'
			for f in $(seq 1 "$NFUNC"); do
				cat <<C
static const char *const names_${g}_${f}[] = { "a${f}", "bb${g}", "ccc${f}${g}", "dddd" };
static uint64_t f_${g}_${f}(uint64_t x)
{
	uint64_t acc = x ^ ${f}u;
	for (unsigned i = 0; i < $((f % 7 + 3)); i++) {
		switch ((acc + i) % 5) {
		case 0: acc = acc * $((f * 2 + 1))u + ${g}u; break;
		case 1: acc ^= acc >> $((f % 13 + 1)); break;
		case 2: acc += strlen(names_${g}_${f}[i % 4]); break;
		case 3: acc = (acc << 3) | (acc >> 61); break;
		default: acc -= $((f * g))u;
		}
	}
	return acc;
}
C
			done
			echo "uint64_t gen${g}_run(uint64_t x)"
			echo '{'
			for f in $(seq 1 "$NFUNC"); do echo "	x = f_${g}_${f}(x);"; done
			echo '	return x;'
			echo '}'
		} >"gen$g.c"
	done

	{
		cat <<'C'
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include "common.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(void)
{
	uint64_t seed = 12345;
	struct table *t = table_new();
	char key[32];
	for (int i = 0; i < 200000; i++) {
		snprintf(key, sizeof(key), "k%" PRIu64, rng_next(&seed) % 5000);
		table_add(t, key);
	}
	struct counter *items;
	size_t n = table_items(t, &items);
	struct strbuf sb;
	sb_init(&sb);
	for (size_t i = 0; i < n; i += n / 10)
		sb_addf(&sb, "%s=%lu ", items[i].key, items[i].count);
	printf("table: %zu keys; %s\n", n, sb.buf);
	sb_release(&sb);
	free(items);
	table_free(t);

	uint64_t *v = malloc(100000 * sizeof(*v));
	for (int i = 0; i < 100000; i++)
		v[i] = rng_next(&seed);
	merge_sort(v, 100000, sizeof(*v), cmp_u64);
	int sorted = 1;
	for (int i = 1; i < 100000; i++)
		sorted &= v[i - 1] <= v[i];
	printf("sort: sorted=%d min=%" PRIu64 " median=%" PRIu64 "\n", sorted, v[0], v[50000]);
	free(v);

	struct node *l = list_reverse(list_build(7, 50000));
	printf("list: %" PRIu64 "\n", list_checksum(l));
	list_free(l);

	printf("matrix: %" PRIu64 "\n", matrix_power_trace(24, 1000, 99));
C
		for g in $(seq 1 "$NGEN"); do
			echo "	printf(\"gen$g: %\" PRIu64 \"\\n\", gen${g}_run($g));"
		done
		echo '	return 0;'
		echo '}'
	} >main.c
}

workload() {
	gen_sources
	local srcs=(main.c table.c strbuf.c sort.c list.c matrix.c gen*.c)
	# One driver, then a cc1 and an as per source file.
	run -p $((1 + 2 * ${#srcs[@]})) gcc-compile \
		gcc -std=gnu11 -O2 -g -Wall -Wextra -c "${srcs[@]}"
	# Driver, collect2, ld.
	run -p 3 gcc-link gcc -o prog ./*.o
	echo "== objects"
	sha256sum ./*.o prog
	echo "== program output"
	./prog
}
real_compare workload
