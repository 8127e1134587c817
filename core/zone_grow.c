/*
 * zone_grow.c - the slow half of a zone's growth, run with the zone lock free (see
 * zone_grow.h; kernel-pcp.md §12.1).  Every system call of a growth is here: arena
 * reservation and commit (mmap, mprotect), mbind and the radix map's leaves.  The page faults
 * of the new descriptors are taken later, block by block, by the growers that take the
 * blocks, with no lock held (zone.c).  Called by zone.c with no lock held, by the one grower
 * that owns the arenas' ends (zone_grower.committing); calls
 * the arena layer and os.c.
 */
#include "zone_grow.h"
#include "config.h"

/* Sizes below are in 4 MiB steps: one MAX_PAGE_ORDER block, the arenas' alignment. */
#define GROW_STEP (4UL << 20)

/* A new arena of node r->node, mbind'ed when the zone binds (the committer's; no lock held). */
static struct arena *grow_new_arena(struct zone_grower *g, const struct zone_grow_req *r)
{
	/* ask only for one 4 MiB block: under ulimit -v a large reservation may fail where a
	 * small one fits */
	struct arena *a = pcpm_arena_create(GROW_STEP);
	if (!a) {
		pcpm_verbose("zone: cannot grow: no arena can be reserved (out of address space)");
		return NULL;
	}
	/* before the first grow publishes its pages: a freed page finds its zone here */
	a->node = r->node;
	/* One mbind per arena, while nothing in it is faulted yet: the policy covers the whole
	 * reservation, and mprotect keeps it on the pieces it commits. */
	if (r->bind >= 0 &&
	    pcpm_os_bind_node(a->base, a->reserved, r->os_node, r->bind == NUMA_BIND_STRICT) != 0)
		g->mbind_failed++;
	return a;
}

/* An arena of this node that gave address space back (zone_shrink_arenas), grown again by
 * one step in its place before a new one is opened, so the arena slots last through any
 * number of bursts.  The committer's (committing serialises every change to the node's arenas). */
static struct page *grow_old_arena(struct zone_grower *g, const struct zone_grow_req *r)
{
	int na = atomic_load_explicit(&pcpm_nr_arenas, memory_order_acquire);
	for (int i = 0; i < na; i++) {
		struct arena *a = pcpm_arenas[i];
		if (!a || a == g->arena || a->node != r->node ||
		    atomic_load_explicit(&a->committed, memory_order_relaxed) >= a->span)
			continue;
		size_t at = atomic_load_explicit(&a->committed, memory_order_relaxed);
		struct page *first = pcpm_arena_grow(a, GROW_STEP);
		if (!first)
			continue;
		g->arena = a;
		/* the policy went with the unmapped range */
		if (r->bind >= 0 && pcpm_os_bind_node(a->base + at, GROW_STEP, r->os_node,
						      r->bind == NUMA_BIND_STRICT) != 0)
			g->mbind_failed++;
		return first;
	}
	return NULL;
}

bool zone_grow_prepare(struct zone_grower *g, const struct zone_grow_req *r, struct zone_chunk *c)
{
	uint64_t t0 = pcpm_now_ns();
	size_t chunk = ALIGN_UP((size_t)pcpm_cfg.arena_chunk_mb << 20, GROW_STEP);
	/* A young zone grows by what it has (4, 4, 8, 16, 32 MiB, then the full step): each
	 * MAX_PAGE_ORDER block added writes its head descriptor, a page of descriptors per
	 * block, so a first step of 64 MiB costs every process 16 page faults while a short
	 * one (a shell, a compiler pass) uses a few hundred KiB. */
	/* (whole 4 MiB steps: with far guards the zone manages less than it grew) */
	chunk = MIN(chunk, ALIGN_UP(MAX(r->managed_pages << PAGE_SHIFT, GROW_STEP), GROW_STEP));
	struct page *first = NULL;
	if (g->arena)
		first = pcpm_arena_grow(g->arena, chunk);
	if (!first && g->arena && chunk > GROW_STEP) {
		/* arena full (or refused): try a smaller step before opening a new arena */
		chunk = GROW_STEP;
		first = pcpm_arena_grow(g->arena, chunk);
	}
	if (!first) {
		chunk = GROW_STEP;
		first = grow_old_arena(g, r);
	}
	if (!first) {
		struct arena *a = grow_new_arena(g, r);
		if (!a)
			return false;
		g->arena = a;
		chunk = MIN(ALIGN_UP((size_t)pcpm_cfg.arena_chunk_mb << 20, GROW_STEP),
			    ALIGN_UP(MAX(r->managed_pages << PAGE_SHIFT, GROW_STEP), GROW_STEP));
		chunk = MIN(chunk, a->reserved);
		first = pcpm_arena_grow(a, chunk);
		if (!first && chunk > GROW_STEP) {
			chunk = GROW_STEP;
			first = pcpm_arena_grow(a, chunk);
		}
		if (!first) {
			pcpm_verbose("zone: cannot commit a new arena's first 4 MiB (out of memory)");
			return false;
		}
	}
	/* No first touch here: the chunk's descriptors (64 KiB per 4 MiB block, 16 page
	 * faults) are faulted in block by block by the growers that take the blocks, with no
	 * lock held (zone.c, __zone_grow): faulting a 64 MiB chunk's 256 pages here held the
	 * grower's lock 230-340 us and made every other grower wait for them (fifth round). */
	size_t n = chunk >> PAGE_SHIFT;
	c->arena = g->arena;
	c->first = first;
	c->pages = n;
	/* atomic: growers that fault blocks in add theirs with no lock held */
	__atomic_fetch_add(&g->grow_ns, pcpm_now_ns() - t0, __ATOMIC_RELAXED);
	return true;
}
