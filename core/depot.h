/*
 * depot.h - per NUMA node and class, a lock-free depot of chains of free objects that the
 * CPUs' sheaves pool (depot.c).  On a machine of many CPUs a CPU keeps at most two chains
 * of a class on its sheaves; its surplus goes here, and a CPU whose class ran dry takes a
 * chain before it carves new objects.  No lock: a chain is put into an empty slot with one
 * compare-and-swap and taken whole with one exchange (Bonwick's magazine depot, with slots
 * of chains in place of a locked list of magazines).
 */
#ifndef PCPM_DEPOT_H
#define PCPM_DEPOT_H

#include "barn.h"

/* Objects per chain of each class; 0: the class has no depot (machines of 4 CPUs or fewer,
 * and classes whose sheaves hold fewer than two chains).  Written once by pcpm_depot_init. */
extern uint16_t pcpm_depot_chunk[NR_SIZE_CLASSES];

/* Sizes the chains (after pcpm_sheaf_cap is set). */
void pcpm_depot_init(void);

/* node's depot exists (set up by a CPU slot's first use, with sheaf.c's setup_lock held:
 * that lock is the depot's set-up lock, taken around fork); false: out of memory. */
bool depot_setup(int node);

/* The next object of a chain of free objects of class cls (safe-linked), after checking o's
 * descriptor: an object that is not one of the class's, or a bent link, aborts. */
static inline void *depot_next(void *o, unsigned cls)
{
	struct page *pg = pcpm_page_of(o);
	if (unlikely(!pg || pg->state != PG_SLAB || pg->cls != cls ||
		     slab_obj_index(pg->slab_head, o) < 0))
		pcpm_freelist_corrupt("malloc", o);
	return fl_decode(o, "malloc");
}

/*
 * A CPU sheaf m of class cls holding more than two chains: chains of its newest objects
 * into node's depot until it holds two, or the depot is full.  The caller holds m's CPU
 * lock; takes none.  __depot_trim is the slow part.
 */
void __depot_trim(int node, unsigned cls, struct slab_sheaf *m);
static inline void depot_trim(int node, unsigned cls, struct slab_sheaf *m)
{
	if (unlikely(pcpm_depot_chunk[cls]) && m->size > 2u * pcpm_depot_chunk[cls])
		__depot_trim(node, cls, m);
}

/* Chains of k objects cut from the front of chain (a CPU's home chain, *n its count, about)
 * into node's depot while it has room; returns the rest (fewer than k objects, or all when
 * the class has no depot).  Caller holds the chain's CPU lock; takes none. */
void *depot_put_chain(int node, unsigned cls, void *chain, uint32_t *n);

/* A chain of n objects of class cls (at most a sheaf; the last one's link NULL) of node's
 * slabs into node's depot: another node's CPU that freed them.  false: the class has no
 * depot or it is full (the chain is the caller's again).  Takes no lock. */
bool depot_give(int node, unsigned cls, void *chain, unsigned n);

/* An empty CPU sheaf m of class cls filled with one chain of node's depot; false when the
 * depot has none (or the class has no depot).  Caller holds m's CPU lock; takes none. */
bool depot_fill(int node, unsigned cls, struct slab_sheaf *m);

/* A chain of free objects of class cls (depot_next's links) to the slabs, 32 per
 * slab_free_bulk; returns how many.  Any lock of the sheaf level may be held. */
uint64_t depot_chain_release(unsigned cls, void *chain);

/* Chains of every depot to the slabs: all (malloc_trim), or (decay) those that stayed
 * through the period: every chain of a depot no CPU took from, else the fewest it held
 * (count_min) but at most 1/PCPMALLOC_COUNT_MIN_DIV of them.  Returns the objects. */
uint64_t depot_release_all(bool all);

/* Does a depot hold a chain?  (racy) */
bool depot_pending(void);

/* Is p (an object of class cls) in a depot?  (double-free confirmation: each chain is taken
 * out while it is walked and put back after) */
bool depot_holds(unsigned cls, const void *p);

/* Bytes of the objects in the depots (racy). */
size_t depot_cached_bytes(void);

#endif
