/*
 * barn.h - the node barns of the slab layer's per-CPU level, and the sheaf they hold
 * (Linux 6.18's node_barn and struct slab_sheaf; kernel-pcp.md §7.2, §12.6).  Per NUMA node
 * and size class a barn keeps up to barn_max full sheaves and the empty ones, under a small
 * lock (profiled as barn_lock); CPUs exchange sheaves with it one for one (sheaf.c, the
 * level above, which owns the CPU sheaves).  Sheaves are allocator metadata, never freed.
 * Calls slab (full sheaves flushed to the slabs), arena (metadata), pcp (the zone count).
 * Thread-safety: every function is thread-safe.
 */
#ifndef PCPM_BARN_H
#define PCPM_BARN_H

#include "slab.h"

/* The kernel's struct slab_sheaf: objects[0..size) are free objects of one class. */
struct slab_sheaf {
	struct slab_sheaf *next; /* on a barn's list */
	uint32_t size;		 /* objects held */
	uint32_t pad;
	void *objects[]; /* pcpm_sheaf_cap[cls] */
};

/* Objects per sheaf of each class (written once by pcpm_sheaf_init; 0: no sheaves). */
extern uint16_t pcpm_sheaf_cap[NR_SIZE_CLASSES];

/* The barns' limits from pcpm_sheaf_cap (once, at init, after the caps are set). */
void pcpm_barn_init(void);

/* The barn of node and class cls exists (set up at its first use); false: out of memory. */
bool barn_ensure(int node, unsigned cls);

/* Bytes of one sheaf of class cls (64-byte multiple: sheaves carved side by side keep their
 * own lines). */
static inline size_t barn_sheaf_size(unsigned cls)
{
	return ALIGN_UP(sizeof(struct slab_sheaf) + pcpm_sheaf_cap[cls] * sizeof(void *), 64);
}

/* n new empty sheaves of class cls, linked through next, in mem (n * barn_sheaf_size(cls)
 * zeroed bytes) or, mem NULL, in new metadata; NULL when out of memory. */
struct slab_sheaf *barn_sheaf_new(unsigned cls, unsigned n, void *mem);

/* The empty sheaves of the list into the node's barn (a CPU that lost a set-up race). */
void barn_put_empty(int node, unsigned cls, struct slab_sheaf *list);

/*
 * barn_replace_empty_sheaf(): the k (1 or 2) empty sheaves e[] for full ones, from the
 * node's barn, else another node's in zonelist order; how many (the first ones of e[] are
 * replaced).  barn_replace_full_sheaf(): the k full sheaves f[] into the node's barn for
 * empty ones, as many as it has room for below its limit; how many (the rest stay the
 * caller's).  One lock hold each (two when the barn needs new empty sheaves).
 */
unsigned barn_replace_empty(int node, unsigned cls, struct slab_sheaf **e, unsigned k);
unsigned barn_replace_full(int node, unsigned cls, struct slab_sheaf **f, unsigned k);

/* Full sheaves of every barn to the slabs: all, or (decay) those that stayed in their barn
 * through the period (the fewest it held since the last call); returns the objects freed. */
uint64_t barn_release_all(bool all);

/* Does any barn hold a full sheaf?  (racy) */
bool barn_pending(void);

/* Is p (an object of class cls) on a barn's full sheaf?  (double-free confirmation) */
bool barn_holds(unsigned cls, const void *p);

/* Bytes of the objects on every barn's full sheaves (mallinfo: free); nowait (a signal
 * handler): a barn whose lock is taken counts as empty. */
size_t barn_cached_bytes(bool nowait);

/* barn_lock* statistics into s. */
void barn_stats_add(struct pcpm_stats *s);

/* fork: every barn lock (after the CPU sheaves' locks) and its set-up lock. */
void barn_lock_all(void);
void barn_unlock_all(void);
void barn_reset_locks(void);

#endif
