/*
 * sheaf_home.h - objects go home in arrays: the inboxes of the slab layer's per-CPU level
 * (see sheaf_home.c).  An object freed on another CPU than the one whose sheaves took it from
 * its slab (slab_owner) travels back to that CPU in a batch, an array of pointers pushed onto
 * the owner's per-class inbox with one compare-and-swap; the owner copies batches into its
 * sheaf when its sheaves run dry and never reads the objects (mimalloc's xthread_free carries
 * them in a chain through the objects: one dependent miss per object for the owner).  Calls
 * slab (objects to their slabs), arena (batch metadata) and topology (the CPU count).
 * Thread-safety: struct home_inbox is shared (atomics); struct home_local is the lock holder's
 * of one CPU slot's sheaf lock of a class (sheaf.c), and every function taking one needs it.
 */
#ifndef PCPM_SHEAF_HOME_H
#define PCPM_SHEAF_HOME_H
#include "barn.h"

/* Pointers per batch: 30 make a 256-byte batch (the header's 16 bytes, four lines), two
 * thread-cache flushes of 15 */
#define HOME_BATCH 30

struct home_batch {
	struct home_batch *next; /* on an inbox, a home list, a pool or an empties list */
	uint32_t n;		 /* objects in objs[] */
	uint32_t pad;
	void *objs[HOME_BATCH];
};

/* Per CPU slot and class, written by other CPUs (in sheaf.c's struct sheaf_cpu). */
struct home_inbox {
	/* batches of this CPU's objects other CPUs freed: pushed with one compare-and-swap
	 * each, taken whole by the owner under its sheaf lock */
	_Atomic(struct home_batch *) batches;
	/* objects and batches pushed since the owner last took them (about: a push between the
	 * owner's take and its reset is forgotten, never counted twice) */
	_Atomic uint32_t n, nb;
	/* empty batches this slot copied out of its inbox: taken whole by a pool that runs dry
	 * (one sending here, else this slot's own) */
	_Atomic(struct home_batch *) returned;
};

/* Per CPU slot and class, the holder's of that slot's sheaf lock of the class. */
struct home_local {
	struct home_batch *home; /* batches taken from the inbox, not yet copied into main */
	struct home_batch *pool; /* empty batches this slot's frees fill */
	/* objects on home (written under the lock, read racily: mallinfo's free bytes) */
	uint32_t home_n;
};

/* The inboxes (one per class) of CPU slot slot, which its sheaves' objects name as their
 * owner from now on; false: out of memory.  The callers serialize (sheaf.c's setup_lock). */
bool home_register(unsigned slot, struct home_inbox *inboxes);

/*
 * Sends the objects of objs[] whose slab another slot's sheaves took them from home, in
 * batches (SLUB's build_detached_freelist, by owner instead of by slab): one batch per owner
 * at a time from hl's pool (refilled with the owner's empties, else those of mine, this
 * slot's inbox of the class, else new metadata), pushed onto the owner's inbox when full and
 * at the end, up to max objects waiting per inbox.  The others (slot's own, no owner, an inbox at its limit, more
 * owners than one call groups, no memory for a batch) move to the front of objs[]; returns
 * how many.  Lock: slot's sheaf lock of class cls (hl is its).
 */
unsigned home_send(struct home_local *hl, struct home_inbox *mine, unsigned cls, unsigned slot,
		   void **objs, unsigned n, uint32_t max);

/* Does the slot hold objects that came home (a home list, or an inbox)?  (racy for the inbox:
 * the caller takes what it finds under its lock) */
static inline bool home_waiting(const struct home_local *hl, struct home_inbox *in)
{
	return hl->home || atomic_load_explicit(&in->batches, memory_order_relaxed);
}

/*
 * An empty sheaf m (of cap objects) filled from the objects that came home: the home list,
 * else the inbox taken whole (it becomes the home list); what m cannot hold stays on the
 * home list for the next refill (mimalloc's local_free).  Copies pointers only; each batch
 * copied out goes onto in's empties.  Returns true when it took the inbox (a drain).
 * Lock: the slot's sheaf lock of the class.
 */
bool home_fill(struct home_local *hl, struct home_inbox *in, struct slab_sheaf *m, unsigned cap);

/* The home list and the inbox to the slabs (a decay, a flush).  Lock: as home_fill. */
void home_release(struct home_local *hl, struct home_inbox *in, unsigned cls);

/* Is p on the home list or in the inbox?  (double-free confirmation; the lock keeps the
 * owner from taking the inbox, so it is stable below its head) */
bool home_holds(const struct home_local *hl, struct home_inbox *in, const void *p);

/* Objects the slot holds that came home (racy: a snapshot; mallinfo and statistics). */
static inline size_t home_count(const struct home_local *hl, struct home_inbox *in)
{
	return (size_t)__atomic_load_n(&hl->home_n, __ATOMIC_RELAXED) +
	       atomic_load_explicit(&in->n, memory_order_relaxed);
}
#endif
