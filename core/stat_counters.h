/*
 * stat_counters.h - vmstat-like counters: struct pcpm_stats, which every layer fills with its
 * X_stats_add(struct pcpm_stats *) and the report (stat.c) sums.  Types and macros only (no
 * stat_counters.c: a leaf every layer includes).  Names are the JSON keys (fixed by the
 * foundation issue).
 */
#ifndef PCPM_STAT_COUNTERS_H
#define PCPM_STAT_COUNTERS_H

#include <stdint.h>

/* X-macro: every summed counter, in JSON order.  Pages are 4 KiB base pages. */
#define PCPM_COUNTERS(X)                                                                         \
	X(malloc_calls)		/* malloc/calloc/realloc/aligned/new calls that allocate */        \
	X(free_calls)		/* free/free_sized/delete calls with a non-NULL pointer */         \
	X(pgalloc_pcp)		/* pages handed out from a pcp list */                             \
	X(pgalloc_zone)		/* pages taken from the buddy free lists (refills + direct) */     \
	X(pgfree_pcp)		/* pages freed onto a pcp list */                                  \
	X(pgfree_zone)		/* pages put back into the buddy free lists (drains + direct) */   \
	X(zone_lock)		/* zone lock acquisitions */                                       \
	X(zone_lock_contended)	/* ... that had to wait */                                         \
	X(zone_lock_wait_ns)	/* time spent waiting for the zone lock */                        \
	X(zone_lock_hold_ns)	/* mean zone lock hold, ns (every hold timed) */                   \
	X(zone_lock_hold_max_ns) /* the longest zone lock hold, ns */                              \
	X(zone_lock_long_holds)	/* zone lock holds of 2^18 cycles (~100 us) or more */            \
	X(zone_lock_long_hold_ns) /* ... their total time, ns (in the mean too) */                  \
	X(zone_lock_busiest)	/* acquisitions of the zone lock taken most (one per node) */     \
	X(pcp_lock_contended)	/* pcp trylock failures (the zone was used instead) */             \
	X(refills)		/* rmqueue_bulk calls from a pcp */                                \
	X(refill_pages)		/* pages moved zone -> pcp */                                      \
	X(drains)		/* free_pcppages_bulk calls */                                     \
	X(drain_pages)		/* pages moved pcp -> zone */                                      \
	X(free_high_drains)	/* drains caused by free_high */                                   \
	X(high_raises)		/* times high was raised (auto-tuning) */                          \
	X(high_decays)		/* times decay_pcp_high lowered high */                            \
	X(decay_runs)		/* decay_pcp_high calls */                                         \
	X(fbatch_flushes)	/* thread-cache flushes to the slab layer */                      \
	X(tcache_refills)	/* thread-cache refills from the slab layer */                    \
	X(slab_alloc)		/* slabs created */                                                \
	X(slab_free)		/* empty slabs given back to the pcp */                            \
	X(slab_lock)		/* kmem_cache lock acquisitions */                                 \
	X(slab_lock_contended)	/* kmem_cache lock acquisitions that waited */                    \
	X(slab_lock_wait_ns)	/* time spent waiting for kmem_cache locks */                     \
	X(slab_lock_hold_ns)	/* mean kmem_cache lock hold, ns (every hold timed) */         \
	X(slab_lock_busiest)	/* acquisitions of the kmem_cache lock taken most */              \
	X(barn_lock)		/* barn lock acquisitions (per node and class: full sheaves) */   \
	X(barn_lock_contended)	/* ... that had to wait */                                         \
	X(barn_lock_wait_ns)	/* time spent waiting for barn locks */                           \
	X(barn_lock_hold_ns)	/* mean barn lock hold, ns (every hold timed) */               \
	X(barn_lock_busiest)	/* acquisitions of the barn lock taken most */                    \
	X(sheaf_refills)	/* CPU sheaves refilled from a barn or the slabs */               \
	X(sheaf_flushes)	/* full CPU sheaves given to a barn or the slabs */               \
	X(sheaf_decayed)	/* objects idle sheaves and barns gave back on the decay period */ \
	X(sheaf_remote_frees)	/* objects freed on another CPU sent home to their owner's inbox */ \
	X(sheaf_inbox_drains)	/* inboxes taken whole by their CPU (or by decay and flushes) */  \
	X(sheaf_lock_contended)	/* CPU sheaf trylock failures (the slabs were used instead) */   \
	X(tcache_bytes)		/* now: free objects on the thread caches' stacks (bytes) */      \
	X(tcache_grown_bytes)	/* now: capacity the stacks grew by, all threads (bytes of objects) */ \
	X(sheaf_bytes)		/* now: free objects on the CPU sheaves, main and spare (bytes) */ \
	X(sheaf_home_bytes)	/* now: objects come home, waiting on home chains and inboxes */  \
	X(cpu_slab_bytes)	/* now: the CPU slabs' uncarved tails (bytes, never written) */    \
	X(barn_bytes)		/* now: free objects on the barns' full sheaves (bytes) */         \
	X(depot_bytes)		/* now: free objects in the node depots' chains (bytes)   */         \
	X(large_alloc)		/* page-run allocations (above the slab range) */                 \
	X(huge_alloc)		/* direct mmap allocations (above 4 MiB) */                        \
	X(huge_cache_hits)	/* huge allocations served from the reuse cache */                 \
	X(as_reclaims)		/* address-space reclaims: every cache flushed after a mapping \
				 * failed, when giving back could make the request fit */          \
	X(huge_lock)		/* huge cache lock acquisitions (one lock) */                      \
	X(huge_lock_contended)	/* ... that had to wait */                                         \
	X(huge_lock_wait_ns)	/* time spent waiting for it */                                    \
	X(huge_lock_hold_ns)	/* mean hold, ns (every hold timed) */                             \
	X(huge_lock_hold_max_ns) /* the longest hold, ns */                                        \
	X(huge_lock_long_holds)	/* holds of 2^18 cycles or more */                                 \
	X(huge_lock_long_hold_ns) /* ... their total time, ns */                                   \
	X(huge_lock_busiest)	/* = huge_lock (one instance) */                                   \
	X(purge_runs)		/* purge passes over the free lists */                             \
	X(purged_bytes)		/* bytes given back with madvise */                                \
	X(zone_grow)		/* chunks committed into the zone */                               \
	X(zone_grow_ns)		/* time spent committing them, ns (outside the zone lock) */      \
	X(zone_grow_waits)	/* growers that found a commit running and slept until it was  \
				 * published (no lock is held across a commit: zone_grow.h) */ \
	X(zone_grow_wait_ns)	/* ... their time asleep, ns */                                 \
	X(arena_lock)		/* arena locks (radix map, metadata, arena creation) acquisitions */ \
	X(arena_lock_contended)	/* ... that had to wait */                                         \
	X(arena_lock_wait_ns)	/* time spent waiting for them */                                  \
	X(arena_lock_hold_ns)	/* mean hold, ns */                                                \
	X(arena_lock_hold_max_ns) /* the longest hold, ns */                                       \
	X(arena_lock_long_holds) /* holds of 2^18 cycles or more */                                \
	X(arena_lock_long_hold_ns) /* ... their total time, ns */                                  \
	X(arena_lock_busiest)	/* acquisitions of the one taken most */                           \
	X(zone_used_peak)	/* most pages out of the zones' free lists at once (pcps, slabs, \
				 * the program): bounds the arena's RSS while nothing is purged */ \
	X(mapped_bytes)		/* arena bytes committed + huge bytes mapped */                    \
	X(resident_bytes)	/* RSS of the process when read */                                \
	X(early_bytes)		/* early-area bytes handed out before the allocator started */

struct pcpm_stats {
#define X(n) uint64_t n;
	PCPM_COUNTERS(X)
#undef X
};

/* Adds the lock profile of the family NAME (a struct lock_sum *, core/lockstat.h) to *s under
 * its keys NAME_lock, _contended, _wait_ns, _hold_ns, _hold_max_ns, _long_holds, _long_hold_ns
 * and _busiest (the families whose keys are all in PCPM_COUNTERS: zone, huge, arena). */
#define PCPM_STATS_LOCK(s, NAME, sum)                                                            \
	do {                                                                                     \
		(s)->NAME##_lock += (sum)->acquired;                                             \
		(s)->NAME##_lock_contended += (sum)->contended;                                  \
		(s)->NAME##_lock_wait_ns += (sum)->wait_ns;                                      \
		(s)->NAME##_lock_hold_ns += lock_sum_hold_ns(sum);                               \
		(s)->NAME##_lock_hold_max_ns += lock_sum_hold_max_ns(sum);                       \
		(s)->NAME##_lock_long_holds += (sum)->long_holds;                                \
		(s)->NAME##_lock_long_hold_ns += lock_sum_long_hold_ns(sum);                     \
		(s)->NAME##_lock_busiest += (sum)->busiest;                                      \
	} while (0)

#endif
