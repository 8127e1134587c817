/*
 * test_tcache.c - thread-cache capacities and free_high for thread caches: classes above
 * 4 KiB hold at most 32 KiB of objects; a thread that only frees (the consumer of a
 * producer/consumer pair) gives back its whole full stack and keeps one batch of room, and
 * gets its full capacity back when it allocates that class again; a thread that allocates
 * between its flushes keeps the full capacity.  Stacks grow: a thread whose rounds of 1600
 * blocks overflow its stack and run it dry serves them from its stack alone after two rounds,
 * within PCPMALLOC_TCACHE_GROW_KB (the class refilled longest ago gives its growth back), and
 * gives capacity back when it only frees; on 2 CPUs the 8 KiB and 24 KiB stacks grow too,
 * with a second thread alive.  A new thread's first refills are small (slow
 * start).  Also the kmem_caches' min_partial bound, and (in a
 * child on 224 synthetic CPUs) that a thread's mid-size stacks hold no more objects on a
 * many-CPU machine than on a small one.
 */
#include "unit.h"
#include "api.h"
#include "tcache.h"
#include "stat.h"
#include "topology.h"

#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 400
static void *objs[N], *objs2[2 * 1600];
static unsigned cls;

/* Objects on this thread's stack of class c. */
static unsigned on_stack(unsigned c)
{
	return tcache_bin_count(&tcache_self()->bins[c]);
}

static void *consumer(void *arg)
{
	(void)arg;
	unsigned full = pcpm_tcache_cap[cls], batch = tcache_fbatch();
	for (int i = 0; i < N; i++)
		pcpm_free(objs[i]);
	/* only frees: the stack never held more than one batch after the first flushes */
	CHECK_EQ(tcache_self()->cap[cls], batch);
	CHECK(on_stack(cls) <= batch);
	/* allocating this class until a refill gives the full capacity back */
	void *mine[64];
	unsigned k = 0;
	while (tcache_self()->cap[cls] != full && k < 64)
		mine[k++] = pcpm_malloc(pcpm_class_size[cls]);
	CHECK_EQ(tcache_self()->cap[cls], full);
	while (k)
		pcpm_free(mine[--k]);
	return NULL;
}

static void *churner(void *arg)
{
	(void)arg;
	unsigned full = pcpm_tcache_cap[cls];
	unsigned long long seed = 7;
	void *slot[256] = { 0 };
	for (int i = 0; i < 20000; i++) {
		unsigned k = (unsigned)(rnd(&seed) % 256);
		if (slot[k])
			pcpm_free(slot[k]);
		slot[k] = pcpm_malloc(pcpm_class_size[cls]);
		CHECK(slot[k]);
	}
	/* allocations between the flushes: the capacity stays (or grows: round trips) */
	CHECK(tcache_self()->cap[cls] >= full);
	for (int k = 0; k < 256; k++)
		pcpm_free(slot[k]);
	return NULL;
}

/*
 * On 224 CPUs (one per thread, as bench/scale.py runs them) a thread's stack of each class
 * above 4 KiB holds at most 32 KiB of objects (or 2), as on 2 CPUs: a thread that freed 64
 * objects of every mid-size class keeps at most that on each stack.  With 64 KiB a stack on
 * machines of more than 4 CPUs (issue 22, before its fourth round), 8 objects of 8 KiB stayed
 * on one stack.
 */
static int many_cpus(void)
{
	setenv("PCPMALLOC_TOPOLOGY_SYNTHETIC",
	       "pack:2 numa:1 l3:1(size=110100480) l2:56(size=2097152) core:1 pu:2", 1);
	setenv("PCPMALLOC_CPU_SOURCE", "tid", 1);
	CHECK(pcpm_init());
	CHECK_EQ(pcpm_nr_cpus, 224);
	unsigned first = size_to_class(4097), last = size_to_class(SLAB_MAX_SIZE);
	static void *held[SLAB_PAGED_FIRST][64];
	for (unsigned c = first; c <= last; c++) {
		CHECK(pcpm_tcache_cap[c] == 2 || pcpm_tcache_cap[c] * pcpm_class_size[c] <= 32768);
		for (int i = 0; i < 64; i++)
			CHECK(held[c][i] = pcpm_malloc(pcpm_class_size[c]));
	}
	for (int i = 0; i < 64; i++)
		for (unsigned c = first; c <= last; c++)
			pcpm_free(held[c][i]);
	size_t total = 0;
	for (unsigned c = first; c <= last; c++) {
		size_t bytes = (size_t)on_stack(c) * pcpm_class_size[c];
		CHECK(on_stack(c) <= 2 || bytes <= 32768);
		total += bytes;
	}
	/* the statistics' gauge of thread-cache bytes is these stacks (the only thread); the
	 * rest of the 64 objects of each class wait on this CPU's sheaves and, past two chains
	 * of a class, in the node's depot (depot.c) */
	struct pcpm_stats st;
	pcpm_stats_read(&st);
	CHECK_EQ(st.tcache_bytes, total);
	CHECK(st.sheaf_bytes + st.depot_bytes + st.tcache_bytes >= (size_t)64 * (last - first + 1) * 4608);
	printf("tcache: 224 CPUs, mid-size stacks %zu bytes after 64 frees of each class, sheaves %llu\n",
	       total, (unsigned long long)st.sheaf_bytes);
	fflush(stdout);
	return 0;
}

/*
 * Slow start: a new thread that allocates one object of every class up to 4 KiB holds at
 * most 1 KiB of each class's objects on its stacks (none of the classes above 1 KiB), not a
 * batch of each; a class it keeps allocating reaches whole batches after a few refills.
 * Before (7b2d058) the first refill took a batch: 8 objects of 2-4 KiB stayed on each stack.
 */
static void *slow_starter(void *arg)
{
	(void)arg;
	unsigned last = size_to_class(4096);
	static void *one[NR_SIZE_CLASSES];
	for (unsigned c = 0; c <= last; c++)
		CHECK(one[c] = pcpm_malloc(pcpm_class_size[c]));
	struct tcache *tc = tcache_self();
	size_t held = 0;
	for (unsigned c = 0; c <= last; c++) {
		size_t bytes = (size_t)on_stack(c) * pcpm_class_size[c];
		CHECK(bytes <= 1024);
		if (pcpm_class_size[c] >= 1024)
			CHECK_EQ(on_stack(c), 0);
		held += bytes;
	}
	unsigned c2k = size_to_class(2048);
	uint64_t refills = tc->refills;
	void *p[200];
	for (int i = 0; i < 200; i++)
		CHECK(p[i] = pcpm_malloc(2048));
	CHECK_EQ(tc->ramp[c2k], 255); /* whole batches from now on */
	unsigned batch = MIN((pcpm_tcache_cap[c2k] + 1U) / 2, tcache_fbatch());
	CHECK(tc->refills - refills <= 4 + 200 / batch);
	for (int i = 0; i < 200; i++)
		pcpm_free(p[i]);
	for (unsigned c = 0; c <= last; c++)
		pcpm_free(one[c]);
	printf("tcache: slow start, %zu bytes on a new thread's stacks after one malloc per class\n",
	       held);
	return NULL;
}

#define ROUND 1600
static void *many[ROUND];

/* One round of glibc's bench-malloc-simple: ROUND blocks of size, freed in order. */
static void round_trip(size_t size)
{
	for (int i = 0; i < ROUND; i++)
		CHECK((many[i] = pcpm_malloc(size)) != NULL);
	for (int i = 0; i < ROUND; i++)
		pcpm_free(many[i]);
}

static void *grower(void *arg)
{
	(void)arg;
	unsigned c64 = size_to_class(64), c512 = size_to_class(512), c1k = size_to_class(1024);
	round_trip(64);
	struct tcache *tc = tcache_self();
	round_trip(64);
	/* from the third round on, no refill and no flush: the stack holds the working set */
	uint64_t refills = tc->refills, flushes = tc->flushes;
	round_trip(64);
	round_trip(64);
	CHECK_EQ(tc->refills, refills);
	CHECK_EQ(tc->flushes, flushes);
	CHECK(tc->cap[c64] >= ROUND && on_stack(c64) >= ROUND);
	/* 1600 x 1 KiB (1.6 MiB) and then 1600 x 512 B do not fit 2 MiB together: the 1 KiB
	 * class, refilled longest ago, goes back to its base */
	for (int r = 0; r < 3; r++)
		round_trip(1024);
	CHECK(tc->cap[c1k] >= ROUND);
	for (int r = 0; r < 3; r++)
		round_trip(512);
	CHECK(tc->cap[c512] >= ROUND);
	CHECK_EQ(tc->cap[c1k], pcpm_tcache_cap[c1k]);
	CHECK(on_stack(c1k) <= pcpm_tcache_cap[c1k]);
	CHECK(tc->grown <= (size_t)2048 << 10);
	/* a thread that only frees (blocks it allocated before) gives its growth back */
	unsigned grown = tc->cap[c64];
	for (int i = 0; i < 2 * ROUND; i++)
		pcpm_free(objs2[i]);
	CHECK(tc->cap[c64] < grown);
	return NULL;
}

/*
 * Secure mode's own stacks (sbins) grow the same way (issue 24): without it each round of
 * 1600 blocks went down to the slabs and back, and the emptied slabs beyond min_partial to
 * the pcp, to be carved again (glibc-simple: 321,900 slabs carved in a full run).  In a
 * child: the mode is chosen at the start.
 */
static int secure_grows(void)
{
	setenv("PCPMALLOC_SECURE", "1", 1);
	CHECK(pcpm_init());
	unsigned c = size_to_class(64 + 32); /* a 64-byte block's slot: header and canary */
	for (int r = 0; r < 2; r++)
		round_trip(64);
	struct tcache *tc = tcache_self();
	CHECK_EQ(pcpm_tcache_cap[c], 0); /* (the fast stacks are off: sbins in use) */
	uint64_t refills = tc->refills, flushes = tc->flushes;
	for (int r = 0; r < 3; r++)
		round_trip(64);
	/* 64 frees of the quarantine ring's worth may still go down; no round trip of 1600 */
	CHECK(tc->refills - refills <= 2 && tc->flushes - flushes <= 2);
	CHECK(tc->cap[c] >= ROUND);
	CHECK(tc->grown <= (size_t)2048 << 10);
	printf("tcache: secure mode's stacks grow for round trips (%u of class %u)\n", tc->cap[c], c);
	fflush(stdout);
	return 0;
}

/*
 * On a small machine (2 synthetic CPUs) a thread's stacks grow for round trips while other
 * threads live, the mid-size and paged classes' too: rounds of 48 blocks of 8 KiB and of
 * 24 KiB, with a second thread alive, come from the stacks alone after a few rounds.  Before,
 * stacks grew only in a process of one thread and up to 4 KiB: each round of 48 blocks of
 * 8 KiB took 24 refills and 24 flushes (stacks of 4, batches of 2; glibc-thread's two
 * threads went to the slab every 4th call of their 4-32 KiB blocks).
 */
static pthread_barrier_t alive;
static void *idler(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&alive); /* started */
	pthread_barrier_wait(&alive); /* the rounds are done */
	return NULL;
}

#define NGROWERS 12
static pthread_barrier_t grown_all;
static size_t thread_grown[NGROWERS];
static void *mid_grower(void *arg)
{
	void *blk[48];
	for (int r = 0; r < 40; r++) {
		for (int i = 0; i < 48; i++)
			CHECK((blk[i] = pcpm_malloc(24576)) != NULL);
		for (int i = 0; i < 48; i++)
			pcpm_free(blk[i]);
	}
	*(size_t *)arg = tcache_self()->grown;
	pthread_barrier_wait(&grown_all); /* grown: the main thread reads the total */
	pthread_barrier_wait(&grown_all); /* then exit */
	return NULL;
}

static int small_grows(void)
{
	setenv("PCPMALLOC_TOPOLOGY_SYNTHETIC",
	       "pack:1 numa:1 l3:1(size=1966080) l2:1(size=2097152) core:1 pu:2", 1);
	CHECK(pcpm_init());
	CHECK_EQ(pcpm_nr_cpus, 2);
	pthread_t t;
	pthread_barrier_init(&alive, NULL, 2);
	CHECK_EQ(pthread_create(&t, NULL, idler, NULL), 0);
	pthread_barrier_wait(&alive);
	pcpm_free(pcpm_malloc(16)); /* the cache set up */
	struct tcache *tc = tcache_self();
	CHECK_EQ(tc->state, TC_ACTIVE);
	static const size_t sizes[2] = { 8192, 24576 };
	for (int k = 0; k < 2; k++) {
		unsigned c = size_to_class_slow(sizes[k]);
		CHECK(pcpm_tcache_cap[c] <= 4);
		void *blk[48];
		uint64_t refills = 0, flushes = 0;
		for (int r = 0; r < 40; r++) {
			refills = tc->refills;
			flushes = tc->flushes;
			for (int i = 0; i < 48; i++)
				CHECK((blk[i] = pcpm_malloc(sizes[k])) != NULL);
			for (int i = 0; i < 48; i++)
				pcpm_free(blk[i]);
		}
		/* the last round: from the stack (a flush may trim an overage) */
		CHECK(tc->refills - refills <= 1 && tc->flushes - flushes <= 1);
		CHECK(tc->cap[c] >= 48);
		printf("tcache: 2 CPUs, 2 threads: the %zu-byte stack grew to %u\n", sizes[k],
		       tc->cap[c]);
	}
	CHECK(tc->grown <= (size_t)2048 << 10);
	fflush(stdout);
	pthread_barrier_wait(&alive);
	CHECK_EQ(pthread_join(t, NULL), 0);
	/* All threads' growth together is bounded (4 x 2 MiB): twelve threads that each grow
	 * their 24 KiB stack to the working set of 48 blocks (1.1 MiB) and then stay alive, idle,
	 * would hold 14 MiB (a breaker's 300 threads held 422 MB of freed 16-32 KiB blocks) */
	size_t mine = tc->grown;
	CHECK_EQ(pcpm_tcache_grown, mine);
	pthread_t g[NGROWERS];
	pthread_barrier_init(&grown_all, NULL, NGROWERS + 1);
	for (int i = 0; i < NGROWERS; i++)
		CHECK_EQ(pthread_create(&g[i], NULL, mid_grower, &thread_grown[i]), 0);
	pthread_barrier_wait(&grown_all); /* every thread has grown what it could */
	size_t sum = mine;
	unsigned grew = 0;
	for (int i = 0; i < NGROWERS; i++) {
		sum += thread_grown[i];
		grew += thread_grown[i] > 0;
	}
	CHECK_EQ(pcpm_tcache_grown, sum);
	CHECK(sum <= (size_t)4 * (2048 << 10));
	CHECK(grew >= 2); /* (the first ones grew: the bound is shared, not a ban) */
	pthread_barrier_wait(&grown_all);
	for (int i = 0; i < NGROWERS; i++)
		CHECK_EQ(pthread_join(g[i], NULL), 0);
	CHECK_EQ(pcpm_tcache_grown, mine); /* the exited threads' growth went with them */
	printf("tcache: 2 CPUs, %d more threads grew %zu KiB together (%u of them)\n", NGROWERS,
	       (sum - mine) >> 10, grew);
	fflush(stdout);
	return 0;
}

int main(void)
{
	/* the default mode's thread caches (meson test --setup prof sets PCPMALLOC_PROF=1,
	 * whose caches never grow: the profiler counts the bytes of each refill) */
	unsetenv("PCPMALLOC_PROF");
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(many_cpus());
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK((pid = fork()) >= 0);
	if (pid == 0)
		_exit(small_grows());
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK((pid = fork()) >= 0);
	if (pid == 0)
		_exit(secure_grows());
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(pcpm_init());
	unsigned batch = tcache_fbatch();
	/* capacities: above 4 KiB at most 32 KiB of objects, 2 to 4 (the paged classes 2) */
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		uint32_t size = pcpm_class_size[c];
		if (c >= SLAB_PAGED_FIRST) {
			CHECK_EQ(pcpm_tcache_cap[c], 2);
		} else if (size > 4096) {
			CHECK(pcpm_tcache_cap[c] >= 2 && pcpm_tcache_cap[c] <= 4);
			CHECK(pcpm_tcache_cap[c] == 2 || pcpm_tcache_cap[c] * size <= 32768);
		} else {
			CHECK(pcpm_tcache_cap[c] >= batch);
		}
	}
	CHECK_EQ(pcpm_tcache_cap[size_to_class(8192)], 4);
	CHECK_EQ(pcpm_tcache_cap[size_to_class(12288)], 2);

	/* producer here, consumer on another thread; 64 B: capacity 4 batches */
	cls = size_to_class(64);
	CHECK(pcpm_tcache_cap[cls] > batch);
	for (int i = 0; i < N; i++) {
		objs[i] = pcpm_malloc(64);
		CHECK(objs[i]);
		memset(objs[i], 0x5a, 64);
	}
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, consumer, NULL), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(pthread_create(&t, NULL, churner, NULL), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(pthread_create(&t, NULL, slow_starter, NULL), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);

	for (int i = 0; i < 2 * ROUND; i++)
		CHECK((objs2[i] = pcpm_malloc(64)) != NULL);
	/* stacks grow while one thread runs (the others have exited) */
	grower(NULL);

	/* kmem_caches keep at most 64 KiB of partial slabs (at least 2; 1 for slabs above
	 * order 3) before freeing empty ones */
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		struct kmem_cache *s = kmem_cache_of(c);
		size_t slab = (size_t)4096 << s->order;
		unsigned floor = s->order > 3 ? 1 : 2;
		CHECK(s->min_partial >= floor && s->min_partial <= 10);
		CHECK(s->min_partial == floor || s->min_partial * slab <= 65536);
	}
	printf("tcache: %u objects per batch; free_high for a freeing thread, full capacity back on refill, stacks grow for round trips\n",
	       batch);
	return 0;
}
