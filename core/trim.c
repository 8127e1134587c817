/*
 * trim.c - whole-heap calls of the default functions: malloc_trim (every cache drained,
 * empty slabs freed, free memory purged) and mallinfo (one accounting of the heap: every
 * level's free and cached bytes).  Calls tcache, sheaf, slab, pcp, zone, huge and the early
 * area.
 */
#include "trim.h"
#include "zone_purge.h"
#include "huge.h"
#include "tcache.h"
#include "early.h"
#include "init.h"
#include "sheaf.h"

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

/*
 * One accounting of the heap (issue 26 item 4): a block handed to the program is in use, a
 * block cached at any level - a thread cache, a CPU sheaf, home chain or inbox, a barn, a
 * slab's free slots, a pcp list, the zone's free lists - is free.  arena: the zones'
 * committed pages and what the early area handed out; uordblks: slab objects by their class
 * size, page runs by their pages, live early blocks by their usable size (so it grows by at
 * least what the program took); fordblks: the rest of arena.  Huge mappings are hblks and
 * hblkhd (glibc counts its mmapped chunks there, not in uordblks); a freed one waiting in
 * the huge cache is free.  Racy sums of per-level counts: a snapshot.
 */
void pcpm_mallinfo(struct pcpm_mallinfo *mi)
{
	memset(mi, 0, sizeof(*mi));
	/* before the start (and after it: its blocks stay live) the early area's blocks */
	size_t early = pcpm_early_used();
	size_t early_live = MIN(pcpm_early_live_bytes(), early);
	mi->arena = early;
	mi->uordblks = early_live;
	mi->fordblks = early - early_live;
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
	/* slab objects not on their slab's free list, by their class size, less those cached
	 * above the slabs (thread caches, the per-CPU level) */
	size_t live, slab_bytes, in_caches;
	/* flagged while cache locks are held: a handler that interrupts a wait for one (in
	 * libc, where the program counter does not tell) keeps to the no-wait paths */
	{
		PCPM_INSIDE_BEGIN();
		slab_usage(pcpm_nested(), &live, &slab_bytes);
		in_caches = sheaf_cached_bytes(pcpm_nested());
		PCPM_INSIDE_END();
	}
	in_caches += tcache_cached_bytes();
	live = live > in_caches ? live - in_caches : 0;
	/* page runs: the pages that are neither free nor a slab's */
	size_t pages_used = managed - freeb;
	size_t runs = pages_used > slab_bytes ? pages_used - slab_bytes : 0;
	size_t used = MIN(runs + live, managed);
	mi->arena = managed + early;
	mi->ordblks = nfree;
	mi->uordblks = used + early_live;
	mi->fordblks = mi->arena - mi->uordblks;
	size_t hcount, hbytes;
	{
		PCPM_INSIDE_BEGIN();
		huge_live_usage(pcpm_nested(), &hcount, &hbytes);
		PCPM_INSIDE_END();
	} /* a freed mapping in the cache is free */
	mi->hblks = hcount;
	mi->hblkhd = hbytes;
}
