/*
 * zone.c - the buddy allocator (see zone.h; kernel-pcp.md §4.3 "buddy basics", §12.1).
 * Calls zone_grow.c (the system calls of a growth, with the zone lock dropped) and the arena
 * layer (descriptors); called by zone_purge.c, pcp, large and the periodic work.
 */
#include "zone.h"
#include "config.h"
#include "stat_counters.h"
#include "vg.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* No alignment above a cache line for .bss objects: a larger one would start .bss on a
 * page of its own, and the byte crtstuff writes at exit (completed.0, first in .bss) would
 * fault that page in every process; at 64 it shares the page of .data, already written. */
struct zone pcpm_zones[MAX_NUMNODES];
_Atomic int pcpm_nr_zones = 1;
pcpm_lock_t pcpm_zones_lock = PCPM_LOCK_INIT;

void pcpm_zone_init(struct zone *z)
{
	z->node = (int)(z - pcpm_zones);
	z->bind = -1;
	/* as init.c: memcheck mode wins over secure mode */
	z->far_guard = pcpm_cfg.secure && pcpm_cfg.secure_far_guard && !pcpm_vg;
	for (int o = 0; o < NR_PAGE_ORDERS; o++)
	{
		list_init(&z->free_area[o].free_list[FREE_CLEAN]);
		list_init(&z->free_area[o].free_list[FREE_DIRTY]);
	}
	atomic_store_explicit(&z->last_purge_ms, pcpm_now_ms(), memory_order_relaxed);
}

static void __free_pages_range(struct zone *z, struct arena *a, size_t pfn, size_t npages,
			       uint8_t flags, uint64_t now_ms);

void zone_lock(struct zone *z)
{
	lockstat_lock(&z->lock, &z->ls);
	if (unlikely(atomic_load_explicit(&z->deferred, memory_order_relaxed))) {
		struct page *pg = atomic_exchange_explicit(&z->deferred, NULL, memory_order_acquire);
		uint64_t now = pcpm_now_ms();
		while (pg) {
			struct page *next = (struct page *)pg->lru.next;
			__free_pages_range(z, arena_of_page(pg), page_pfn(pg), pg->npages, pg->flags, now);
			pg = next;
		}
	}
}

void zone_free_run_nested(struct zone *z, struct page *pg)
{
	struct page *h = atomic_load_explicit(&z->deferred, memory_order_relaxed);
	pg->flags |= PG_DIRTY; /* the handler may have written it: calloc must not take it as zeroed */
	do
		pg->lru.next = (struct list_head *)h;
	while (!atomic_compare_exchange_weak_explicit(&z->deferred, &h, pg, memory_order_release,
						      memory_order_relaxed));
}

static inline void set_buddy(struct page *pg, unsigned order, uint8_t flags, uint8_t arena)
{
	pg->state = PG_BUDDY;
	pg->order = order;
	pg->flags = flags;
	pg->arena = arena;
}

static inline void add_free(struct zone *z, struct page *pg, unsigned order, bool tail)
{
	struct list_head *l = &z->free_area[order].free_list[pg->flags & PG_DIRTY];
	if (tail)
		list_add_tail(&pg->lru, l);
	else
		list_add(&pg->lru, l);
	z->free_area[order].nr_free++;
	z->free_pages += 1UL << order;
	if (pg->flags & PG_DIRTY)
		z->dirty_pages += 1UL << order;
}


/*
 * The zone's first MAX_PAGE_ORDER block goes to the buddy in pieces, as the kernel's
 * deferred struct page init (deferred_grow_zone) initialises memory as it is needed: an
 * order-ZONE_YOUNG_ORDER block at its start, then its buddies of orders ZONE_YOUNG_ORDER,
 * ZONE_YOUNG_ORDER + 1, ... MAX_PAGE_ORDER - 1, each when the free lists run dry.  Splitting the
 * whole block at the first refill wrote the heads at +64, +128, +256, +512 pages: 4 pages
 * of descriptors, 4 page faults in every process, that a shell never needs.  Later blocks go
 * in whole (zone_release: at the tail, freed_ms 0).
 */
static void zone_release(struct zone *z, struct page *pg, unsigned order, uint8_t arena)
{
	set_buddy(pg, order, 0, arena);
	pg->freed_ms = 0;
	add_free(z, pg, order, true);
	z->managed_pages += 1UL << order;
}

/* A piece of committed memory a grower took to publish: up to ZONE_GROW_PIECE whole
 * MAX_PAGE_ORDER blocks of the committed chunk, or a piece of the young block (young: merged
 * like a freed block). */
struct zone_piece {
	struct page *first;
	size_t pages;
	struct arena *arena;
	bool young;
};

/* Takes the next piece to publish (the young block's first, its next piece, or the chunk's
 * next block), in address order.  Zone lock held.  False when none is left. */
static bool zone_take_piece(struct zone *z, struct zone_piece *p)
{
	if (z->young_off || z->young_head) {
		size_t off = z->young_head ? 0 : z->young_off;
		unsigned order = off ? (unsigned)__builtin_ctzl(off) : ZONE_YOUNG_ORDER;
		*p = (struct zone_piece){ z->young + off, 1UL << order, z->young_arena, true };
		z->young_head = false;
		z->young_off = off + (1UL << order) < (1UL << MAX_PAGE_ORDER) ? off + (1UL << order) : 0;
		return true;
	}
	if (z->grow_next == z->grow_end && z->ahead_pages) {
		/* the chunk committed ahead: its blocks now */
		z->grow_arena = z->ahead_arena;
		z->grow_next = z->ahead_first;
		z->grow_end = z->ahead_first + z->ahead_pages;
		z->ahead_pages = 0;
	}
	if (z->grow_next == z->grow_end)
		return false;
	/* half of what is left (rounded up), so that the growers who ran dry with this one
	 * find blocks of the same chunk rather than commit chunks of their own */
	size_t left = (size_t)(z->grow_end - z->grow_next) >> MAX_PAGE_ORDER;
	size_t n = MIN((left + 1) / 2, ZONE_GROW_PIECE) << MAX_PAGE_ORDER;
	*p = (struct zone_piece){ z->grow_next, n, z->grow_arena, false };
	z->grow_next += n;
	return true;
}

/* online_pages for one piece whose descriptors were faulted in outside: a block goes onto
 * free_area[MAX_PAGE_ORDER] at the tail (untouched memory is used last); a young piece merges
 * with its free buddies like a freed block, so once all of them are in and free the block
 * is whole again (neither is counted as a free: pgfree_zone).  Zone lock held. */
static void __zone_publish_piece(struct zone *z, const struct zone_piece *p)
{
	uint8_t idx = (uint8_t)p->arena->idx;
	if (p->young) {
		p->first->arena = idx;
		unsigned order = (unsigned)__builtin_ctzl(p->pages);
		z->managed_pages += p->pages;
		__free_one_page(z, p->first, order, 0);
		z->pgfree_zone -= p->pages;
		return;
	}
	for (size_t i = 0; i < p->pages; i += 1UL << MAX_PAGE_ORDER) {
		struct page *pg = p->first + i;
		if (unlikely(pcpm_vg) && pg == p->arena->desc) {
			/* memcheck mode: the arena header points at page 0; a block there would
			 * never look leaked.  Pages 1.. go in as the largest aligned blocks. */
			size_t n = 1UL << MAX_PAGE_ORDER;
			z->managed_pages += n;
			__free_pages_range(z, p->arena, (size_t)(pg - p->arena->desc) + 1, n - 1,
					   pg[1].flags, 0);
			z->pgfree_zone -= n - 1;
			continue;
		}
		zone_release(z, pg, MAX_PAGE_ORDER, idx);
	}
}

/* add_memory's end: the chunk zone_grow_prepare committed becomes blocks to take; the zone's
 * first one is its young block (far guards: none, its pieces would be split without
 * guards).  A chunk committed ahead waits behind the current chunk's last blocks (ahead_*).
 * Zone lock held. */
static void __zone_grow_commit(struct zone *z, const struct zone_chunk *c)
{
	z->zone_grow++;
	z->grow_chunk = c->pages;
	if (z->grow_next != z->grow_end) {
		z->ahead_first = c->first;
		z->ahead_pages = c->pages;
		z->ahead_arena = c->arena;
		return;
	}
	z->grow_arena = c->arena;
	z->grow_next = c->first;
	z->grow_end = c->first + c->pages;
	if (z->managed_pages == 0 && !z->young_off && !z->young_head && !pcpm_vg && !z->max_pages && !z->far_guard) {
		z->young = c->first;
		z->young_arena = c->arena; /* (its head's descriptor says so only once published) */
		z->young_head = true;
		z->grow_next += 1UL << MAX_PAGE_ORDER;
	}
}

void (*pcpm_zone_grow_hook)(struct zone *z, int stage);

/* Sleeps until the running commit is published (seq moves), zone lock dropped meanwhile.
 * Lock held on entry and return. */
static void zone_grow_wait(struct zone *z)
{
	struct zone_grower *g = &z->grower;
	uint32_t seq = atomic_load_explicit(&g->seq, memory_order_relaxed);
	g->waiters++;
	zone_unlock(z);
	if (unlikely(pcpm_zone_grow_hook))
		pcpm_zone_grow_hook(z, ZONE_GROW_WAIT);
	uint64_t t0 = pcpm_now_ns();
	while (atomic_load_explicit(&g->seq, memory_order_acquire) == seq)
		syscall(SYS_futex, (uint32_t *)&g->seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
	uint64_t t = pcpm_now_ns() - t0;
	zone_lock(z);
	g->waiters--;
	g->waits++;
	g->wait_ns += t;
}

/* Commits a chunk with no lock held (add_memory) and hands it to the zone as blocks to take
 * (__zone_grow_commit), for the grower that set committing.  Lock held on entry and return. */
static bool zone_grow_commit(struct zone *z)
{
	struct zone_grower *g = &z->grower;
	struct zone_grow_req req = { .node = z->node, .os_node = z->os_node, .bind = z->bind,
				     .managed_pages = z->managed_pages };
	zone_unlock(z);
	if (unlikely(pcpm_zone_grow_hook)) {
		pcpm_zone_grow_hook(z, ZONE_GROW_WAIT);
		pcpm_zone_grow_hook(z, ZONE_GROW_COMMIT);
	}
	struct zone_chunk c = { 0 };
	bool ok = zone_grow_prepare(g, &req, &c);
	zone_lock(z);
	if (ok)
		__zone_grow_commit(z, &c);
	g->committing = false;
	atomic_store_explicit(&g->seq, atomic_load_explicit(&g->seq, memory_order_relaxed) + 1,
			      memory_order_release);
	if (g->waiters) {
		/* (the wake is a system call too: not under the lock) */
		zone_unlock(z);
		syscall(SYS_futex, (uint32_t *)&g->seq, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
		zone_lock(z);
	}
	return ok;
}

/* A chunk of this many blocks or more is committed ahead: its grower that takes a piece and
 * leaves ZONE_GROW_PIECE blocks or fewer commits the next chunk, so that the growers after it
 * find blocks instead of sleeping through its system calls (memblock's reservation ahead).
 * The young zone's small chunks (4, 4 and 8 MiB) are not: a short process keeps the commit
 * charge and mapped size it needs. */
#define ZONE_GROW_AHEAD_MIN (4UL << MAX_PAGE_ORDER)

bool __zone_grow(struct zone *z)
{
	struct zone_grower *g = &z->grower;
	struct zone_piece p;
	if (zone_take_piece(z, &p)) {
		bool ahead = !p.young && !g->committing && !z->max_pages && !z->ahead_pages &&
			     z->grow_chunk >= ZONE_GROW_AHEAD_MIN &&
			     (size_t)(z->grow_end - z->grow_next) <= ZONE_GROW_PIECE << MAX_PAGE_ORDER;
		if (ahead)
			g->committing = true;
		/* deferred memmap init: this grower's page faults, nobody waits for them */
		zone_unlock(z);
		if (unlikely(pcpm_zone_grow_hook))
			pcpm_zone_grow_hook(z, ZONE_GROW_TOUCH);
		uint64_t t0 = pcpm_now_ns();
		zone_grow_touch_range(p.first, p.pages);
		__atomic_fetch_add(&g->grow_ns, pcpm_now_ns() - t0, __ATOMIC_RELAXED);
		zone_lock(z);
		__zone_publish_piece(z, &p);
		if (ahead)
			(void)zone_grow_commit(z);
		return true;
	}
	if (z->max_pages && z->managed_pages >= z->max_pages)
		return false; /* exhausted: the caller falls back to another node's zone */
	if (g->committing) {
		/* another grower is committing: its chunk is what we need */
		zone_grow_wait(z);
		return true;
	}
	g->committing = true;
	return zone_grow_commit(z);
}

/* Free 4 MiB blocks the on-free shrink leaves at the growing arena's end, so a program that
 * frees and takes back a block there does not unmap and map it every time: glibc keeps a
 * trim threshold for the same reason; 8 MiB covers one MAX_PAGE_ORDER block taken and given
 * back and a second one beside it. */
#define ZONE_SHRINK_SLACK 2

/* Zone lock held and no commit running (the committer owns the arenas' ends).  slack: blocks kept at
 * the end of the arena being grown (0: none). */
static size_t __zone_shrink_arenas(struct zone *z, unsigned slack)
{
	size_t bytes = 0;
	z->shrink_pending = false;
	int na = atomic_load_explicit(&pcpm_nr_arenas, memory_order_acquire);
	for (int i = 0; i < na; i++) {
		struct arena *a = pcpm_arenas[i];
		if (!a || a->node != z->node)
			continue;
		size_t c = atomic_load_explicit(&a->committed, memory_order_relaxed), nc = c;
		/* whole free MAX_PAGE_ORDER blocks at the top (the young block, in pieces, and
		 * memcheck mode's page 0 never form one); the lowest `keep` of them stay */
		size_t free_top = 0;
		while (free_top < c) {
			struct page *pg = a->desc + ((c - free_top - (4UL << 20)) >> PAGE_SHIFT);
			if (pg->state != PG_BUDDY || pg->order != MAX_PAGE_ORDER)
				break;
			free_top += 4UL << 20;
		}
		size_t keep = a == z->grower.arena ? MIN(free_top, (size_t)slack << 22) : 0;
		while (nc > c - free_top + keep) {
			struct page *pg = a->desc + ((nc - (4UL << 20)) >> PAGE_SHIFT);
			__del_page_from_free_list(z, pg, MAX_PAGE_ORDER);
			z->managed_pages -= 1UL << MAX_PAGE_ORDER;
			nc -= 4UL << 20;
		}
		if (a->reserved == nc)
			continue;
		bytes += a->reserved - nc;
		pcpm_arena_shrink(a, nc);
	}
	if (bytes)
		pcpm_verbose("zone %d: %zu MiB of address space unmapped (free at the arenas' ends)",
			     z->node, bytes >> 20);
	return bytes;
}

void __zone_shrink_pending(struct zone *z)
{
	/* while a chunk is committed the arenas' ends are the committer's; the zone wants its
	 * memory anyway, and shrink_pending stays for a later unlock */
	if (z->grower.committing)
		return;
	(void)__zone_shrink_arenas(z, ZONE_SHRINK_SLACK);
}

size_t zone_shrink_arenas(struct zone *z)
{
	zone_lock(z);
	while (z->grower.committing)
		zone_grow_wait(z);
	size_t bytes = __zone_shrink_arenas(z, 0);
	zone_unlock(z);
	return bytes;
}

/* expand(): split a 2^high block down to 2^low, returning the upper halves. */
static void expand(struct zone *z, struct page *pg, unsigned low, unsigned high)
{
	while (high > low) {
		high--;
		struct page *half = pg + (1UL << high);
		set_buddy(half, high, pg->flags, pg->arena);
		half->freed_ms = pg->freed_ms;
		add_free(z, half, high, false);
	}
}

/*
 * Far guards (zone.h): the free MAX_PAGE_ORDER block pg (off the lists) is split for blocks
 * of 1 MiB and less: its second and fourth MiB become guard pages for good (no longer
 * managed: their descriptors stay PG_NONE, never a buddy to merge with, so the block never
 * forms again), its third MiB goes to the free lists; the first is the caller's to expand.
 * One system call pair per 4 MiB block in its lifetime, under the zone lock.
 */
static void far_guard_split(struct zone *z, struct page *pg)
{
	const unsigned fo = ZONE_FAR_GUARD_ORDER;
	char *b = page_address(pg);
	if (!pcpm_os_guard_install(b + (PAGE_SIZE << fo), PAGE_SIZE << fo) ||
	    !pcpm_os_guard_install(b + (3 * PAGE_SIZE << fo), PAGE_SIZE << fo))
		pcpm_verbose("zone: a far guard could not be installed at %p", (void *)b);
	z->managed_pages -= 2UL << fo;
	struct page *third = pg + (2UL << fo);
	set_buddy(third, fo, pg->flags, pg->arena);
	third->freed_ms = pg->freed_ms;
	add_free(z, third, fo, false);
}

/* __rmqueue_smallest(): the smallest block of at least 2^order on one kind of list.  With
 * far guards, blocks of ZONE_FAR_GUARD_ORDER and less come only from guarded stretches:
 * blocks of those orders or a MAX_PAGE_ORDER block split with its guards, never one of the
 * orders between (halves of unguarded blocks, kept for page runs of 2-4 MiB). */
static struct page *__rmqueue_smallest(struct zone *z, unsigned order, int kind)
{
	bool far = z->far_guard && order <= ZONE_FAR_GUARD_ORDER;
	for (unsigned o = order; o < NR_PAGE_ORDERS; o++) {
		if (far && o > ZONE_FAR_GUARD_ORDER && o < MAX_PAGE_ORDER)
			continue;
		struct list_head *l = &z->free_area[o].free_list[kind];
		if (list_empty(l))
			continue;
		struct page *pg = (struct page *)l->next;
		uint8_t flags = pg->flags;
		__del_page_from_free_list(z, pg, o);
		pg->flags = flags;
		if (far && o == MAX_PAGE_ORDER) {
			far_guard_split(z, pg);
			o = ZONE_FAR_GUARD_ORDER;
		}
		expand(z, pg, order, o);
		pg->order = order;
		z->pgalloc_zone += 1UL << order;
		if (z->managed_pages - z->free_pages > z->in_use_peak) {
			z->in_use_peak = z->managed_pages - z->free_pages;
			if (z->in_use_peak > z->in_use_max)
				z->in_use_max = z->in_use_peak;
		}
		return pg;
	}
	return NULL;
}

/* Resident memory first, then clean. */
struct page *__rmqueue(struct zone *z, unsigned order)
{
	struct page *pg = __rmqueue_smallest(z, order, FREE_DIRTY);
	return pg ? pg : __rmqueue_smallest(z, order, FREE_CLEAN);
}

/* __rmqueue, growing the zone (lock dropped meanwhile) until a block comes or it cannot
 * grow.  Lock held. */
static struct page *__rmqueue_grow(struct zone *z, unsigned order)
{
	for (;;) {
		struct page *pg = __rmqueue(z, order);
		if (pg || !__zone_grow(z))
			return pg;
	}
}

/*
 * __free_one_page: merge with the buddy (pfn ^ 2^order) while it is a free block of the same
 * order.  Buddies never cross an arena: arenas are 4 MiB aligned and sized in 4 MiB steps.
 */
void __free_one_page(struct zone *z, struct page *pg, unsigned order, uint64_t now_ms)
{
	struct arena *a = arena_of_page(pg);
	size_t pfn = (size_t)(pg - a->desc);
	size_t limit = atomic_load_explicit(&a->committed, memory_order_relaxed) >> PAGE_SHIFT;
	uint8_t flags = pg->flags;
	z->pgfree_zone += 1UL << order;
	while (order < MAX_PAGE_ORDER) {
		size_t bpfn = pfn ^ (1UL << order);
		if (bpfn >= limit)
			break;
		struct page *b = a->desc + bpfn;
		if (b->state != PG_BUDDY || b->order != order)
			break;
		flags |= b->flags;
		__del_page_from_free_list(z, b, order);
		pfn &= ~(1UL << order);
		order++;
	}
	pg = a->desc + pfn;
	set_buddy(pg, order, flags, (uint8_t)a->idx);
	pg->freed_ms = now_ms;
	if (unlikely(order == MAX_PAGE_ORDER && pcpm_as_limited))
		z->shrink_pending = true; /* address space to give back: zone_unlock */
	/* LIFO: the block just freed is reused first, while its pages are still resident
	 * and cache-hot; blocks nobody wants stay behind and get purged (growth adds at the
	 * tail, so untouched memory is used last). */
	add_free(z, pg, order, false);
}

int rmqueue_bulk(struct zone *z, unsigned order, int count, struct list_head *list)
{
	int i;
	zone_lock(z);
	for (i = 0; i < count; i++) {
		struct page *pg = __rmqueue_grow(z, order);
		if (!pg)
			break;
		pg->state = PG_PCP;
		list_add_tail(&pg->lru, list);
	}
	zone_unlock(z);
	return i;
}

struct page *zone_alloc_pages(struct zone *z, unsigned order)
{
	zone_lock(z);
	struct page *pg = __rmqueue_grow(z, order);
	zone_unlock(z);
	return pg;
}

int zone_alloc_bulk(struct zone *z, unsigned order, int count, struct page **pages)
{
	int i;
	zone_lock(z);
	for (i = 0; i < count; i++) {
		pages[i] = __rmqueue_grow(z, order);
		if (!pages[i])
			break;
	}
	zone_unlock(z);
	return i;
}

void zone_free_bulk(struct zone *z, unsigned order, int count, struct page **pages)
{
	uint64_t now = pcpm_now_ms();
	for (int i = 0; i < count; i++)
		pages[i]->flags |= PG_DIRTY;
	zone_lock(z);
	for (int i = 0; i < count; i++)
		__free_one_page(z, pages[i], order, now);
	zone_unlock(z);
}

void zone_free_pages(struct zone *z, struct page *pg, unsigned order)
{
	uint64_t now = pcpm_now_ms();
	pg->flags |= PG_DIRTY;
	zone_lock(z);
	__free_one_page(z, pg, order, now);
	zone_unlock(z);
}

/* Frees pages [pfn, pfn + npages) of arena a as maximal aligned blocks with the given flags
 * (the kernel's __free_pages_ok over a range; each block's head gets its arena and flags, so
 * no page of the range needs to carry them before).  Zone lock held. */
static void __free_pages_range(struct zone *z, struct arena *a, size_t pfn, size_t npages,
			       uint8_t flags, uint64_t now_ms)
{
	size_t end = pfn + npages;
	while (pfn < end) {
		unsigned o = pfn ? (unsigned)__builtin_ctzl(pfn) : MAX_PAGE_ORDER;
		if (o > MAX_PAGE_ORDER)
			o = MAX_PAGE_ORDER;
		while (pfn + (1UL << o) > end)
			o--;
		struct page *b = a->desc + pfn;
		b->arena = (uint8_t)a->idx;
		b->flags = flags;
		__free_one_page(z, b, o, now_ms);
		pfn += 1UL << o;
	}
}

struct page *zone_alloc_run(struct zone *z, size_t npages, unsigned align_order)
{
	unsigned order = MAX((unsigned)ilog2_ceil(npages), align_order);
	if (order > MAX_PAGE_ORDER)
		return NULL;
	zone_lock(z);
	struct page *pg = __rmqueue_grow(z, order);
	if (pg && npages < (1UL << order)) {
		/* the tail goes straight back (with the block's clean/dirty state); it cannot
		 * merge with the run we keep */
		z->pgalloc_zone -= (1UL << order) - npages;
		z->pgfree_zone -= (1UL << order) - npages;
		__free_pages_range(z, arena_of_page(pg), page_pfn(pg) + npages,
				   (1UL << order) - npages, pg->flags, pcpm_now_ms());
	}
	zone_unlock(z);
	return pg;
}

void zone_free_run(struct zone *z, struct page *pg, size_t npages)
{
	uint64_t now = pcpm_now_ms();
	pg->flags |= PG_DIRTY;
	zone_lock(z);
	__free_pages_range(z, arena_of_page(pg), page_pfn(pg), npages, pg->flags, now);
	zone_unlock(z);
}

/* Finds the free block containing pfn: buddy blocks are aligned, so at most 11 probes. */
static struct page *find_free_block(struct arena *a, size_t pfn, size_t limit, unsigned *order)
{
	for (unsigned o = 0; o <= MAX_PAGE_ORDER; o++) {
		size_t h = pfn & ~((1UL << o) - 1);
		if (h >= limit)
			continue;
		struct page *b = a->desc + h;
		if (b->state == PG_BUDDY && b->order == o) {
			*order = o;
			return b;
		}
	}
	return NULL;
}

bool zone_extend_run(struct zone *z, struct page *pg, size_t old_pages, size_t new_pages)
{
	struct arena *a = arena_of_page(pg);
	size_t lo = page_pfn(pg) + old_pages, hi = page_pfn(pg) + new_pages;
	zone_lock(z);
	size_t limit = atomic_load_explicit(&a->committed, memory_order_relaxed) >> PAGE_SHIFT;
	if (hi > limit) {
		zone_unlock(z);
		return false;
	}
	/* pass 1: is every page of [lo, hi) free? */
	unsigned o;
	for (size_t q = lo; q < hi;) {
		struct page *b = find_free_block(a, q, limit, &o);
		if (!b) {
			zone_unlock(z);
			return false;
		}
		q = page_pfn(b) + (1UL << o);
	}
	/* pass 2: take those blocks out and give back what lies outside [lo, hi) */
	uint64_t now = pcpm_now_ms();
	for (size_t q = lo; q < hi;) {
		struct page *b = find_free_block(a, q, limit, &o);
		size_t h = page_pfn(b), e = h + (1UL << o);
		uint8_t flags = b->flags;
		__del_page_from_free_list(z, b, o);
		z->pgalloc_zone += 1UL << o;
		if (h < lo)
			__free_pages_range(z, a, h, lo - h, flags, now);
		if (e > hi) /* (desc[hi] is no block's head: its arena byte may be unset) */
			__free_pages_range(z, a, hi, e - hi, flags, now);
		pg->flags |= flags;
		q = e;
	}
	zone_unlock(z);
	return true;
}

_Atomic int pcpm_zone_free_waiter;

void zone_wake_waiter(void)
{
	int one = 1;
	if (atomic_compare_exchange_strong(&pcpm_zone_free_waiter, &one, 0))
		syscall(SYS_futex, (int *)&pcpm_zone_free_waiter, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void zone_stats_add(struct pcpm_stats *s)
{
	struct lock_sum ls = { 0 };
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++) {
		struct zone *z = &pcpm_zones[n];
		s->pgalloc_zone += z->pgalloc_zone;
		s->pgfree_zone += z->pgfree_zone;
		lock_sum_add(&ls, &z->ls);
		s->zone_grow_waits += z->grower.waits;
		s->zone_grow_wait_ns += z->grower.wait_ns;
		s->zone_grow_ns += __atomic_load_n(&z->grower.grow_ns, __ATOMIC_RELAXED);
		s->purge_runs += z->purge_runs;
		s->purged_bytes += z->purged_bytes;
		s->zone_grow += z->zone_grow;
		s->zone_used_peak += z->in_use_max;
		s->mapped_bytes += z->managed_pages << PAGE_SHIFT;
	}
	PCPM_STATS_LOCK(s, zone, &ls);
}
