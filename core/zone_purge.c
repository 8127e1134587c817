/*
 * zone_purge.c - purging a zone's idle free memory (see zone_purge.h): the periodic purge and
 * the dirty watermark.  Calls zone.c (the lock, the free lists) and os.c (madvise).
 */
#include "zone_purge.h"
#include "config.h"

/*
 * Purging isolates dirty blocks under the zone lock (off the free lists, like the kernel's
 * MIGRATE_ISOLATE), drops the lock for the madvise calls, and frees the blocks back clean,
 * so other CPUs never wait behind a system call.
 */
#define PURGE_BATCH 32

struct isolated {
	struct page *pg[PURGE_BATCH];
	unsigned order[PURGE_BATCH];
	unsigned n;
};

/* Takes up to PURGE_BATCH dirty blocks, coldest first (largest orders, list tails), that
 * are at least age_ms old, until dirty_pages <= target.  Lock held. */
static void __isolate_dirty(struct zone *z, struct isolated *iso, uint64_t age_ms, uint64_t now,
			    size_t target)
{
	iso->n = 0;
	for (int o = MAX_PAGE_ORDER; o >= 0; o--) {
		struct list_head *h = &z->free_area[o].free_list[FREE_DIRTY];
		while (!list_empty(h) && iso->n < PURGE_BATCH && z->dirty_pages > target) {
			struct page *pg = (struct page *)h->prev;
			if (age_ms && now - pg->freed_ms < age_ms)
				break; /* the rest of this list was freed later */
			__del_page_from_free_list(z, pg, (unsigned)o);
			iso->pg[iso->n] = pg;
			iso->order[iso->n++] = (unsigned)o;
		}
	}
}

/*
 * A free block's tail descriptors are never read (only heads carry state, and fresh
 * descriptors read as zero = PG_NONE), so purging a block of 128 pages or more also gives
 * back the descriptor pages after the one holding its head: 15 of the 16 pages a 4 MiB block
 * has (1.5% of the purged bytes, 16 MiB per GiB).  The descriptors of a naturally aligned
 * block of 2^order >= 64 pages start on a page boundary of the descriptor array.
 */
#define DESC_PER_PAGE (PAGE_SIZE / sizeof(struct page))
_Static_assert(PAGE_SIZE % sizeof(struct page) == 0, "descriptors tile pages");

static void purge_block_desc(struct page *pg, unsigned order)
{
	size_t n = 1UL << order;
	if (n >= 2 * DESC_PER_PAGE)
		(void)pcpm_os_purge(pg + DESC_PER_PAGE, (n - DESC_PER_PAGE) * sizeof(struct page));
}

/*
 * madvise the isolated blocks (no lock), then free them back clean.  A block whose madvise
 * failed (EAGAIN, mlock'ed pages) keeps its contents, so it goes back dirty - calloc must
 * not take it for zeroed - and *failed tells the caller to stop this pass rather than
 * isolate the same block again and again.
 */
static size_t purge_isolated(struct zone *z, struct isolated *iso, uint64_t now, bool *failed)
{
	size_t bytes = 0;
	for (unsigned i = 0; i < iso->n; i++) {
		if (!pcpm_os_purge(page_address(iso->pg[i]), PAGE_SIZE << iso->order[i])) {
			pcpm_verbose("purge: madvise(%p, %lu KiB, MADV_DONTNEED) failed: errno %d",
				     (void *)page_address(iso->pg[i]), (PAGE_SIZE << iso->order[i]) >> 10,
				     pcpm_purge_errno);
			*failed = true;
			continue;
		}
		purge_block_desc(iso->pg[i], iso->order[i]);
		iso->pg[i]->flags &= ~PG_DIRTY;
		bytes += PAGE_SIZE << iso->order[i];
	}
	zone_lock(z);
	for (unsigned i = 0; i < iso->n; i++) {
		z->pgfree_zone -= 1UL << iso->order[i]; /* not a free by the program */
		__free_one_page(z, iso->pg[i], iso->order[i], now);
	}
	z->purged_bytes += bytes;
	zone_unlock(z);
	return bytes;
}

size_t zone_purge(struct zone *z, uint64_t age_ms, unsigned max_blocks)
{
	uint64_t now = pcpm_now_ms();
	size_t bytes = 0;
	unsigned done = 0;
	struct isolated iso;
	bool failed = false;
	zone_lock(z);
	z->purge_runs++;
	for (;;) {
		__isolate_dirty(z, &iso, age_ms, now, 0);
		zone_unlock(z);
		if (!iso.n)
			break;
		bytes += purge_isolated(z, &iso, now, &failed);
		done += iso.n;
		if (failed || (max_blocks && done >= max_blocks))
			break;
		zone_lock(z);
	}
	return bytes;
}

void zone_maybe_purge(struct zone *z, uint64_t now_ms)
{
	/* Passes every half period purge what stayed free for half a period, so memory freed
	 * at any moment is back within one period of the last free (issue 6, target 6), with
	 * the background thread or at the first allocator activity after that. */
	uint64_t half = (uint64_t)pcpm_cfg.decay_ms / 2;
	uint64_t last = atomic_load_explicit(&z->last_purge_ms, memory_order_relaxed);
	if (now_ms - last < half)
		return;
	if (!atomic_compare_exchange_strong(&z->last_purge_ms, &last, now_ms))
		return;
	z->in_use_peak -= z->in_use_peak >> 4; /* racy update: a hint, not an invariant */
	/* 1024 madvise calls (4 GiB of 4 MiB blocks) bound one pass to a few milliseconds,
	 * none of it under the zone lock; what is left waits for the next pass.  Racy first
	 * look: with no dirty free page there is nothing to purge, and no lock is taken to
	 * find that out; a page freed meanwhile waits for the next pass, as one freed after */
	if (__atomic_load_n(&z->dirty_pages, __ATOMIC_RELAXED))
		zone_purge(z, half, 1024);
	/* under ulimit -v, free address space goes back too (glibc trims its heap top at once) */
	if (unlikely(pcpm_as_limited))
		zone_shrink_arenas(z);
}

/*
 * The mark follows the recent peak of memory in use, not the current use: right after a
 * burst is freed the program is likely to allocate as much again, and purging then would
 * only make it fault the pages back in.  The periodic purge returns what stays unused, and
 * the peak decays by 1/16 per pass (two passes a period), about as decay_pcp_high lowers high.
 */
static inline size_t dirty_high(struct zone *z)
{
	return MAX(((size_t)pcpm_cfg.dirty_min_mb << 20) >> PAGE_SHIFT,
		   z->in_use_peak * (size_t)pcpm_cfg.dirty_pct / 100);
}

void zone_balance_dirty(struct zone *z)
{
	/* racy first look: the common case costs two loads and no lock */
	if (likely(z->dirty_pages <= dirty_high(z)))
		return;
	uint64_t now = pcpm_now_ms();
	struct isolated iso;
	zone_lock(z);
	size_t target = dirty_high(z) / 2;
	if (z->dirty_pages > 2 * target)
		z->purge_runs++;
	for (;;) {
		if (z->dirty_pages <= target) {
			zone_unlock(z);
			return;
		}
		__isolate_dirty(z, &iso, 0, now, target);
		zone_unlock(z);
		if (!iso.n)
			return;
		bool failed = false;
		purge_isolated(z, &iso, now, &failed);
		if (failed)
			return;
		zone_lock(z);
	}
}

