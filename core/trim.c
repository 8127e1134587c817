/*
 * trim.c - whole-heap calls of the default functions: malloc_trim (every cache drained,
 * empty slabs freed, free memory purged) and mallinfo (the zones' and huge mappings' figures).
 * Calls tcache, slab, pcp, zone and huge.
 */
#include "alloc_default.h"
#include "init.h"

#include <string.h>

int dfl_trim(void)
{
	PCPM_INSIDE_BEGIN();
	tcache_flush_all(tcache_self());
	sheaf_flush_all();
	slab_shrink_all();
	pcp_drain_all();
	huge_drain_deferred(huge_free);
	huge_cache_drain();
	size_t purged = 0;
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++)
		purged += zone_purge(&pcpm_zones[n], 0, 0);
	PCPM_INSIDE_END();
	return purged > 0;
}

void pcpm_mallinfo(struct pcpm_mallinfo *mi)
{
	memset(mi, 0, sizeof(*mi));
	if (!pcpm_init_done())
		return;
	size_t cached = 0, managed = 0, freep = 0, nfree = 0;
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++) {
		struct zone *z = &pcpm_zones[n];
		uint64_t refills, refill_pages, count; /* pages parked on the pcps are free too */
		pcp_zone_stats(z, &refills, &refill_pages, &count);
		cached += count;
		managed += z->managed_pages << PAGE_SHIFT;
		freep += z->free_pages;
		for (int o = 0; o < NR_PAGE_ORDERS; o++)
			nfree += z->free_area[o].nr_free;
	}
	size_t freeb = MIN((freep + cached) << PAGE_SHIFT, managed);
	/* in use: bytes of live blocks - slab objects handed to the program by their class
	 * size (not those in thread caches), page runs by their pages (what is neither free nor
	 * a slab's) - not whole slab pages */
	size_t live, slab_bytes;
	/* flagged while cache locks are held: a handler that interrupts a wait for one (in
	 * libc, where the program counter does not tell) keeps to the no-wait paths */
	{
		PCPM_INSIDE_BEGIN();
		slab_usage(pcpm_nested(), &live, &slab_bytes);
		PCPM_INSIDE_END();
	}
	size_t in_caches = tcache_cached_bytes();
	live = live > in_caches ? live - in_caches : 0;
	size_t pages_used = managed - freeb;
	size_t runs = pages_used > slab_bytes ? pages_used - slab_bytes : 0;
	size_t used = MIN(runs + live, managed);
	mi->arena = managed;
	mi->ordblks = nfree;
	mi->uordblks = used;
	mi->fordblks = managed - used;
	size_t hcount, hbytes;
	{
		PCPM_INSIDE_BEGIN();
		huge_live_usage(pcpm_nested(), &hcount, &hbytes);
		PCPM_INSIDE_END();
	} /* a freed mapping in the cache is free */
	mi->hblks = hcount;
	mi->hblkhd = hbytes;
}
