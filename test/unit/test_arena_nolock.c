/*
 * test_arena_nolock.c - no lock of the arena layer is held across a system call: while a
 * thread maps a new metadata chunk (hook before the mmap), reached here through a radix
 * leaf that pcpm_map_reserve needs, another thread finds meta_lock free (pcpm_region_new_try
 * gets a region from the free list or the bump area, not from the signal pool it falls back
 * to when the lock is taken) and map_lock free (pcpm_map_set finishes).  Before, the chunk
 * was mapped under meta_lock, called under map_lock: a holder preempted in the mmap held
 * both for milliseconds (bench/RESULTS.md, issue 22 sixth round, branch nhalf).
 */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "unit.h"
#include "api.h"
#include "arena.h"

static _Atomic int b_done, hook_seen;
static int b_in_pool = -1;

static void *thread_b(void *arg)
{
	(void)arg;
	struct region *r = pcpm_region_new_try();
	b_in_pool = r ? pcpm_region_in_pool(r) : 1;
	if (r)
		pcpm_region_free(r);
	/* a granule with no leaf: clearing it takes map_lock, allocates nothing */
	CHECK(pcpm_map_set((void *)(0x300000000000UL), 4UL << 20, NULL));
	atomic_store(&b_done, 1);
	return NULL;
}

static void hook(void)
{
	if (atomic_fetch_add(&hook_seen, 1))
		return;
	pthread_t t;
	CHECK(pthread_create(&t, NULL, thread_b, NULL) == 0);
	CHECK(pthread_detach(t) == 0);
	/* B must get through without us: wait up to 10 s (it waits for ever on a lock we hold) */
	for (int i = 0; i < 10000 && !atomic_load(&b_done); i++) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	CHECK(atomic_load(&b_done));
}

int main(void)
{
	pcpm_init();
	pcpm_meta_map_hook = hook;
	/* Each reserve of a range 32 GiB (a leaf's span) from the last needs a new 64 KiB
	 * leaf: a 1 MiB metadata chunk runs out within 17 of them. */
	for (int i = 0; i < 40 && !atomic_load(&hook_seen); i++)
		CHECK(pcpm_map_reserve((void *)(0x200000000000UL + ((uintptr_t)i << 35)), 4UL << 20));
	pcpm_meta_map_hook = NULL;
	CHECK(atomic_load(&hook_seen) >= 1);
	CHECK(atomic_load(&b_done));
	CHECK_EQ(b_in_pool, 0);
	return 0;
}
