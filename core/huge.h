/*
 * huge.h - blocks above HUGE_THRESHOLD (4 MiB, one MAX_PAGE_ORDER block): a mapping of their
 * own, registered in the arena layer's radix map (pcpm_region_of), with a small cache of
 * freed mappings that are reused, split, merged and gathered (mremap) without faults, and
 * purged by the periodic work.  The secure front end's variant of free moves a freed
 * mapping's pages away and keeps its old range in a quarantine (huge_quarantine.c).
 *
 * Lengths are bytes, multiples of PAGE_SIZE; every mapping starts on a HUGE_ALIGN (4 MiB)
 * boundary (or the caller's larger alignment).  Calls below: arena (radix map, region
 * structs), os (mmap, mremap, madvise).  Thread-safety: all functions are thread-safe (one
 * huge_lock for the cache); the _nested forms take trylocks only (signal handlers).
 */
#ifndef PCPM_HUGE_H
#define PCPM_HUGE_H

#include "arena.h"

#define HUGE_THRESHOLD (4UL << 20) /* above one MAX_PAGE_ORDER block: own mapping */
#define HUGE_ALIGN (4UL << 20)	   /* one granule per mapping start: no two share a granule */

enum { HUGE_LIVE = 0, HUGE_CACHED = 1, HUGE_DEFERRED = 2 };
#define huge_state(r) ((int)(uintptr_t)(r)->next_free)

/*
 * The user pointer of a huge mapping.  In memcheck mode it is stored with its top bit set
 * (not a pointer memcheck's leak check would follow), so that a leaked huge block shows as
 * "definitely lost", not as reachable from pcpmalloc's region table (huge_init).
 */
extern uintptr_t pcpm_huge_base_mask PCPM_HIDDEN;
static inline char *huge_base(const struct region *r)
{
	return (char *)((uintptr_t)r->base ^ pcpm_huge_base_mask);
}
static inline void huge_set_base(struct region *r, char *p)
{
	r->base = (char *)((uintptr_t)p ^ pcpm_huge_base_mask);
}
/* Of the n bytes at p (inside mapping r), how many from p on may be non-zero: the part of
 * r's dirty head (region.dirty) at and after p; 0 when p is past it.  For calloc's and
 * secure mode's clearing of a block handed out again. */
static inline size_t huge_dirty_bytes(const struct region *r, const char *p, size_t n)
{
	size_t at = (size_t)(p - huge_base(r));
	return r->dirty > at ? MIN(n, r->dirty - at) : 0;
}

/* Once at init: hide_bases is memcheck mode (see huge_base). */
void huge_init(bool hide_bases);

/* A mapping of len bytes (a page multiple), aligned to max(align, HUGE_ALIGN): from the
 * cache (best fit, split or shrunk; or gathered from several cached mappings) or fresh.
 * NULL with errno from mmap (ENOMEM) when neither works.  Frees nothing handlers deferred:
 * the front end drains them first, with its own free (huge_drain_deferred). */
void *huge_alloc(size_t len, size_t align);
/* From a signal handler: always fresh, trylocks only; NULL when a lock is taken. */
void *huge_alloc_nested(size_t len, size_t align);

/* Frees the live mapping r: into the cache, or unmapped (too large, cache full). */
void huge_free(struct region *r);
/* From a signal handler: unmapped at once when its radix entries can be cleared without
 * waiting (else deferred, as huge_defer); its struct freed with a trylock (else deferred). */
void huge_free_nested(struct region *r);
/* Deferred to a later call outside a handler, kept mapped (the secure front end's nested
 * free, which quarantines it then).  Lock-free. */
void huge_defer(struct region *r);
/* Frees what signal handlers deferred, with free_fn: huge_free in the default and memcheck
 * modes, the secure front end's huge_free_quarantined in secure mode (a mapping a handler
 * freed is quarantined like any other); cheap when nothing is.  Each front end calls it
 * before its large allocations, in its huge free and in malloc_trim: this layer cannot
 * know which free applies. */
void huge_drain_deferred(void (*free_fn)(struct region *r));
/* The free the periodic work drains deferred mappings with (default huge_free; the secure
 * front end sets huge_free_quarantined at start-up). */
void huge_deferred_free_set(void (*free_fn)(struct region *r));
/* The periodic work's drain, with that free (outside handlers; takes huge_lock). */
void huge_drain_deferred_periodic(void);
/* Is a deferred mapping waiting?  (racy: the periodic worker's "anything to do") */
bool huge_deferred_pending(void);

/* Grows or shrinks r to len bytes with mremap (4 MiB alignment kept); NULL when it cannot
 * (r unchanged: the caller copies).  errno is kept either way. */
void *huge_realloc(struct region *r, size_t len);
/* Shrinks the live or taken mapping r in place to len bytes (a multiple of PAGE_SIZE, less
 * than r->len): the pages after it are unmapped and its radix-map granules cleared (the
 * owner's call: nobody else frees r meanwhile). */
void huge_shrink(struct region *r, size_t len);

/* Unmaps every cached mapping; true when there was one (malloc_trim, address space
 * reclaim). */
bool huge_cache_drain(void);
/* Periodic work: cached mappings unused for half a decay period give their pages back. */
void huge_cache_decay(uint64_t now_ms);
/* Resident bytes in the cache, not yet purged (racy: the decay worker's "anything to do?"). */
size_t huge_cache_resident(void);
/* Mappings, live and cached: count and bytes (mallinfo; lock-free: signal handlers). */
void huge_usage(size_t *count, size_t *bytes);
/* The same without the freed mappings that sit in the cache (mallinfo: they are free);
 * nowait (a signal handler): the cache counts in when its lock is taken. */
void huge_live_usage(bool nowait, size_t *count, size_t *bytes);

/* Statistics: the one interface every layer offers stat.c. */
struct pcpm_stats;
void huge_stats_add(struct pcpm_stats *s);

/* fork: huge_lock (and the quarantine's) in the allocator's lock order. */
void huge_lock_all(void);
void huge_unlock_all(void);
void huge_reset_locks(void);

/* ---- used by the quarantine (huge_quarantine.c), the secure front end's huge free ---- */
/* Puts the free mapping r (dirty, freed_ms set) into the cache, merging neighbours. */
void huge_cache_put(struct region *r);
/* Takes the cached mappings whose range touches [base, base + len) off the cache, within
 * max_bytes in all (they stay HUGE_CACHED meanwhile); NULL for none. */
void huge_cache_take_neighbours(char *base, size_t len, size_t max_bytes, struct region **below,
				struct region **above);
/* Puts mappings taken with huge_cache_take_neighbours back (either may be NULL). */
void huge_cache_put_back(struct region *below, struct region *above);
/* Unmaps r and frees its struct. */
void huge_unmap(struct region *r);
/* Accounting of mappings that leave the cache's world without huge_unmap. */
void huge_account(long dcount, long dbytes);
#define HUGE_CACHE_MAX (64UL << 20)	/* larger mappings are unmapped at once */
#define HUGE_CACHE_BYTES (256UL << 20) /* resident bytes the cache may hold */

#endif
