/*
 * zone_purge.h - giving a zone's idle free memory back to the kernel (madvise), above the
 * buddy allocator (zone.h): the periodic purge of blocks that stayed free for half a decay
 * period, and the dirty watermark that bounds free-but-resident pages after a free (the
 * kswapd analogue).  The madvise calls run with the zone lock dropped.  Called by pcp, large,
 * trim and the periodic work; calls zone.c.
 */
#ifndef PCPM_ZONE_PURGE_H
#define PCPM_ZONE_PURGE_H

#include "zone.h"

/*
 * Purge: madvise(MADV_DONTNEED) free blocks that stayed free for at least age_ms
 * (0 = all), at most max_blocks madvise calls (0 = no limit) so the zone lock is never held
 * long.  zone_maybe_purge runs it from slow paths once per PCPMALLOC_DECAY_MS.
 */
size_t zone_purge(struct zone *z, uint64_t age_ms, unsigned max_blocks);
void zone_maybe_purge(struct zone *z, uint64_t now_ms);

/*
 * The dirty watermark: free-but-resident pages may not exceed max(PCPMALLOC_DIRTY_MIN_MB,
 * PCPMALLOC_DIRTY_PCT % of the pages in use); past it, the coldest dirty free blocks are
 * purged down to half the mark, like kswapd reclaiming from the low to the high watermark.
 * Bounds RSS when fragmentation keeps freed memory from being reused.  Called without the
 * lock, after a free; the madvise calls run with the lock dropped.
 */
void zone_balance_dirty(struct zone *z);

/* After a zone_free_* call (lock dropped): balances the dirty pages and wakes the periodic
 * worker, as the kernel's free path wakes kswapd.  Thread-safe. */
static inline void zone_free_done(struct zone *z)
{
	zone_balance_dirty(z);
	zone_note_free();
}

#endif
