/*
 * test_zone_grow.c - the zone grows outside its lock, one grower at a time, and the lock
 * profile counts what it sees (issue 22, build items 6 and 7):
 *   - while a grower commits memory (hook at ZONE_GROW_COMMIT: where the system calls run),
 *     another thread takes the zone lock and allocates from the free lists;
 *   - two threads whose free lists ran dry at the same time grow the zone once: the second
 *     sleeps until the first's chunk is published, with no lock held across the commit, and
 *     takes a block of it (zone_grow counts one growth, waits one sleeper, both get a block);
 *   - growers do not wait for one another's page faults: while one faults in the
 *     descriptors of the blocks it took (hook at ZONE_GROW_TOUCH), no lock is held, and
 *     another grower grows and gets a block;
 *   - zone_alloc_bulk / zone_free_bulk move several blocks in one zone lock hold;
 *   - a hold of LOCKSTAT_LONG cycles or more is in the mean, the maximum and long_holds
 *     (and in the statistics keys);
 *   - the grower faults in every page of a new chunk's descriptors (none under the lock);
 *   - a chunk of 16 MiB or more is committed ahead, and the blocks left of the current
 *     chunk are taken before it (none lost);
 *   - the huge cache's periodic decay, and the zone's periodic purge, take no lock when
 *     there is nothing to decay or purge.
 */
#include "unit.h"
#include "config.h"
#include "huge.h"
#include "stat.h"
#include "zone.h"
#include "zone_purge.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

static struct zone *z;

/* --- 1. the zone lock is free while the zone grows --- */

static int lock_was_free = -1, other_blocks;

static void *take_zone_lock(void *arg)
{
	(void)arg;
	/* a trylock, so a zone that grows under its lock fails the check instead of hanging */
	int free_now = pcpm_trylock(&z->lock);
	if (lock_was_free != 0)
		lock_was_free = free_now;
	if (free_now) {
		pcpm_unlock(&z->lock);
		struct page *pg = zone_alloc_pages(z, 0); /* from the free lists: no growth */
		CHECK(pg);
		other_blocks++;
		zone_free_pages(z, pg, 0);
	}
	return NULL;
}

static int commits_seen;

static void hook_lock_free(struct zone *hz, int stage)
{
	if (hz != z || stage != ZONE_GROW_COMMIT)
		return;
	commits_seen++;
	pthread_t t;
	CHECK(pthread_create(&t, NULL, take_zone_lock, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
}

/* --- 2. two growers at once grow the zone once --- */

static _Atomic int b_waiting;
static pthread_t main_thread;
static pthread_t b_thread;
static struct page *b_block;

/* A second grower: one top-order block from the zone into *out. */
static void *grow_into(void *out)
{
	*(struct page **)out = zone_alloc_pages(z, MAX_PAGE_ORDER);
	return NULL;
}

static void hook_two_growers(struct zone *hz, int stage)
{
	if (hz != z || stage != ZONE_GROW_WAIT)
		return;
	if (!pthread_equal(pthread_self(), main_thread)) {
		atomic_store(&b_waiting, 1); /* B's free lists ran dry too: it goes for the lock */
		return;
	}
	if (b_waiting)
		return;
	/* A (this thread) found no block and dropped the zone lock: B now finds none either,
	 * before anybody grows */
	CHECK(pthread_create(&b_thread, NULL, grow_into, &b_block) == 0);
	while (!atomic_load(&b_waiting))
		sched_yield();
}

/* --- 2b. a grower faulting in its block's descriptors holds no lock --- */

static int touch_seen, locks_free_in_touch;
static struct page *c_block;

static void hook_touch(struct zone *hz, int stage)
{
	if (hz != z || stage != ZONE_GROW_TOUCH || !pthread_equal(pthread_self(), main_thread) ||
	    touch_seen++)
		return;
	/* the zone lock is not held while A's page faults run (nor is any commit running) */
	int zl = pcpm_trylock(&z->lock);
	if (zl)
		pcpm_unlock(&z->lock);
	locks_free_in_touch = zl && !z->grower.committing;
	/* C finds the lists dry too, takes the chunk's other block and gets it before A is done */
	pthread_t t;
	CHECK(pthread_create(&t, NULL, grow_into, &c_block) == 0);
	CHECK(pthread_join(t, NULL) == 0);
}

/* Takes every free page of the zone as order-MAX_PAGE_ORDER blocks (none smaller is free:
 * the caller freed everything, so the free memory is whole blocks). */
static int take_all(struct page **held, int max)
{
	int n = 0;
	while (z->free_pages) {
		CHECK(n < max);
		held[n] = zone_alloc_pages(z, MAX_PAGE_ORDER);
		CHECK(held[n]);
		n++;
	}
	return n;
}

int main(void)
{
	pcpm_config_init();
	pcpm_cfg.arena_chunk_mb = 8; /* two blocks per chunk once the zone has 8 MiB */
	pcpm_cfg.dirty_min_mb = 1024; /* no purge from the frees below: exact lock counts */
	z = &pcpm_zone;
	pcpm_zone_init(z);
	main_thread = pthread_self();

	/* 1. A young zone's first page; then a 4 MiB block needs the deferred pieces and a
	 * growth.  Each time the grower is in the commit stage, another thread takes the zone
	 * lock and gets a page from the free lists. */
	struct page *p0 = zone_alloc_pages(z, 0);
	CHECK(p0);
	pcpm_zone_grow_hook = hook_lock_free;
	struct page *big = zone_alloc_pages(z, MAX_PAGE_ORDER);
	pcpm_zone_grow_hook = NULL;
	CHECK(big);
	CHECK(commits_seen >= 1);
	CHECK_EQ(lock_was_free, 1);
	CHECK_EQ(other_blocks, commits_seen);
	/* 1b. No first touch under the zone lock: the grower faulted in every page of the new
	 * chunk's descriptors (16 per 4 MiB), not only its block heads, so no later split or
	 * merge of big faults with the lock held. */
	{
		size_t len = ((size_t)1 << MAX_PAGE_ORDER) * sizeof(struct page);
		unsigned char vec[((size_t)1 << MAX_PAGE_ORDER) * sizeof(struct page) / PAGE_SIZE];
		CHECK_EQ((uintptr_t)big % PAGE_SIZE, 0);
		CHECK(pcpm_os_resident(big, len, vec));
		for (size_t i = 0; i < sizeof(vec); i++)
			CHECK(vec[i] & 1);
	}
	zone_free_pages(z, big, MAX_PAGE_ORDER);
	zone_free_pages(z, p0, 0);
	CHECK_EQ(z->free_pages, z->managed_pages);

	/* 2. Grow the zone to 8 MiB or more, everything taken: the next chunk holds two blocks.
	 * A and B both find the lists empty; exactly one of them grows. */
	static struct page *held[64];
	int n = 0;
	while (z->managed_pages < 2UL << MAX_PAGE_ORDER || z->free_pages) {
		n += take_all(held + n, 64 - n);
		if (z->managed_pages < 2UL << MAX_PAGE_ORDER) {
			held[n] = zone_alloc_pages(z, MAX_PAGE_ORDER);
			CHECK(held[n]);
			n++;
		}
	}
	CHECK_EQ(z->free_pages, 0);
	uint64_t grows = z->zone_grow, seq = z->grower.seq, waits = z->grower.waits;
	pcpm_zone_grow_hook = hook_two_growers;
	struct page *a_block = zone_alloc_pages(z, MAX_PAGE_ORDER);
	CHECK(pthread_join(b_thread, NULL) == 0);
	pcpm_zone_grow_hook = NULL;
	CHECK(a_block && b_block && a_block != b_block);
	CHECK_EQ(z->zone_grow, grows + 1); /* one chunk of 8 MiB, not two */
	CHECK_EQ(z->grower.seq, seq + 1);
	CHECK_EQ(z->grower.waits, waits + 1); /* B slept on A's commit: no lock held across it */
	CHECK_EQ(z->free_pages, 0);
	held[n++] = a_block;
	held[n++] = b_block;

	/* 2b. Everything taken again (the chunk's two blocks too): A commits the next chunk
	 * and takes its blocks (up to ZONE_GROW_PIECE); while it faults their descriptors in,
	 * C finds the lists dry too and grows (the chunk's next blocks, or a chunk of its own)
	 * and gets a block, all without waiting for A. */
	CHECK_EQ(z->free_pages, 0);
	CHECK(z->grow_next == z->grow_end);
	grows = z->zone_grow;
	pcpm_zone_grow_hook = hook_touch;
	a_block = zone_alloc_pages(z, MAX_PAGE_ORDER);
	pcpm_zone_grow_hook = NULL;
	CHECK_EQ(touch_seen, 1);
	CHECK_EQ(locks_free_in_touch, 1);
	CHECK(a_block && c_block && a_block != c_block);
	CHECK(z->zone_grow >= grows + 1);
	held[n++] = a_block;
	held[n++] = c_block;
	while (z->free_pages) {
		CHECK(n < 64);
		held[n++] = zone_alloc_pages(z, MAX_PAGE_ORDER);
	}
	for (int i = 0; i < n; i++)
		zone_free_pages(z, held[i], MAX_PAGE_ORDER);

	/* 2c. A second node's zone: its young block lies in an arena of its own, and every
	 * piece of it, taken before it is published, names that arena (page_zone finds z1). */
	{
		struct zone *z1 = &pcpm_zones[1];
		pcpm_zone_init(z1);
		struct page *q = zone_alloc_pages(z1, 0);
		CHECK(q);
		CHECK(page_zone(q) == z1);
		CHECK(arena_of_page(q) != arena_of_page(a_block));
		memset(page_address(q), 1, PAGE_SIZE);
		struct page *q2 = zone_alloc_pages(z1, MAX_PAGE_ORDER - 1); /* every young piece */
		CHECK(q2 && page_zone(q2) == z1);
		zone_free_pages(z1, q2, MAX_PAGE_ORDER - 1);
		zone_free_pages(z1, q, 0);
		CHECK_EQ(z1->free_pages, z1->managed_pages);
		CHECK_EQ(z1->free_area[MAX_PAGE_ORDER].nr_free, 1);
	}

	/* 3. Bulk: eight order-4 blocks (a 64 KiB slab each) in one zone lock hold, and back
	 * in one more. */
	struct page *pages[8];
	uint64_t acq = z->ls.acquired;
	CHECK_EQ(zone_alloc_bulk(z, 4, 8, pages), 8);
	CHECK_EQ(z->ls.acquired, acq + 1);
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(page_pfn(pages[i]) & 15, 0);
		CHECK_EQ(pages[i]->state, PG_NONE);
		for (int j = 0; j < i; j++)
			CHECK(pages[i] != pages[j]);
	}
	size_t free_before = z->free_pages;
	zone_free_bulk(z, 4, 8, pages);
	CHECK_EQ(z->ls.acquired, acq + 2);
	CHECK_EQ(z->free_pages, free_before + 8 * 16);
	CHECK_EQ(z->free_pages, z->managed_pages);

	/* 3b. The periodic purge takes no lock to find that no dirty free page is there. */
	zone_purge(z, 0, 0);
	CHECK_EQ(z->dirty_pages, 0);
	acq = z->ls.acquired;
	zone_maybe_purge(z, pcpm_now_ms() + 3600000);
	CHECK_EQ(z->ls.acquired, acq);

	/* 4. A long hold is counted, in the mean, the maximum and long_holds. */
	uint64_t longs = z->ls.long_holds, total = z->ls.hold_cycles;
	zone_lock(z);
	uint64_t t0 = pcpm_cycles();
	while (pcpm_cycles() - t0 < 2 * (uint64_t)LOCKSTAT_LONG)
		;
	zone_unlock(z);
	CHECK_EQ(z->ls.long_holds, longs + 1);
	CHECK(z->ls.hold_max >= 2 * (uint64_t)LOCKSTAT_LONG);
	CHECK(z->ls.hold_cycles - total >= 2 * (uint64_t)LOCKSTAT_LONG);
	struct pcpm_stats st;
	memset(&st, 0, sizeof(st));
	zone_stats_add(&st);
	CHECK(st.zone_lock_long_holds >= 1);
	CHECK(st.zone_lock_long_hold_ns >= st.zone_lock_hold_max_ns);
	CHECK(st.zone_lock_hold_max_ns > 0);
	CHECK(st.zone_grow >= 2);
	arena_stats_add(&st); /* the arena's creation took create_lock and meta_lock */
	CHECK(st.arena_lock >= 2);

	/* 5. The huge cache: its decay takes the lock for a cached (resident) mapping, and none
	 * at all once the cache is empty (it looked at 16 slots under the lock before). */
	char *h = huge_alloc(8UL << 20, 16);
	CHECK(h);
	memset(h, 1, 8UL << 20);
	struct region *r = pcpm_region_of(h);
	CHECK(r && r->kind == REGION_HUGE);
	huge_free(r);
	CHECK(huge_cache_resident() > 0);
	memset(&st, 0, sizeof(st));
	huge_stats_add(&st);
	uint64_t hacq = st.huge_lock;
	CHECK(hacq >= 2); /* alloc and free were profiled */
	huge_cache_decay(pcpm_now_ms() + 3600000);
	memset(&st, 0, sizeof(st));
	huge_stats_add(&st);
	CHECK(st.huge_lock > hacq);
	CHECK(huge_cache_drain());
	memset(&st, 0, sizeof(st));
	huge_stats_add(&st);
	hacq = st.huge_lock;
	huge_cache_decay(pcpm_now_ms() + 7200000);
	memset(&st, 0, sizeof(st));
	huge_stats_add(&st);
	CHECK_EQ(st.huge_lock, hacq);

	/* 6. Commit ahead: once chunks are 16 MiB or more, the grower whose piece leaves at most
	 * ZONE_GROW_PIECE blocks commits the next chunk (after publishing its own piece), and
	 * the current chunk's last blocks are still taken before the new chunk's (none lost). */
	pcpm_cfg.arena_chunk_mb = 64;
	static struct page *more[256];
	int m = take_all(more, 256);
	struct page *o1 = NULL, *o2 = NULL;
	while (m < 200) {
		bool had = z->ahead_pages != 0;
		more[m] = zone_alloc_pages(z, MAX_PAGE_ORDER);
		CHECK(more[m]);
		m++;
		if (!had && z->ahead_pages) {
			o1 = z->grow_next; /* the current chunk's blocks left when it fired */
			o2 = z->grow_end;
			break;
		}
	}
	CHECK(o1 != NULL);
	CHECK(z->ahead_pages >= 4UL << MAX_PAGE_ORDER);
	CHECK(!z->grower.committing);
	size_t left = (size_t)(o2 - o1) >> MAX_PAGE_ORDER, seen = 0;
	CHECK(left <= ZONE_GROW_PIECE);
	for (int k = 0; k < (int)left + 8 && seen < left; k++) {
		CHECK(m < 256);
		more[m] = zone_alloc_pages(z, MAX_PAGE_ORDER);
		CHECK(more[m]);
		if (more[m] >= o1 && more[m] < o2)
			seen++;
		m++;
	}
	CHECK_EQ(seen, left);
	for (int k = 0; k < m; k++)
		zone_free_pages(z, more[k], MAX_PAGE_ORDER);

	printf("zone_grow: %llu growths, %llu ns growing, zone lock longest hold %llu ns\n",
	       (unsigned long long)z->zone_grow, (unsigned long long)z->grower.grow_ns,
	       (unsigned long long)(z->ls.hold_max * pcpm_ns_per_cycle()));
	return 0;
}
