/*
 * home_chain.c - chains of free objects on their way home, made of carriers (see
 * home_chain.h).  Calls depot (its chain check: depot_check), slab (slab_free_bulk) and
 * arena (pcpm_page_of).
 */
#include "home_chain.h"

/* The most pointers a carrier holds: 64 words, 512 bytes of a large object (the owner reads
 * them in order: adjacent lines) */
#define CARRY_MAX 61

uint8_t pcpm_home_carry[NR_SIZE_CLASSES] PCPM_READ_MOSTLY;

void home_chain_init(void)
{
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		uint32_t words = pcpm_class_size[c] / sizeof(uintptr_t);
		/* a class with a depot: a home chain's surplus and another node's frees go there
		 * as its plain chains */
		pcpm_home_carry[c] = words > 3 && !pcpm_depot_chunk[c]
					     ? (uint8_t)MIN(words - 3, (uint32_t)CARRY_MAX)
					     : 0;
	}
}


/* The count of carrier h, checked (a write after free may have changed it). */
static inline unsigned carried(const uintptr_t *h, unsigned cls)
{
	unsigned carry = pcpm_home_carry[cls];
	if (!carry)
		return 0;
	if (unlikely(h[2] > carry))
		pcpm_freelist_corrupt("malloc", h);
	return (unsigned)h[2];
}

unsigned home_chain_take(void **head, unsigned cls, void **out, unsigned max)
{
	uintptr_t *h = *head;
	unsigned n = 0;
	while (h && n < max) {
		depot_check(h, cls);
		unsigned k = carried(h, cls);
		while (k && n < max) {
			void *o = fl_decode(&h[3 + --k], "malloc");
			depot_check(o, cls);
			out[n++] = o;
		}
		if (pcpm_home_carry[cls])
			h[2] = k;
		if (n == max)
			break; /* h stays the head: with what it still carries, and itself */
		out[n++] = h;
		h = fl_decode(h, "malloc");
	}
	*head = h;
	return n;
}

bool home_chain_has(void *head, unsigned cls, const void *p)
{
	for (uintptr_t *h = head; h; h = fl_decode(h, "malloc")) {
		depot_check(h, cls);
		if (h == p)
			return true;
		for (unsigned k = carried(h, cls); k; k--)
			if (fl_decode(&h[3 + k - 1], "malloc") == p)
				return true;
	}
	return false;
}

uint64_t home_chain_release(unsigned cls, void *chain)
{
	void *buf[32];
	uint64_t n = 0;
	unsigned nbuf;
	while ((nbuf = home_chain_take(&chain, cls, buf, 32)) != 0) {
		slab_free_bulk(cls, buf, nbuf);
		n += nbuf;
	}
	return n;
}
