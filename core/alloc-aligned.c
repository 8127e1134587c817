/*
 * alloc-aligned.c - the default mode's aligned allocation below the inline fast path
 * (pcpm_aligned_fast, api.h): a slab class whose objects are multiples of the alignment
 * (every object of a page-aligned slab is then aligned), else an aligned page run or huge
 * mapping.  Calls tcache, slab, large and the address-space reclaim.
 */
#include "alloc.h"
#include "alloc-aligned.h"
#include "large.h"
#include "vmstat.h"

#include <errno.h>

static void *aligned_alloc_core(size_t align, size_t size)
{
	if (size > PTRDIFF_MAX || align > PTRDIFF_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	size_t need = MAX(size, align);
	if (need <= SLAB_MAX_SIZE) {
		/* a class whose objects are multiples of align in a slab aligned to at least
		 * align has every object aligned */
		for (unsigned c = size_to_class(need); c < NR_SIZE_CLASSES; c++) {
			/* align is a power of two: a mask, not a division; the cache (set up at
			 * first use) only for a class that passes */
			if (pcpm_class_size[c] & (align - 1))
				continue;
			struct kmem_cache *s = kmem_cache_of(c);
			if (align <= (PAGE_SIZE << s->order)) {
				void *p = tcache_pop(c);
				if (!p)
					p = tcache_alloc_slow(c);
				if (!p)
					errno = ENOMEM;
				return p;
			}
		}
	}
	if (align > PCPM_USER_VA_BYTES || size > PCPM_USER_VA_BYTES - align) { /* no mapping fits */
		errno = ENOMEM;
		return NULL;
	}
	huge_drain_deferred(huge_free);
	for (bool retried = false;; retried = true) {
		bool run;
		void *p = large_alloc(MAX(size, SLAB_MAX_SIZE + 1), align, &run);
		if (p) {
			pcpm_count_malloc(run);
			pcpm_vmstat_maybe_run();
			return p;
		}
		if (retried || !pcpm_reclaim_address_space(size + align))
			break;
	}
	errno = ENOMEM;
	return NULL;
}

void *dfl_aligned_alloc(size_t align, size_t size)
{
	if (align <= 16)
		return dfl_malloc(size);
	int e = errno; /* a failed mapping before a success must not show (dfl_malloc_slow) */
	PCPM_INSIDE_BEGIN();
	void *p = unlikely(pcpm_nested()) ? dfl_malloc_nested(size, align)
					  : aligned_alloc_core(align, size);
	PCPM_INSIDE_END();
	if (likely(p))
		errno = e;
	return p;
}
