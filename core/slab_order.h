/*
 * slab_order.h - the size classes and the order of each class's slabs (slab_order.c;
 * mm/slub.c's calculate_order).  Pure functions of the class and the CPU count; thread-safe.
 */
#ifndef PCPM_SLAB_ORDER_H
#define PCPM_SLAB_ORDER_H

#include "os.h"

#define SLAB_MAX_SIZE 16384	   /* largest object of the fast paths' classes (size_to_class) */
/*
 * Paged classes: 20, 24, 28 and 32 KiB (SLAB_PAGED_STEP steps above SLAB_MAX_SIZE), served by
 * the slow paths only (their thread-cache capacity is 0), in slabs of order 3..SLAB_MAX_ORDER.
 * A power-of-two page block for a 17..32 KiB request wastes a quarter of it on average
 * (burst, xthread-large: most of their RSS above glibc's); a page-multiple class in a larger
 * slab wastes the step's rounding and the slab's tail.  The 32 KiB class is one order-3 block
 * per slab (no waste), as the page run it replaced, but its objects wait on the CPU sheaves
 * (sheaf.c) like the others instead of crossing the pcp and the zone lock (issue 14); without
 * sheaves (secure and memcheck mode, PCPMALLOC_SHEAVES=0) 28-32 KiB stay page runs
 * (pcpm_paged_max).  Above: page runs.
 */
#define SLAB_PAGED_MAX 32768
#define SLAB_PAGED_STEP 4096
#define SLAB_PAGED_FIRST 64 /* class index of the first paged class */
#define SLAB_MAX_ORDER 5    /* 128 KiB: object offsets stay below 2^17 (reciprocal) */
#define NR_SIZE_CLASSES (SLAB_PAGED_FIRST + (SLAB_PAGED_MAX - SLAB_MAX_SIZE) / SLAB_PAGED_STEP)
#define SMALL_LOOKUP_MAX 1024	   /* sizes served by the table lookup */
#define NR_SMALL_LOOKUP (SMALL_LOOKUP_MAX / 16 + 1)

/* Paged class of a request of SLAB_MAX_SIZE < n <= SLAB_PAGED_MAX bytes. */
static inline unsigned size_to_paged_class(size_t n)
{
	return SLAB_PAGED_FIRST + (unsigned)((n - SLAB_MAX_SIZE - 1) / SLAB_PAGED_STEP);
}

/* Object size (bytes, a multiple of 16) of class cls < NR_SIZE_CLASSES. */
uint32_t slab_class_size(unsigned cls);

/* The formula behind the lookup table, for any n <= SLAB_PAGED_MAX (tests use it). */
unsigned size_to_class_slow(size_t n);

/*
 * The slab order (pages = 2^order, 0..SLAB_MAX_ORDER) of objects of size bytes: up to 8 KiB
 * the kernel's calculate_order (min_objects from the online CPUs, so after the topology is
 * known), above it the order that wastes the least of the slab's tail (paged_order).
 */
unsigned calculate_order(uint32_t size);

#endif
