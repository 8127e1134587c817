/*
 * alloc.c - the default mode's malloc below the inline fast path (api.h): size dispatch
 * (thread cache and slab classes, paged classes, page runs, huge mappings), the signal-handler
 * path, the address-space reclaim and calloc.  Calls tcache, slab, large, huge, the early
 * area, the periodic work (vmstat.c) and topology discovery; called by api.c and the memcheck
 * front end.
 */
#include "alloc.h"
#include "early.h"
#include "init.h"
#include "large.h"
#include "huge_quarantine.h"
#include "topology.h"
#include "vg.h"
#include "vmstat.h"

#include <errno.h>
#include <string.h>

void pcpm_count_malloc(bool run)
{
	tcache_count(false);
	if (run)
		tcache_count_large();
}

void *dfl_malloc_nested(size_t n, size_t align)
{
	void *p = NULL;
	if (!pcpm_init_done()) {
		if (align <= 16)
			p = pcpm_init_reentered() ? pcpm_early_alloc_reentry(n) : pcpm_early_alloc(n);
		goto out;
	}
	if (n > PTRDIFF_MAX)
		goto out;
	if (align <= 16 && n <= SLAB_MAX_SIZE) {
		p = slab_alloc_nested(size_to_class(n));
		if (p) {
			tcache_count(false);
			goto out;
		}
	}
	p = huge_alloc_nested(ALIGN_UP(MAX(n, 1), PAGE_SIZE), align);
	if (p)
		tcache_count(false);
out:
	if (!p)
		errno = ENOMEM;
	return p;
}

static _Atomic uint64_t as_reclaims; /* reclaims run (the statistics' as_reclaims) */

void pcpm_reclaim_stats_add(struct pcpm_stats *s)
{
	s->as_reclaims += atomic_load_explicit(&as_reclaims, memory_order_relaxed);
}

/*
 * Could giving back what the allocator holds free make a request of n bytes fit?  What it
 * cannot give back - the pages of its zones that are not free and its live huge mappings -
 * stays mapped, so a request larger than the address-space limit (RLIMIT_AS, else the user
 * address space: pcpm_os_as_limit) less those fails whatever is flushed: 2^50 bytes up to
 * PTRDIFF_MAX always do.  Such a request used to flush every cache and retry (14 us against
 * glibc's 3.3; bench/failcost).  Racy reads: a snapshot is enough for a heuristic.
 */
static bool reclaim_could_help(size_t n)
{
	size_t limit = pcpm_os_as_limit();
	if (n >= limit)
		return false;
	size_t kept = 0, hcount;
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int i = 0; i < nr; i++) {
		struct zone *z = &pcpm_zones[i];
		size_t managed = __atomic_load_n(&z->managed_pages, __ATOMIC_RELAXED);
		size_t freep = __atomic_load_n(&z->free_pages, __ATOMIC_RELAXED);
		kept += (managed > freep ? managed - freep : 0) << PAGE_SHIFT;
	}
	size_t live_huge;
	huge_live_usage(false, &hcount, &live_huge);
	kept += live_huge;
	return kept < limit && n <= limit - kept;
}

/*
 * Out of address space (ENOMEM from mmap or from an arena's growth): the direct-reclaim step
 * of __alloc_pages_slowpath, for address space.  What is free goes back to the zones (this
 * thread's cache, empty slabs, the pcps), cached and quarantined huge mappings are unmapped,
 * and each zone unmaps the free ends of its arenas (zone_shrink_arenas).  True when address
 * space came back: the caller retries once.  False at once when no reclaim could make a
 * request of n bytes fit (reclaim_could_help).  Never from a signal handler (it takes every
 * lock).  errno kept.
 */
bool pcpm_reclaim_address_space(size_t n)
{
	if (pcpm_nested() || !pcpm_init_done())
		return false;
	int e = errno;
	if (!reclaim_could_help(n)) {
		errno = e;
		return false;
	}
	atomic_fetch_add_explicit(&as_reclaims, 1, memory_order_relaxed);
	if (!pcpm_as_limited && pcpm_os_as_limited())
		pcpm_as_limited = true; /* setrlimit after start-up */
	tcache_flush_all(tcache_self());
	sheaf_flush_all();
	slab_shrink_all();
	pcp_drain_all();
	huge_drain_deferred(huge_free);
	bool got = huge_cache_drain();
	got |= huge_quar_drain();
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++)
		got |= zone_shrink_arenas(&pcpm_zones[n]) > 0;
	errno = e;
	return got;
}

static void *__malloc_slow(size_t n)
{
	if (unlikely(pcpm_nested()))
		return dfl_malloc_nested(n, 0);
	tcache_ensure();
	pcpm_vmstat_maybe_start();
	void *p;
	for (bool retried = false;; retried = true) {
		if (n <= SLAB_MAX_SIZE) {
			p = tcache_alloc_slow(size_to_class(n));
		} else if (n <= pcpm_paged_max) {
			p = tcache_alloc_slow(size_to_paged_class(n));
		} else if (n > PCPM_USER_VA_BYTES) { /* no mapping can hold it: fail at once */
			p = NULL;
		} else {
			bool run;
			huge_drain_deferred(huge_free);
			p = large_alloc(n, 0, &run);
			if (p)
				pcpm_count_malloc(run);
		}
		/* the zone could not grow: address space held by free arena ends or cached
		 * mappings (ulimit -v) comes back, then one more try */
		if (likely(p) || retried || n > PCPM_USER_VA_BYTES || !pcpm_reclaim_address_space(n))
			break;
	}
	if (unlikely(!p)) {
		errno = ENOMEM;
		return NULL;
	}
	pcpm_vmstat_maybe_run();
	pcpm_topology_maybe_discover();
	return p;
}

void *dfl_malloc_slow(size_t n)
{
	/* a mapping that failed on the way to a success (a zone that could not grow before a
	 * reclaim and a retry) must not leave its ENOMEM: errno as the caller had it */
	int e = errno;
	PCPM_INSIDE_BEGIN();
	void *p = __malloc_slow(n);
	PCPM_INSIDE_END();
	if (likely(p))
		errno = e;
	return p;
}

void *dfl_calloc_clear(void *p, size_t n)
{
	if (n <= SLAB_MAX_SIZE) {
		memset(p, 0, n);
		return p;
	}
	struct page *pg = pcpm_page_of(p);
	if (pg && pg->state == PG_SLAB) { /* a paged class's object: slabs are reused */
		memset(p, 0, n);
		return p;
	}
	/* Page runs never written since they were committed or purged read as zero, and so
	 * do fresh or purged huge mappings; a reused resident one is cleared. */
	if (pg) {
		if (pg->flags & PG_DIRTY)
			memset(p, 0, n);
	} else if (!pcpm_is_early(p)) {
		struct region *r = pcpm_region_of(p);
		if (r) /* (only its dirty head: fresh pages after it stay untouched) */
			memset(p, 0, huge_dirty_bytes(r, p, n));
	}
	return p;
}

void *dfl_calloc(size_t n)
{
	void *p = dfl_malloc(n);
	if (unlikely(!p))
		return NULL;
	return dfl_calloc_clear(p, n);
}
