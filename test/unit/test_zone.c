/*
 * test_zone.c - the buddy allocator against a model: random sequences of block
 * allocations and frees (and page runs, with in-place extension), checking after every
 * few steps that free blocks are aligned, fully merged, disjoint from live blocks, and
 * that free + allocated pages == managed pages.  Ends with everything merged back into
 * 4 MiB blocks.
 */
#include "unit.h"
#include "config.h"
#include "zone.h"
#include "zone_purge.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define MAXLIVE 2000
struct blk {
	struct page *pg;
	size_t npages;
	int run; /* 1: page run, 0: block of 2^order */
	unsigned order;
};
static struct blk live[MAXLIVE];
static int nlive;
static unsigned char *owner; /* per pfn in arena 0: 1 = allocated */
static size_t live_pages;

static void mark(struct page *pg, size_t n, int v)
{
	size_t pfn = page_pfn(pg);
	for (size_t i = 0; i < n; i++) {
		CHECK(owner[pfn + i] != v); /* allocating an allocated page / freeing a free one */
		owner[pfn + i] = (unsigned char)v;
	}
}

static void check_invariants(struct zone *z)
{
	size_t free_pages = 0, dirty = 0;
	struct arena *a = &pcpm_arena0;
	size_t limit = atomic_load(&a->committed) >> PAGE_SHIFT;
	for (unsigned o = 0; o < NR_PAGE_ORDERS; o++) {
		size_t n = 0;
		for (int kind = 0; kind < 2; kind++) {
		struct list_head *h = &z->free_area[o].free_list[kind];
		for (struct list_head *e = h->next; e != h; e = e->next, n++) {
			struct page *pg = (struct page *)e;
			CHECK_EQ(pg->flags & PG_DIRTY, kind); /* on the list of its residency */
			size_t pfn = page_pfn(pg);
			CHECK_EQ(pg->state, PG_BUDDY);
			CHECK_EQ(pg->order, o);
			CHECK_EQ(pfn & ((1UL << o) - 1), 0); /* naturally aligned */
			for (size_t i = 0; i < (1UL << o); i++)
				CHECK(owner[pfn + i] == 0);
			if (o < MAX_PAGE_ORDER) { /* fully merged: the buddy is not a free block of o */
				size_t b = pfn ^ (1UL << o);
				if (b < limit) {
					struct page *bp = a->desc + b;
					CHECK(!(bp->state == PG_BUDDY && bp->order == o));
				}
			}
			free_pages += 1UL << o;
			if (kind)
				dirty += 1UL << o;
		}
		}
		CHECK_EQ(n, z->free_area[o].nr_free);
	}
	CHECK_EQ(free_pages, z->free_pages);
	CHECK_EQ(dirty, z->dirty_pages);
	CHECK_EQ(free_pages + live_pages, z->managed_pages);
}

static void free_live(struct zone *z, int i)
{
	struct blk *b = &live[i];
	mark(b->pg, b->npages, 0);
	live_pages -= b->npages;
	if (b->run)
		zone_free_run(z, b->pg, b->npages);
	else
		zone_free_pages(z, b->pg, b->order);
	live[i] = live[--nlive];
}

/* Allocates a block of order o (naturally aligned), marks it dirty and records it as live. */
static void alloc_live_order(struct zone *z, unsigned o)
{
	struct page *pg = zone_alloc_pages(z, o);
	CHECK(pg);
	CHECK_EQ(page_pfn(pg) & ((1UL << o) - 1), 0);
	pg->flags |= PG_DIRTY;
	mark(pg, 1UL << o, 1);
	live_pages += 1UL << o;
	live[nlive++] = (struct blk){ pg, 1UL << o, 0, o };
}

int main(void)
{
	pcpm_config_init();
	pcpm_cfg.arena_chunk_mb = 8; /* grow often: growth is part of what is tested */
	struct zone *z = &pcpm_zone;
	pcpm_zone_init(z);
	owner = calloc(1UL << 24, 1);
	unsigned long long seed = 42;

	/* the zone's first 4 MiB block goes in as an order-ZONE_YOUNG_ORDER block (the rest
	 * deferred): splitting it gives one free block per lower order, none above */
	struct page *p0 = zone_alloc_pages(z, 0);
	CHECK(p0);
	live[nlive++] = (struct blk){ p0, 1, 0, 0 };
	mark(p0, 1, 1);
	live_pages = 1;
	for (unsigned o = 0; o < MAX_PAGE_ORDER; o++)
		CHECK_EQ(z->free_area[o].nr_free, o < ZONE_YOUNG_ORDER ? 1 : 0);
	CHECK_EQ(z->managed_pages, 1UL << ZONE_YOUNG_ORDER);
	check_invariants(z);
	/* an order the free lists lack brings in the deferred pieces, merged with the free
	 * ones: with p0 freed, the block is whole again */
	struct page *big = zone_alloc_pages(z, MAX_PAGE_ORDER - 1);
	CHECK(big);
	CHECK_EQ(z->managed_pages, 1UL << MAX_PAGE_ORDER);
	CHECK_EQ(z->young_off, 0);
	zone_free_pages(z, big, MAX_PAGE_ORDER - 1);
	free_live(z, 0);
	live_pages = 0;
	/* the peak of pages in use (stats: zone_used_peak) stays after the frees: p0 and big */
	CHECK_EQ(z->in_use_max, 1 + (1UL << (MAX_PAGE_ORDER - 1)));
	CHECK_EQ(z->free_area[MAX_PAGE_ORDER].nr_free, 1);
	for (unsigned o = 0; o < MAX_PAGE_ORDER; o++)
		CHECK_EQ(z->free_area[o].nr_free, 0);
	/* and a 4 MiB block splits as the kernel's does: one free block per lower order */
	p0 = zone_alloc_pages(z, 0);
	CHECK(p0);
	live[nlive++] = (struct blk){ p0, 1, 0, 0 };
	mark(p0, 1, 1);
	live_pages = 1;
	for (unsigned o = 0; o < MAX_PAGE_ORDER; o++)
		CHECK_EQ(z->free_area[o].nr_free, 1);
	check_invariants(z);

	for (int step = 0; step < 200000; step++) {
		unsigned long long r = rnd(&seed);
		if (nlive > 0 && (nlive == MAXLIVE || r % 100 < 45)) {
			free_live(z, (int)((r >> 8) % (unsigned)nlive));
		} else if (r % 100 < 80) {
			unsigned o = (unsigned)((r >> 16) % (MAX_PAGE_ORDER + 1));
			if (o > 6 && (r >> 30) % 4)
				o = (unsigned)((r >> 20) % 4); /* mostly small */
			alloc_live_order(z, o);
		} else {
			size_t n = 1 + (size_t)((r >> 12) % 700);
			unsigned al = (unsigned)((r >> 40) % 3);
			struct page *pg = zone_alloc_run(z, n, al);
			CHECK(pg);
			CHECK_EQ(page_pfn(pg) & ((1UL << al) - 1), 0);
			mark(pg, n, 1);
			live_pages += n;
			/* try growing in place; on success the model takes the extra pages */
			size_t m = n + 1 + (size_t)((r >> 50) % 64);
			size_t pfn = page_pfn(pg);
			int all_free = 1;
			size_t lim = atomic_load(&pcpm_arena0.committed) >> PAGE_SHIFT;
			if (z->grow_next != z->grow_end) /* committed, not yet taken by a grower */
				lim = MIN(lim, page_pfn(z->grow_next));
			for (size_t q = pfn + n; q < pfn + m; q++)
				if (q >= lim || owner[q])
					all_free = 0;
			bool ok = zone_extend_run(z, pg, n, m);
			/* pages not owned by a live block are free in the zone: both must agree */
			CHECK_EQ(ok, all_free);
			if (ok) {
				for (size_t q = pfn + n; q < pfn + m; q++)
					owner[q] = 1;
				live_pages += m - n;
				n = m;
			}
			live[nlive++] = (struct blk){ pg, n, 1, 0 };
		}
		if (step % 97 == 0)
			check_invariants(z);
	}
	while (nlive)
		free_live(z, nlive - 1);
	check_invariants(z);
	for (unsigned o = 0; o < MAX_PAGE_ORDER; o++)
		CHECK_EQ(z->free_area[o].nr_free, 0);
	CHECK_EQ(z->free_area[MAX_PAGE_ORDER].nr_free << MAX_PAGE_ORDER, z->managed_pages);

	/* purge: everything written is dirty and goes back; then nothing is left to purge */
	size_t purged = zone_purge(z, 0, 0);
	CHECK(purged > 0);
	CHECK_EQ(zone_purge(z, 0, 0), 0);
	/* a purged 4 MiB block gave back the descriptor pages after its head's (15 of 16) ... */
	struct page *head = (struct page *)z->free_area[MAX_PAGE_ORDER].free_list[FREE_CLEAN].next;
	size_t dpp = PAGE_SIZE / sizeof(struct page);
	size_t ndesc = ((1UL << MAX_PAGE_ORDER) - dpp) * sizeof(struct page) / PAGE_SIZE;
	unsigned char vec[64];
	CHECK(ndesc <= sizeof(vec));
	CHECK_EQ(mincore(head + dpp, ndesc * PAGE_SIZE, vec), 0);
	size_t resident = 0;
	for (size_t i = 0; i < ndesc; i++)
		resident += vec[i] & 1;
	CHECK_EQ(resident, 0);
	/* ... and splitting purged blocks again (descriptors read back as zero) keeps every
	 * invariant: all orders, then everything freed and merged back */
	for (int step = 0; step < 3000; step++) {
		unsigned long long r = rnd(&seed);
		if (nlive > 0 && (nlive == MAXLIVE || r % 100 < 40)) {
			free_live(z, (int)((r >> 8) % (unsigned)nlive));
			continue;
		}
		unsigned o = (unsigned)((r >> 16) % (MAX_PAGE_ORDER + 1));
		alloc_live_order(z, o);
		if (step % 53 == 0)
			check_invariants(z);
	}
	while (nlive)
		free_live(z, nlive - 1);
	check_invariants(z);
	CHECK_EQ(z->free_area[MAX_PAGE_ORDER].nr_free << MAX_PAGE_ORDER, z->managed_pages);

	/* a run a signal handler freed (deferred, drained by the next lock holder) goes back
	 * dirty even when it was handed out clean: the handler may have written it, and calloc
	 * takes a clean block for zeroed */
	zone_purge(z, 0, 0);
	CHECK_EQ(z->dirty_pages, 0);
	struct page *sig = zone_alloc_pages(z, 0);
	CHECK(sig);
	CHECK_EQ(sig->flags & PG_DIRTY, 0);
	sig->state = PG_LARGE;
	sig->npages = 1;
	zone_free_run_nested(z, sig);
	zone_lock(z);
	zone_unlock(z);
	CHECK(z->dirty_pages >= 1);
	check_invariants(z);

	/* address space back (ulimit -v: zone_shrink_arenas): with nothing live, every arena
	 * of the zone is unmapped down to nothing, its pages are foreign, and the zone grows
	 * again in the same arenas (no new one), keeping every invariant */
	int arenas = atomic_load(&pcpm_nr_arenas);
	char *base0 = pcpm_arena0.base;
	size_t was = z->managed_pages;
	CHECK(zone_shrink_arenas(z) >= was << PAGE_SHIFT); /* (and the reservations past it) */
	CHECK_EQ(z->managed_pages, 0);
	CHECK_EQ(z->free_pages, 0);
	CHECK_EQ(atomic_load(&pcpm_arena0.committed), 0);
	CHECK(pcpm_page_of(base0) == NULL);
	errno = 0;
	CHECK(mincore(base0, PAGE_SIZE, vec) == -1 && errno == ENOMEM); /* unmapped */
	CHECK_EQ(zone_shrink_arenas(z), 0);
	for (int step = 0; step < 3000; step++) {
		unsigned long long r = rnd(&seed);
		if (nlive > 0 && (nlive == MAXLIVE || r % 100 < 40)) {
			free_live(z, (int)((r >> 8) % (unsigned)nlive));
			continue;
		}
		alloc_live_order(z, (unsigned)((r >> 16) % (MAX_PAGE_ORDER + 1)));
		if (step % 53 == 0)
			check_invariants(z);
	}
	CHECK_EQ(atomic_load(&pcpm_nr_arenas), arenas);
	CHECK(atomic_load(&pcpm_arena0.committed) > 0 && pcpm_arena0.base == base0);
	while (nlive)
		free_live(z, nlive - 1);
	check_invariants(z);
	CHECK_EQ(z->free_area[MAX_PAGE_ORDER].nr_free << MAX_PAGE_ORDER, z->managed_pages);
	printf("zone: %zu pages managed, %zu bytes purged, %llu grows\n", z->managed_pages, purged,
	       (unsigned long long)z->zone_grow);
	return 0;
}
