/*
 * slab_order.c - the size classes and each class's slab order (see slab_order.h; mm/slub.c's
 * calculate_order).  Calls topology (the CPU count).
 */
#include "slab_order.h"
#include "pcp.h"
#include "topology.h"

uint32_t slab_class_size(unsigned cls)
{
	if (cls >= SLAB_PAGED_FIRST)
		return SLAB_MAX_SIZE + SLAB_PAGED_STEP * (cls - SLAB_PAGED_FIRST + 1);
	if (cls < 8)
		return 16 * (cls + 1);
	unsigned k = 7 + (cls - 8) / 8; /* doubling 2^k .. 2^(k+1) */
	unsigned step = 1u << (k - 3);
	return (1u << k) + step * ((cls - 8) % 8 + 1);
}

unsigned size_to_class_slow(size_t n)
{
	if (n <= 128)
		return n ? (unsigned)((n - 1) / 16) : 0;
	if (n > SLAB_MAX_SIZE)
		return size_to_paged_class(n);
	unsigned k = 63 - (unsigned)__builtin_clzl(n - 1);
	return 8 + (k - 7) * 8 + (unsigned)((n - 1 - (1UL << k)) >> (k - 3));
}

static int fls_int(unsigned x)
{
	return x ? 32 - __builtin_clz(x) : 0;
}

/*
 * Classes above 8 KiB: the smallest order from 3 to max_order whose slab wastes at most 1/8
 * of itself, else the one that wastes the least.  Order 3 holds only two or three of these
 * objects and can waste a third of the slab (11 KiB: 2 in 32 KiB, 10 KiB left) - 0.9 MiB of
 * xthread-large's peak went to such tails; the paged classes would waste up to half (one
 * 20 KiB object in 32 KiB, the rounding they exist to avoid), so they may go up to
 * SLAB_MAX_ORDER, the 8-16 KiB classes to order 4 (11 KiB: 5 in 64 KiB).  Slabs above
 * order 3 come from the zone, not the pcp (as the kernel's above PAGE_ALLOC_COSTLY_ORDER).
 */
static unsigned paged_order(uint32_t size, unsigned max_order)
{
	unsigned best = PAGE_ALLOC_COSTLY_ORDER;
	size_t best_waste = (PAGE_SIZE << best) % size;
	for (unsigned o = PAGE_ALLOC_COSTLY_ORDER; o <= max_order; o++) {
		size_t slab = PAGE_SIZE << o, waste = slab % size;
		if (waste <= slab / 8)
			return o;
		/* waste / slab < best_waste / best slab, without division */
		if (waste * (PAGE_SIZE << best) < best_waste * slab) {
			best = o;
			best_waste = waste;
		}
	}
	return best;
}

/*
 * calculate_order(): the smallest order (<= 3) whose slab holds min_objects =
 * 4 * (fls(nr_cpus) + 1) objects with at most 1/16 of it wasted, relaxing to 1/8, 1/4, 1/2.
 */
unsigned calculate_order(uint32_t size)
{
	if (size > SLAB_MAX_SIZE)
		return paged_order(size, SLAB_MAX_ORDER);
	if (size > 8192)
		return paged_order(size, PAGE_ALLOC_COSTLY_ORDER + 1);
	unsigned min_objects = 4 * (unsigned)(fls_int((unsigned)pcpm_nr_online) + 1);
	for (unsigned frac = 16; frac >= 2; frac /= 2) {
		for (unsigned o = 0; o <= PAGE_ALLOC_COSTLY_ORDER; o++) {
			size_t slab = PAGE_SIZE << o;
			if (slab / size < min_objects && o < PAGE_ALLOC_COSTLY_ORDER)
				continue;
			if (slab / size == 0)
				continue;
			if (slab % size <= slab / frac)
				return o;
		}
	}
	return PAGE_ALLOC_COSTLY_ORDER;
}
