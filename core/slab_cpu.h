/*
 * slab_cpu.h - a CPU's frozen slabs of one class (slab_cpu.c; SLUB's kmem_cache_cpu slab,
 * mimalloc's page free-list extension): new slabs taken with no kmem_cache lock and carved by
 * that CPU alone, as few objects at a time as its thread caches ask for, so a never-used
 * object is never touched (never resident); slabs carved to the end are unfrozen a batch per
 * kmem_cache lock hold.  The caller serializes each struct cpu_slab (sheaf.c: the CPU's
 * sheaf lock of the class).
 */
#ifndef PCPM_SLAB_CPU_H
#define PCPM_SLAB_CPU_H

#include "slab.h"

struct cpu_slab {
	struct page *cur;  /* being carved: [cur->carved, objects) is this CPU's */
	struct page *fresh; /* new slabs, none carved: a chain through lru.next */
	struct page *done; /* carved to the end, to be unfrozen: a chain through lru.next */
	uint16_t ndone;
	/* objects not carved yet (cur's tail and the fresh slabs): written by the owner,
	 * read racily (mallinfo counts them free) */
	uint32_t left;
};

/*
 * Up to n objects of class cls carved into objs[] (marked free, see slab_frozen_carve);
 * how many: fewer when memory is exhausted, or when the CPU's slabs ran out while the
 * cache's partial list has slabs (the caller takes those: used memory first).  objs[] has
 * room entries (>= n): new slabs wait in objs[n..room) while they are set up.  batch: the
 * objects a refill usually takes, to size the new slabs taken at once above order 3 (one
 * zone lock hold each).  owner: the CPU slot + 1 (slab_owner).
 */
unsigned cpu_slab_alloc(struct cpu_slab *c, unsigned cls, unsigned n, void **objs,
			unsigned room, unsigned batch, uint32_t owner);

/* The CPU's slabs carved to the end (all: every one, the one being carved and the fresh
 * ones too) back to the kmem_cache (slab_unfreeze): decay, flush. */
void cpu_slab_release(struct cpu_slab *c, unsigned cls, bool all);

#endif
