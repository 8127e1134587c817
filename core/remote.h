/*
 * remote.h - remote frees travel as arrays of pointers (remote.c): an object freed on
 * another CPU slot than the one whose sheaves took it from its slab (slab_owner) is put on
 * the freeing slot's outbound sheaf for that owner, and a full outbound sheaf goes onto the
 * owner's inbox with one compare-and-swap; the owner takes a whole sheaf as its main (a
 * pointer swap: no object read on either side) and gives its empty one back to the sender.
 * Above 4 CPUs a class with a node depot gives other nodes' objects to their node's depot
 * first (depot.c).  The level above (sheaf.c) embeds the structures and holds the slot's
 * sheaf lock of the class around every call but remote_register.
 */
#ifndef PCPM_REMOTE_H
#define PCPM_REMOTE_H

#include "barn.h"

/* Outbound sheaves a slot keeps per class: one per owner it frees to; a way whose sheaf was
 * just sent takes the next new owner, and while all four hold objects a fifth owner's
 * objects stay on the freeing CPU (a consumer of a few producers sends all home). */
#define REMOTE_WAYS 4

/* One CPU slot's mailbox of a class, written by other slots (on the lines of struct
 * sheaf_cpu that other CPUs write). */
struct remote_box {
	/* full sheaves of this slot's objects that other slots sent (linked through next; the
	 * sender's slot + 1 in origin), pushed with a compare-and-swap, taken whole */
	_Atomic(struct slab_sheaf *) inbox;
	/* empty sheaves owners gave back to this slot for its outbound sheaves */
	_Atomic(struct slab_sheaf *) returns;
	/* objects on inbox (about: a push between the owner's take and its reset is lost) */
	_Atomic uint32_t inbox_n;
};

/* One slot's private side of a class, under the slot's sheaf lock of the class. */
struct remote_pcs {
	struct slab_sheaf *out[REMOTE_WAYS]; /* outbound sheaves (NULL: none yet) */
	uint32_t owner[REMOTE_WAYS];	     /* their owners' slots + 1 (0: free way) */
	struct slab_sheaf *empty;	     /* empty sheaves for outbound use */
	struct slab_sheaf *home;	     /* sheaves taken from the inbox, not yet used */
	uint32_t home_n;		     /* objects on them (racy reads: statistics) */
	uint64_t sent; /* objects sent home (inboxes, depots): sheaf_remote_frees */
};

/* The inbox bounds from pcpm_sheaf_cap (once, at init, after the caps are set). */
void pcpm_remote_init(void);

/* Slot cpu's boxes (box[NR_SIZE_CLASSES], zeroed) are published: frees on other slots may
 * now send it objects.  Under sheaf.c's setup_lock; false: out of memory for the table. */
bool remote_register(unsigned cpu, struct remote_box *box);

/*
 * Of objs[] (n objects of class cls freed on slot cpu of node, rp/box that slot's side),
 * the objects of other slots' slabs go on to their owners (outbound sheaves; other nodes'
 * into their node's depot when the class has one); the rest (this slot's, no owner, an
 * owner whose inbox is at its bound) move to the front of objs[]; returns how many.
 * Slot lock held.
 */
unsigned remote_send(struct remote_pcs *rp, unsigned cls, unsigned cpu, void **objs,
		     unsigned n);

/* An empty main (*m, spare empty too) replaced by a sheaf that came home (the home list,
 * else the inbox taken whole); the old one goes back to its sender.  false: none came. */
bool remote_fill(struct remote_pcs *rp, struct remote_box *box, unsigned cls,
		 struct slab_sheaf **m);

/* Has anything come home (racy: the refill's test before remote_fill)? */
static inline bool remote_has_home(const struct remote_pcs *rp, struct remote_box *box)
{
	return rp->home || atomic_load_explicit(&box->inbox, memory_order_relaxed);
}

/* Everything this side holds (the home list, the inbox, the outbound sheaves) to the slabs
 * (decay of an idle slot, flush); returns the objects freed. */
uint64_t remote_release(struct remote_pcs *rp, struct remote_box *box, unsigned cls);

/* Is p on this side (home list, inbox, outbound sheaves)?  (double-free confirmation) */
bool remote_holds(const struct remote_pcs *rp, struct remote_box *box, const void *p);

/* Objects this side holds (racy: statistics, mallinfo's free bytes). */
size_t remote_objects(const struct remote_pcs *rp, struct remote_box *box, unsigned cls);

#endif
