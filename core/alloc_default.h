/*
 * alloc_default.h - the default mode's allocation functions (alloc.c, free.c, realloc.c,
 * alloc-aligned.c, trim.c): what api.c calls when no front end is chosen, and what the
 * memcheck front end wraps.  Same contracts as alloc.h's pcpm_ functions (sizes in bytes,
 * 16-byte alignment, NULL + ENOMEM / EINVAL, one-line abort on a bad pointer), once the
 * allocator has started (pcpm_init); thread-safe.  Calls tcache, slab, large, huge, the
 * early area and the periodic work below them.
 */
#ifndef PCPM_ALLOC_DEFAULT_H
#define PCPM_ALLOC_DEFAULT_H

#include "free_fast.h"
#include "huge.h"

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

/* The default free paths (free.c): every pointer that is not a slab object with room in the
 * thread cache; the key-word check; the classification of a non-slab pointer. */
void dfl_free_generic(void *p, const char *call);
void dfl_free_slab_checked(void *p, struct page *head, const char *call);
void dfl_free_slow(void *p, struct page *pg, const char *call);
/* Usable bytes of the live block p (not NULL); aborts naming call when p is no block. */
size_t dfl_usable_size(const void *p, const char *call);

/* Aborts: "pcpmalloc: CALL(): invalid pointer P" / "... double free P"; for a page that is no live block, a double
 * free when p is a page inside a free block, else an invalid pointer. */
void pcpm_bad_pointer(const char *call, const void *p) __attribute__((noreturn, cold));
void pcpm_double_free(const char *call, const void *p) __attribute__((noreturn, cold));
void pcpm_bad_page_pointer(const char *call, const void *p, struct page *pg)
	__attribute__((noreturn, cold));

/* calloc of n bytes (api.c checked nmemb * size for overflow). */
void *dfl_calloc(size_t n);
/* Zeroes the first n bytes of the fresh block p where they may not read as zero. */
void *dfl_calloc_clear(void *p, size_t n);
/* p != NULL, 0 < size <= PTRDIFF_MAX (api.c handles the other cases for every mode). */
void *dfl_realloc(void *p, size_t size);
/* align: a power of two >= 16. */
void *dfl_aligned_alloc(size_t align, size_t size);
int dfl_trim(void);
/* mallinfo(): bytes; racy sums, safe in signal handlers. */
struct pcpm_mallinfo {
	size_t arena, ordblks, hblks, hblkhd, uordblks, fordblks;
};
void pcpm_mallinfo(struct pcpm_mallinfo *mi);


static inline __attribute__((always_inline)) void *dfl_malloc(size_t n)
{
	void *p = tcache_pop_size(n);
	if (likely(p))
		return p;
	return dfl_malloc_slow(n);
}

static inline __attribute__((always_inline)) void dfl_free(void *p, const char *call)
{
	__pcpm_free_call(p, call, tcache_free_slow, dfl_free_slab_checked, dfl_free_generic);
}

#endif
