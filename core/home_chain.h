/*
 * home_chain.h - chains of free objects on their way home (home_chain.c): what a CPU frees
 * of another CPU's slabs goes to that CPU's inbox as one chain (sheaf.c, send_home), and the
 * owner takes it whole and refills its sheaves from it.  A chain is made of carriers: a
 * carrier is one of the objects, linked to the next carrier by its first word (safe-linked),
 * its second word the free mark (PCPM_FREE_KEY, as every free object's), and, for classes of
 * 32 B and more (without a depot: depot.h), a count in its third word and the pointers of up to pcpm_home_carry[cls]
 * other objects of the chain after it (safe-linked each).  The owner reads the carriers
 * only: with a chain of one object per link (until 2026-12) every object's link was a cache
 * miss on a line the freeing CPU wrote last, one after the other (xmalloc, 2 CPUs: 46 % of
 * the owner's refill samples on that load); a carrier of a 64 B object carries 5 more, of
 * 256 B 29.  The carried objects themselves are not read or written on the way.
 * No kernel counterpart (its remote frees go to the slab's freelist or the local sheaf);
 * mimalloc's xthread_free is a chain of one object per link.  Thread-safety: a chain being
 * built is its builder's; a taken chain is its taker's (sheaf.c: under the owner's sheaf
 * lock).  Used only with the sheaves on (default mode: secure mode checks that free memory
 * past the mark stays zero, and never has sheaves).
 */
#ifndef PCPM_HOME_CHAIN_H
#define PCPM_HOME_CHAIN_H

#include "depot.h"

/* Objects a carrier of each class carries besides itself (0: a chain of one per link, the
 * 16 B class: no room for a count past the mark).  Set by home_chain_init. */
extern uint8_t pcpm_home_carry[NR_SIZE_CLASSES];

/* The carrier counts of every class (at start-up, from pcpm_class_size). */
void home_chain_init(void);

/* A chain being built, of one owner: first is its head (the newest carrier), last the
 * oldest carrier (its link is written when the chain is pushed: home_chain_close), n the
 * objects in it.  Zero-initialised: empty. */
struct home_chain {
	void *first, *last;
	unsigned n;
};

/* Adds the free object o (marked) of class cls to chain c: carried by the head carrier
 * while it has room (a pointer written there: o itself is not touched), else o becomes the
 * new head carrier. */
static inline void home_chain_add(struct home_chain *c, unsigned cls, void *o)
{
	uintptr_t *h = c->first;
	unsigned carry = pcpm_home_carry[cls];
	c->n++;
	if (h && h[2] < carry) {
		fl_store(&h[3 + h[2]], o);
		h[2]++;
		return;
	}
	fl_store(o, c->first);
	if (carry)
		((uintptr_t *)o)[2] = 0;
	if (!c->first)
		c->last = o;
	c->first = o;
}

/* Links the chain's last carrier to next (the chain it goes in front of). */
static inline void home_chain_close(struct home_chain *c, void *next)
{
	fl_store(c->last, next);
}

/*
 * Up to max objects of the chain at *head (class cls) into out[]; *head becomes what is
 * left (a carrier partly taken keeps the rest, its count lowered).  Every object's
 * descriptor is checked first: a write after free that bent a link or a carried pointer
 * aborts ("corrupted free list").  Returns how many.
 */
unsigned home_chain_take(void **head, unsigned cls, void **out, unsigned max);

/* A chain of class cls to the slabs, 32 objects per slab_free_bulk; returns how many.  Any
 * lock of the sheaf level may be held. */
uint64_t home_chain_release(unsigned cls, void *chain);

/* Is p in the chain at head?  (double-free confirmation; the chain must be stable) */
bool home_chain_has(void *head, unsigned cls, const void *p);

#endif
