/*
 * zone_grow.h - growing a zone outside its lock (the memory hotplug analogue: add_memory
 * prepares the memory map, online_pages then gives the pages to the buddy under the zone
 * lock).  zone_grow.c does the system calls - arena reservation and commit (mmap, mprotect,
 * mbind), the radix map - with the zone lock free; zone.c hands the chunk to the zone as
 * blocks that growers take one at a time, fault in (zone_grow_touch_range, no lock held)
 * and publish under the zone lock.  One committer at a time per zone (committing, set under
 * the zone lock), with no lock held: no process-wide lock waits for a system call.
 */
#ifndef PCPM_ZONE_GROW_H
#define PCPM_ZONE_GROW_H

#include "arena.h"
#include "lockstat.h"

/* Per zone: its growth.  Fields under the zone lock unless said otherwise.  No lock is held
 * across a growth's system calls: one grower at a time owns the arenas' ends (committing,
 * set under the zone lock), commits with no lock held and publishes under the zone lock. */
struct zone_grower {
	/* a chunk is being committed (by the grower that set it): the arenas' ends, arena
	 * and the arenas' reserved/committed are its own until it publishes */
	bool committing;
	unsigned waiters;	/* growers asleep on seq until the commit is published */
	struct arena *arena;	/* arena being grown (the committer's) */
	/* commits published (or failed): growers waiting for a commit sleep on it (futex);
	 * written under the zone lock */
	_Atomic uint32_t seq;
	uint64_t waits;		/* growers that found the free lists dry while a commit was
				 * running, and slept until it was published */
	uint64_t wait_ns;	/* ... their time asleep, ns */
	uint64_t grow_ns;	/* time spent committing chunks and faulting in their blocks'
				 * descriptors, ns (added atomically: no lock) */
	uint64_t mbind_failed;	/* arenas (or ranges) whose mbind the kernel refused (the
				 * committer's) */
};

/* What the zone lock holder saw when its free lists ran dry (read under the zone lock). */
struct zone_grow_req {
	int node;		/* the zone's node: new arenas get it */
	int os_node;		/* the kernel's node number, for mbind */
	int bind;		/* NUMA_BIND_* or -1 */
	size_t managed_pages;	/* the zone's size: a young zone grows in smaller steps */
};

/* A prepared chunk: committed, mapped in the radix map, its descriptors untouched, not yet
 * on any free list (state PG_NONE: nobody else reads it as a block). */
struct zone_chunk {
	struct arena *arena;
	struct page *first;	/* descriptor of its first page */
	size_t pages;		/* a multiple of 2^MAX_PAGE_ORDER */
};

/*
 * Commits the next chunk for a zone (its current arena, a smaller step, an arena of its node
 * that gave space back, or a new arena), with no lock held; the caller owns the arenas' ends
 * (g->committing).  False
 * when the address space or memory is exhausted (c untouched).  The kernel's add_memory; the
 * memmap init is deferred to the growers that take the chunk's blocks (zone.c: __zone_grow).
 */
bool zone_grow_prepare(struct zone_grower *g, const struct zone_grow_req *r, struct zone_chunk *c);

/*
 * Touches (writes) the descriptor pg so that its page is faulted in now, outside any lock;
 * pg must be on no list (PG_NONE, unpublished): only freed_ms, zero in a fresh descriptor,
 * is written.
 */
static inline void zone_grow_touch(struct page *pg)
{
	__atomic_store_n(&pg->freed_ms, 0, __ATOMIC_RELAXED);
}

/* Touches every page of descriptors of the n pages from first (one write per page of
 * descriptors: 64 descriptors, 256 KiB of memory, each), so that no split or merge of them
 * faults under the zone lock; the same rule as zone_grow_touch.  The kernel initialises a
 * section's memmap before its pages reach the buddy (memmap_init_range, or
 * deferred_init_memmap's threads in parallel); no lock held. */
static inline void zone_grow_touch_range(struct page *first, size_t n)
{
	for (size_t i = 0; i < n; i += PAGE_SIZE / sizeof(struct page))
		zone_grow_touch(first + i);
}

#endif
