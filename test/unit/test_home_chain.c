/*
 * test_home_chain.c - chains of objects on their way home (core/home_chain.c): a chain built
 * of carriers gives back every object once, whole or in parts (a carrier partly taken keeps
 * the rest); the carried objects are not written on the way (only the carriers are: one
 * carrier per 6 objects of 64 B, where a chain of one object per link wrote and read every
 * object's first word); the 16 B class, with no room for a count, is a chain of one per
 * link, and so is a class with a depot (its chains go there as they are); home_chain_has
 * finds every object and nothing else.
 */
#include "config.h"
#include "home_chain.h"
#include "topology.h"
#include "unit.h"

#include <string.h>

#define N 200

static void check_class(unsigned cls, unsigned carry)
{
	void *obj[N], *out[N];
	CHECK_EQ(pcpm_home_carry[cls], carry);
	for (unsigned got = 0, n; got < N; got += n)
		CHECK((n = slab_alloc_bulk(cls, N - got, N - got, &obj[got], 0)) > 0);
	size_t size = pcpm_class_size[cls];
	for (unsigned i = 0; i < N; i++) {
		memset(obj[i], 0x33, size);
		((uintptr_t *)obj[i])[1] = PCPM_FREE_KEY; /* as free marks it */
	}
	struct home_chain c = { 0 };
	for (unsigned i = 0; i < N; i++)
		home_chain_add(&c, cls, obj[i]);
	home_chain_close(&c, NULL);
	CHECK_EQ(c.n, N);
	/* carriers: one per carry + 1 objects; the others' bytes past the mark untouched */
	unsigned written = 0;
	for (unsigned i = 0; i < N; i++) {
		unsigned char *b = obj[i];
		bool same = ((uintptr_t *)b)[0] == 0x3333333333333333ULL;
		for (size_t k = 16; k < size && same; k++)
			same = b[k] == 0x33;
		written += !same;
	}
	CHECK_EQ(written, (N + carry) / (carry + 1));
	void *head = c.first;
	for (unsigned i = 0; i < N; i++)
		CHECK(home_chain_has(head, cls, obj[i]));
	CHECK(!home_chain_has(head, cls, (char *)obj[0] + size * 1000));
	/* taken in parts of 7: every object once */
	unsigned got = 0, n;
	while ((n = home_chain_take(&head, cls, &out[got], MIN(7u, N - got))) != 0)
		got += n;
	CHECK_EQ(got, N);
	CHECK(head == NULL);
	for (unsigned i = 0; i < N; i++) {
		unsigned seen = 0;
		for (unsigned k = 0; k < N; k++)
			seen += out[k] == obj[i];
		CHECK_EQ(seen, 1);
	}
	slab_free_bulk(cls, out, N);
}

int main(void)
{
	unit_slab_setup();
	home_chain_init();
	check_class(size_to_class(16), 0);
	check_class(size_to_class(32), 1);
	check_class(size_to_class(64), 5);
	check_class(size_to_class(256), 29);
	check_class(size_to_class(8192), 61);
	/* a class with a depot (machines of more than 4 CPUs) carries nothing: its home chains'
	 * surplus and other nodes' frees go to the depot as its plain chains */
	unsigned c64 = size_to_class(64);
	pcpm_depot_chunk[c64] = 8;
	home_chain_init();
	CHECK_EQ(pcpm_home_carry[c64], 0);
	CHECK_EQ(pcpm_home_carry[size_to_class(256)], 29);
	check_class(c64, 0);
	pcpm_depot_chunk[c64] = 0;
	printf("home_chain ok\n");
	return 0;
}
