/*
 * sheaf.h - the per-CPU level of the slab layer: per CPU slot and size class a main and a
 * spare sheaf (an array of free objects), per NUMA node and class a barn of full and empty
 * sheaves (Linux 6.18's slub_percpu_sheaves and node_barn; kernel-pcp.md §7.2, §12.6).  The
 * thread caches refill from and flush to their CPU's sheaves with no process-wide lock; a
 * barn (a one-for-one exchange of a whole sheaf) or a kmem_cache is touched only when a CPU
 * runs out of or overflows its two sheaves, and idle sheaves decay back to the slabs on the
 * pcp decay period.  An object freed on another CPU than the one whose sheaves took it from
 * its slab goes home, to that CPU's inbox, with no lock.  See sheaf.c.  Calls slab (below it) and pcp (the CPU).
 * Thread-safety: every function is thread-safe.
 */
#ifndef PCPM_SHEAF_H
#define PCPM_SHEAF_H

#include "barn.h"

/* (pcpm_sheaf_cap, barn.h: objects per sheaf of each class; 0: the level is off for the
 * class (memcheck and secure mode, PCPMALLOC_SHEAVES=0): sheaf_alloc_bulk and
 * sheaf_free_bulk go to the slabs.) */

/*
 * The largest request a paged slab class serves: SLAB_PAGED_MAX (32 KiB) when the CPU sheaves
 * hold that class, else 28 KiB - a 28-32 KiB request is then an order-3 page run through the
 * pcp, cheaper than a one-object slab behind the kmem_cache lock.  Set by pcpm_sheaf_init.
 */
extern uint32_t pcpm_paged_max;

/* Sizes the sheaves (after pcpm_slab_init; on: the mode lets objects wait on CPU sheaves). */
void pcpm_sheaf_init(bool on);

/*
 * slab_alloc_bulk / slab_free_bulk through the calling CPU's sheaves (slab.h): up to want
 * objects into objs[] (each marked free: PCPM_FREE_KEY in its second word) and how many,
 * 0 when memory is exhausted; n objects of class cls given back from objs[] (each carrying
 * the mark, validated by the caller; the array is copied, not kept).  The CPU's sheaf lock
 * is a trylock: when another thread holds it, the slabs serve the call directly.
 */
unsigned sheaf_alloc_bulk(unsigned cls, unsigned want, void **objs);
/* (objs[] may be reordered: objects of other CPUs' slabs go home first, see sheaf.c) */
void sheaf_free_bulk(unsigned cls, void **objs, unsigned n);

/* Every object on every CPU's sheaves and in every barn back to the slabs (malloc_trim,
 * address-space reclaim; before slab_shrink_all). */
void sheaf_flush_all(void);

/*
 * decay_pcp_high for sheaves, once per PCPMALLOC_DECAY_MS (now_ms: pcpm_now_ms()): the
 * objects each CPU's sheaves held through the whole period (the fewest it held since the
 * last decay, the count_min rule) and the full sheaves that stayed in a barn go back to the
 * slabs.  Called by the periodic work (vmstat.c); busy CPUs (sheaf lock taken) are skipped.
 */
void sheaf_decay(uint64_t now_ms);

/* Does any sheaf or barn hold objects?  (a racy scan: the periodic worker's "anything to
 * do" test) */
bool sheaf_pending(void);

/* Is p (an object of class cls) on a CPU sheaf or in a barn?  (double-free confirmation) */
bool sheaf_holds(unsigned cls, const void *p);

/*
 * Bytes of free objects the per-CPU level holds: every CPU's main and spare sheaves, home
 * chains and inboxes, and the barns' full sheaves (mallinfo: cached objects are free, not in
 * use).  Racy sums, a snapshot; nowait (a signal handler): a barn whose lock is taken counts
 * as empty.  Thread-safe.
 */
size_t sheaf_cached_bytes(bool nowait);
/* Counters (sheaf_*, barn_lock*) into s. */
void sheaf_stats_add(struct pcpm_stats *s);

/* fork: every sheaf and barn lock (before the kmem_cache locks), released or reset. */
void sheaf_lock_all(void);
void sheaf_unlock_all(void);
void sheaf_reset_locks(void);

#endif
