/*
 * zone.h - the buddy allocator (mm/page_alloc.c: __rmqueue_smallest, expand,
 * __free_one_page, rmqueue_bulk, free_pcppages_bulk's zone half).
 *
 * free_area[0..MAX_PAGE_ORDER] hold free blocks of 2^order 4 KiB pages, naturally aligned
 * inside their arena.  One zone per NUMA node; the zone lock (a futex mutex) protects the
 * free lists, every PG_BUDDY descriptor and the counters.  Functions prefixed "__" expect
 * the caller to hold the lock.  The zone grows by committing arena chunks (the memory hotplug
 * analogue: zone_grow.c commits with the lock dropped, zone.c publishes under it) and gives
 * idle free memory back with madvise (purge).
 */
#ifndef PCPM_ZONE_H
#define PCPM_ZONE_H

#include "arena.h"
#include "lockstat.h"
#include "zone_grow.h"

#define MAX_PAGE_ORDER 10 /* 4 MiB blocks */
#define NR_PAGE_ORDERS (MAX_PAGE_ORDER + 1)
/* The first MAX_PAGE_ORDER block of a zone goes to its buddy as an order-ZONE_YOUNG_ORDER
 * block and then the buddies of it, each when needed (__zone_grow in zone.c). */
#define ZONE_YOUNG_ORDER 6
/* At most this many MAX_PAGE_ORDER blocks a grower takes from a committed chunk at once
 * (16 MiB: 64 page faults of descriptors, no lock held; __zone_grow), and at most half of
 * what is left: each piece costs its grower one more zone lock acquisition (publishing it),
 * and one block per piece added 4 per 16 MiB of growth. */
#define ZONE_GROW_PIECE 4UL

/*
 * Free blocks of one order, on two lists by residency (PG_DIRTY): allocation takes resident
 * ("dirty") blocks first, as jemalloc reuses dirty extents before clean ones, so freed memory
 * is reused while its pages are still mapped and memory the kernel took back (or never gave)
 * is touched last.  The kernel keeps one list per migratetype here; we key by residency.
 */
enum { FREE_CLEAN = 0, FREE_DIRTY = 1 };
struct free_area {
	struct list_head free_list[2]; /* [FREE_CLEAN], [FREE_DIRTY]; LIFO */
	size_t nr_free;		       /* blocks on both lists */
};

struct per_cpu_pages;

/*
 * One zone per NUMA node (pglist_data + its one zone).  Fields after the lock are written
 * under it, except the NUMA identity (node, os_node, bind, per_cpu_pageset), which is set
 * once by pcpm_numa_setup() before the zone is published through pcpm_nr_zones.
 */
/* The largest block order a zone with far guards forms: 1 MiB, the stretch between guards. */
#define ZONE_FAR_GUARD_ORDER 8

struct zone {
	/* read-mostly: every pcp operation reads per_cpu_pageset, so the lock (which every
	 * CPU's refills and drains write) starts the next cache line */
	int node;	     /* logical node index (hwloc), == index in pcpm_zones */
	int os_node;	     /* the kernel's node number, for mbind */
	int bind;	     /* NUMA_BIND_* policy applied to each new arena, or -1: none */
	size_t max_pages;    /* cap on managed_pages (0: none); tests use it to exhaust a zone */
	/* far guards (secure mode, PCPMALLOC_SECURE_FAR_GUARD): a MAX_PAGE_ORDER block split
	 * for blocks of 1 MiB or less keeps only its first and third MiB, the second and fourth
	 * become guard pages for good, so a write 1 MiB past any such block faults; blocks of
	 * 2-4 MiB (page runs with guard pages of their own) come from unguarded blocks.  Set at
	 * init, read-only after. */
	bool far_guard;
	struct per_cpu_pages *per_cpu_pageset; /* pcpm_nr_cpus pcps caching this zone's pages */
	pcpm_lock_t lock PCPM_CACHELINE_ALIGNED;
	struct lock_stat ls; /* the lock profile: zone_lock* in the statistics */
	struct free_area free_area[NR_PAGE_ORDERS];
	size_t managed_pages;	/* pages committed into this zone and given to its buddy */
	/* The first block's pages not yet given to the buddy (deferred_grow_zone): from
	 * young + young_off to the end of that MAX_PAGE_ORDER block; off 0: none; young_head:
	 * its first piece is not taken yet.  Written under the zone lock. */
	struct page *young;
	struct arena *young_arena;
	size_t young_off;
	bool young_head;
	/* Committed blocks no grower has taken yet: [grow_next, grow_end) of grow_arena, whole
	 * MAX_PAGE_ORDER blocks, their descriptors untouched (state PG_NONE).  A grower takes
	 * one block under the zone lock, faults its descriptors in with no lock held and
	 * publishes it under the zone lock again (__zone_grow), so growers never wait for one
	 * another's page faults.  Set and taken under the zone lock. */
	struct page *grow_next, *grow_end;
	struct arena *grow_arena;
	size_t grow_chunk;	/* pages of the last chunk committed (ZONE_GROW_AHEAD_MIN) */
	/* a chunk committed ahead (__zone_grow), taken once [grow_next, grow_end) is empty */
	struct page *ahead_first;
	size_t ahead_pages;
	struct arena *ahead_arena;
	size_t free_pages;	/* pages on the free lists */
	size_t dirty_pages;	/* of those, pages written since committed or last purged */
	size_t in_use_peak;	/* recent peak of pages in use: decays by 1/8 per period */
	size_t in_use_max;	/* highest pages in use ever (stats: zone_used_peak) */
	_Atomic uint64_t last_purge_ms;
	/* under an address-space limit (pcpm_as_limited): a whole free MAX_PAGE_ORDER block
	 * formed, zone_unlock unmaps the free ends of the arenas (under lock) */
	bool shrink_pending;
	/* page runs freed by signal handlers (zone_free_run_nested), linked through lru.next:
	 * the trylock_free_pages analogue, drained by the next zone_lock() holder */
	_Atomic(struct page *) deferred;
	/* counters, under lock */
	uint64_t pgalloc_zone, pgfree_zone, purge_runs, purged_bytes, zone_grow;
	/* zonelist fallback, counted without a lock (rare): numa_miss = blocks this zone
	 * served for a CPU of another node, numa_foreign = blocks meant for this zone that
	 * another zone served (the kernel's NUMA_MISS / NUMA_FOREIGN) */
	_Atomic uint64_t numa_miss, numa_foreign;
	/* growth: who commits now, who waits for it (zone_grow.h) */
	struct zone_grower grower PCPM_CACHELINE_ALIGNED;
} __attribute__((aligned(64)));

/*
 * MAX_NUMNODES zones exist statically; pcpm_nr_zones of them are in use (1 until the
 * topology has been discovered and found several nodes; only ever grows).  Readers load it
 * with acquire: a zone counted there has its pcps and identity published.
 */
#define MAX_NUMNODES 64
extern struct zone pcpm_zones[MAX_NUMNODES];
extern _Atomic int pcpm_nr_zones;
#define pcpm_zone (pcpm_zones[0]) /* node 0's zone: the only one on a single-node machine */

void pcpm_zone_init(struct zone *z);

/* The zone a page belongs to: its arena's node (page_to_nid + page_zone). */
static inline struct zone *page_zone(struct page *pg)
{
	return &pcpm_zones[arena_of_page(pg)->node];
}

/* Serialises zone bring-up (pcpm_numa_setup) against fork; taken before any pcp lock. */
extern pcpm_lock_t pcpm_zones_lock;

/* Lock with the lock profile (zone_lock, _contended, _wait_ns, _hold_ns, _busiest). */
void zone_lock(struct zone *z);
void __zone_shrink_pending(struct zone *z);
static inline void zone_unlock(struct zone *z)
{
	if (unlikely(z->shrink_pending))
		__zone_shrink_pending(z);
	lockstat_unlock(&z->lock, &z->ls);
}

/* One block of 2^order pages from the free lists, or NULL when they have none (the zone is
 * not grown: the callers below grow it with the lock dropped).  Lock held. */
struct page *__rmqueue(struct zone *z, unsigned order);

/*
 * Growth (the kernel's memory hotplug and deferred struct page init, kernel-pcp.md §12.1),
 * with the zone lock held on entry and on return, in two steps, each dropping the zone lock:
 *  - a committed block nobody took yet (or the young block's next piece) is taken under the
 *    zone lock; its descriptors are faulted in with no lock held (as deferred_init_memmap's
 *    threads initialise the memmap in parallel) and it is published on the free lists under
 *    the zone lock: any number of growers do this at once;
 *  - when no block is left, the grower marks the zone committing (under the zone lock),
 *    commits a chunk with no lock held (zone_grow.c: the system calls, no first touch) and
 *    hands it to the zone as blocks to take under the zone lock; a grower that finds a
 *    commit running sleeps until it is published (zone_grower.waits) and takes a block of
 *    it.  The grower that takes a piece of a large chunk and leaves at most ZONE_GROW_PIECE
 *    blocks commits the next chunk ahead, so that the growers after it find blocks.
 * True when the caller should look at the free lists again, false when the zone cannot grow
 * (max_pages, address space or memory exhausted).
 */
bool __zone_grow(struct zone *z);

/* Test hook (NULL in the library): called by __zone_grow with the zone lock free, before
 * it sleeps on a running commit or starts its own (ZONE_GROW_WAIT), before it commits
 * (ZONE_GROW_COMMIT), and
 * before it faults in the descriptors of the block it took (ZONE_GROW_TOUCH: no lock held). */
enum { ZONE_GROW_WAIT, ZONE_GROW_COMMIT, ZONE_GROW_TOUCH };
extern void (*pcpm_zone_grow_hook)(struct zone *z, int stage);
/* del_page_from_free_list: takes a free block off its list (state PG_NONE: the caller's
 * now; pg->flags kept).  Lock held. */
static inline void __del_page_from_free_list(struct zone *z, struct page *pg, unsigned order)
{
	list_del(&pg->lru);
	z->free_area[order].nr_free--;
	z->free_pages -= 1UL << order;
	if (pg->flags & PG_DIRTY)
		z->dirty_pages -= 1UL << order;
	pg->state = PG_NONE;
}

/* Frees a block and merges it with its buddies; pg->flags (PG_DIRTY) say whether it was
 * written.  Lock held. */
void __free_one_page(struct zone *z, struct page *pg, unsigned order, uint64_t now_ms);

/*
 * rmqueue_bulk: up to count blocks of 2^order pages appended to the tail of list (state
 * PG_PCP) under one lock hold.  Returns the number of blocks taken.
 */
int rmqueue_bulk(struct zone *z, unsigned order, int count, struct list_head *list);

/* The pcp-bypassing paths (rmqueue_buddy / free_one_page): one block, lock taken inside. */
struct page *zone_alloc_pages(struct zone *z, unsigned order);
void zone_free_pages(struct zone *z, struct page *pg, unsigned order);

/*
 * The same for several blocks in one zone lock hold (the kernel's alloc_pages_bulk with a
 * page array, and free_pages_bulk): for callers that bypass the pcp, such as slabs of
 * orders 4-5.  zone_alloc_bulk puts up to count blocks of 2^order pages into pages[]
 * (state PG_NONE: the caller's) and returns how many, fewer only when memory is exhausted;
 * the zone grows with the lock dropped when needed.  zone_free_bulk gives count blocks back
 * (written: PG_DIRTY).  Take the lock inside.  After any of the zone_free_* calls the caller
 * balances the dirty pages and wakes the purge (zone_purge.h: zone_free_done).
 */
int zone_alloc_bulk(struct zone *z, unsigned order, int count, struct page **pages);
void zone_free_bulk(struct zone *z, unsigned order, int count, struct page **pages);

/*
 * Page runs for large allocations (alloc_pages_exact): npages pages starting at a block
 * aligned to 2^align_order pages; the unused tail of the block goes back at once.
 * zone_extend_run grows a run in place when the pages after it are free.
 */
struct page *zone_alloc_run(struct zone *z, size_t npages, unsigned align_order);
void zone_free_run(struct zone *z, struct page *pg, size_t npages);
/* From a signal handler: never takes the lock; the run (npages in pg->npages) is pushed
 * onto z->deferred and freed by the next zone_lock() holder. */
void zone_free_run_nested(struct zone *z, struct page *pg);
bool zone_extend_run(struct zone *z, struct page *pg, size_t old_pages, size_t new_pages);


/*
 * Under an address-space limit (ulimit -v) a freed arena still counts in full: this unmaps
 * each of the zone's arenas from its last page in use to the end of its reservation (whole
 * free MAX_PAGE_ORDER blocks only; pcpm_arena_shrink), so that mmap - a big malloc, another
 * library, a thread stack - gets the space back, as glibc's heap trim gives it.  The zone
 * grows such an arena again in place before it opens a new one.  Returns the bytes unmapped.
 * Takes the zone lock.
 */
size_t zone_shrink_arenas(struct zone *z);
/* Under ulimit -v (pcpm_as_limited) this also happens at once, at the zone_unlock after a
 * free that made a whole MAX_PAGE_ORDER block (glibc trims its heap top on free). */

static inline int ilog2_ceil(size_t n)
{
	return n <= 1 ? 0 : 64 - __builtin_clzl(n - 1);
}

/*
 * The background worker (vmstat.c, PCPMALLOC_DECAY_THREAD=1) sleeps on this word (a futex)
 * while there is nothing to decay or purge; 1 while it sleeps.  Free paths that make memory
 * free call zone_note_free(), which wakes it: one relaxed load when nobody sleeps (the front
 * ends' huge frees too: the huge layer, below the zone, cannot).
 */
extern _Atomic int pcpm_zone_free_waiter PCPM_HIDDEN;
void zone_wake_waiter(void);
static inline void zone_note_free(void)
{
	if (unlikely(atomic_load_explicit(&pcpm_zone_free_waiter, memory_order_relaxed)))
		zone_wake_waiter();
}

/* Statistics: the one interface every layer offers stat.c (every zone's counters). */
struct pcpm_stats;
void zone_stats_add(struct pcpm_stats *s);

#endif
