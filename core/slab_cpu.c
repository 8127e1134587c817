/*
 * slab_cpu.c - a CPU's frozen slabs of one class (see slab_cpu.h).  Calls slab.
 *
 * Why: a refill of the CPU sheaves from the slabs took the kmem_cache lock (process-wide)
 * once per quarter sheaf, and a heap growing at 224 CPUs is made of such refills (churn
 * 4-16 KiB: 3,120 kmem_cache holds for 11,304 new slabs); and a quarter sheaf carved at once
 * wrote the free mark of every object it carved, so objects no thread ever used were
 * resident (churn 4-16 KiB: a third of its peak RSS).  As SLUB's CPU slab, a new slab is the
 * CPU's alone until it is carved to the end: no lock to take objects from it; as mimalloc's
 * page extension, objects are carved as they are asked for.  Frees that reach a frozen
 * slab wait on its freelist (slab.c) until it is unfrozen, DONE_MAX slabs per lock hold.
 */
#include "slab_cpu.h"

#define DONE_MAX 16 /* slabs carved to the end a CPU keeps frozen before it unfreezes them */

static void chain_push(struct page **chain, struct page *pg)
{
	pg->lru.next = (struct list_head *)*chain;
	*chain = pg;
}

static struct page *chain_pop(struct page **chain)
{
	struct page *pg = *chain;
	*chain = (struct page *)pg->lru.next;
	return pg;
}

/* Did a slab carved to the end get objects back (a flush, a decay, a free on a CPU whose
 * sheaf lock was taken)?  They wait on its freelist until it is unfrozen. */
static bool done_has_free(struct cpu_slab *c, struct kmem_cache *s)
{
	for (struct page *pg = c->done; pg; pg = (struct page *)pg->lru.next)
		if (__atomic_load_n(&pg->inuse, __ATOMIC_RELAXED) < s->objects)
			return true;
	return false;
}

/* New slabs for the CPU: enough for a batch above order 3 (one zone hold), else one. */
static bool cpu_slab_new(struct cpu_slab *c, unsigned cls, void **room, unsigned nroom,
			 unsigned batch, uint32_t owner)
{
	struct kmem_cache *s = kmem_cache_of(cls);
	unsigned want = s->order > PAGE_ALLOC_COSTLY_ORDER ? (batch + s->objects - 1) / s->objects : 1;
	struct page **pg = (struct page **)room;
	unsigned nf = slab_new_frozen(cls, MAX(MIN(want, nroom), 1u), pg, owner);
	for (unsigned i = nf; i-- > 0;)
		chain_push(&c->fresh, pg[i]);
	__atomic_store_n(&c->left, c->left + nf * s->objects, __ATOMIC_RELAXED);
	return nf != 0;
}

unsigned cpu_slab_alloc(struct cpu_slab *c, unsigned cls, unsigned n, void **objs,
			unsigned room, unsigned batch, uint32_t owner)
{
	struct kmem_cache *s = kmem_cache_of(cls);
	unsigned got = 0;
	while (got < n) {
		if (c->cur && c->cur->carved < s->objects) {
			unsigned k = slab_frozen_carve(cls, c->cur, n - got, &objs[got]);
			got += k;
			__atomic_store_n(&c->left, c->left - k, __ATOMIC_RELAXED);
			continue;
		}
		if (c->cur) {
			chain_push(&c->done, c->cur);
			c->cur = NULL;
			__atomic_store_n(&c->ndone, c->ndone + 1, __ATOMIC_RELAXED);
		}
		if (c->fresh) {
			c->cur = chain_pop(&c->fresh);
			continue;
		}
		/* the CPU's slabs are used up: objects freed back to them first (unfrozen onto
		 * the partial list), then partial slabs (the caller's), then new slabs */
		if (c->ndone >= DONE_MAX || done_has_free(c, s))
			cpu_slab_release(c, cls, false);
		if (__atomic_load_n(&s->nr_partial, __ATOMIC_RELAXED) ||
		    !cpu_slab_new(c, cls, &objs[got], room - got, batch, owner))
			break;
		c->cur = chain_pop(&c->fresh);
	}
	return got;
}

void cpu_slab_release(struct cpu_slab *c, unsigned cls, bool all)
{
	if (all) {
		if (c->cur)
			chain_push(&c->done, c->cur);
		while (c->fresh)
			chain_push(&c->done, chain_pop(&c->fresh));
		c->cur = NULL;
		__atomic_store_n(&c->left, 0, __ATOMIC_RELAXED);
	}
	if (c->done)
		slab_unfreeze(cls, c->done);
	c->done = NULL;
	__atomic_store_n(&c->ndone, 0, __ATOMIC_RELAXED);
}
