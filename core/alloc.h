/*
 * alloc.h - the default mode's malloc and calloc (alloc.c): the slow path below the inline
 * thread-cache pop, the signal-handler path, the address-space reclaim.  What api.c calls when
 * no front end is chosen, and what the front ends wrap.  Same contracts as api.h's pcpm_
 * functions (sizes in bytes, 16-byte alignment, NULL + ENOMEM), once the allocator has
 * started (pcpm_init); thread-safe.  Calls tcache, slab, large, huge, the early area and the
 * periodic work below them.  The other default functions: free.h, realloc.h,
 * alloc-aligned.h, trim.h.
 */
#ifndef PCPM_ALLOC_H
#define PCPM_ALLOC_H

#include "tcache.h"

struct pcpm_stats;

/* malloc's slow path: the thread cache's refill, paged classes, page runs, huge mappings,
 * the address-space reclaim and one retry; the early area while the allocator has not
 * started.  NULL + ENOMEM. */
void *dfl_malloc_slow(size_t n);
/* From a signal handler (kernel-pcp.md §12.2): a slab object when its cache lock is free
 * and a partial slab has room, else a mapping of its own.  align: power of two. */
void *dfl_malloc_nested(size_t n, size_t align);

/* Out of address space: what is free goes back (direct reclaim); true when some came back
 * and the caller may retry once.  Never from a signal handler. */
bool pcpm_reclaim_address_space(size_t n);
/* The reclaims run (as_reclaims) into s; thread-safe, a relaxed read. */
void pcpm_reclaim_stats_add(struct pcpm_stats *s);

/* Counts an allocation outside the fast path (a page run too when run). */
void pcpm_count_malloc(bool run);

/* calloc of n bytes (api.c checked nmemb * size for overflow). */
void *dfl_calloc(size_t n);
/* Zeroes the first n bytes of the fresh block p where they may not read as zero. */
void *dfl_calloc_clear(void *p, size_t n);

static inline __attribute__((always_inline)) void *dfl_malloc(size_t n)
{
	void *p = tcache_pop_size(n);
	if (likely(p))
		return p;
	return dfl_malloc_slow(n);
}

#endif
