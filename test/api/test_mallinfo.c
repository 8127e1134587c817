/*
 * test_mallinfo.c - mallinfo()/mallinfo2() from one accounting of the heap (issue 15 class 9,
 * issue 26 item 4): a block handed to the program is in use, a block cached at any level
 * (thread cache, CPU sheaf, inbox, barn, slab, pcp, zone) is free.
 *
 * 1. Cold, before anything else ran (the early area serves): one live calloc(1, 8) reads
 *    arena > 0 and uordblks >= 8 (it read 0 and 0); glibc's tst-mallinfo2 pattern, 19 live
 *    blocks of 160 x i bytes (30,400 in all, the first ones from the early area), raises
 *    uordblks by at least 30,400 (it read 28,032).
 * 2. Ten calloc(1, 100) blocks raise uordblks by 1,000 bytes at least (a slab object counts
 *    by its class size); mallinfo() (int fields) agrees with mallinfo2().
 * 3. Warm caches, one thread: after 64 MiB of small blocks were allocated and freed (the
 *    thread cache, the CPU sheaves and the barns full of free objects), uordblks is back
 *    where it was (cached objects are free); live blocks then raise it by at least their
 *    size, and freeing them brings it back exactly.
 * 4. Eight threads each keep 2,000 blocks of 16 B - 2 KiB: uordblks grows by at least their
 *    sum; each thread then frees its neighbour's blocks (remote frees: objects go home to
 *    other CPUs' inboxes) and uordblks falls back to within 64 KiB of where it was (it stayed
 *    megabytes above while the sheaves' objects counted as in use).
 * 5. A freed 64 MiB block that sits in the huge-mapping cache is free memory: hblks and
 *    hblkhd are back where they were before it was allocated.
 *
 * Usage: test_mallinfo [short|long]
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>

#include "testutil.h"

#define N 10
#define THREADS 8
#define PER_THREAD 2000

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static void *blocks[THREADS][PER_THREAD];
static size_t thread_bytes[THREADS];
static pthread_barrier_t bar;

static void *worker(void *arg)
{
	long id = (long)(uintptr_t)arg;
	uint64_t rng = (uint64_t)id * 0x9e3779b97f4a7c15ULL + 7;
	size_t sum = 0;
	for (int i = 0; i < PER_THREAD; i++) {
		size_t n = tu_rand_range(&rng, 16, 2048);
		blocks[id][i] = malloc(n);
		CHECK(blocks[id][i] != NULL);
		memset(blocks[id][i], (int)id, n);
		sum += n;
	}
	thread_bytes[id] = sum;
	pthread_barrier_wait(&bar); /* all live: the main thread reads mallinfo2 */
	pthread_barrier_wait(&bar);
	long next = (id + 1) % THREADS; /* its neighbour's blocks: remote frees */
	for (int i = 0; i < PER_THREAD; i++)
		free(blocks[next][i]);
	return NULL;
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	/* 1: first, before stdio or the checks allocate anything */
	void *small = calloc(1, 8);
	struct mallinfo cold = mallinfo();
	struct mallinfo2 g0 = mallinfo2();
	void *g[20];
	size_t gtotal = 0;
	for (int i = 1; i < 20; i++) {
		g[i] = malloc(160 * (size_t)i);
		gtotal += 160 * (size_t)i;
	}
	struct mallinfo2 g1 = mallinfo2();
	tu_require_pcpmalloc("test_mallinfo");
	CHECK(small != NULL);
	printf("test_mallinfo: cold, one calloc(1, 8): arena %d uordblks %d fordblks %d\n",
	       cold.arena, cold.uordblks, cold.fordblks);
	CHECKF(cold.arena > 0 && cold.uordblks >= 8, "arena %d uordblks %d", cold.arena,
	       cold.uordblks);
	long long ggrew = (long long)g1.uordblks - (long long)g0.uordblks;
	printf("test_mallinfo: cold, 19 blocks of 160 x i (%zu bytes): uordblks %zu -> %zu (+%lld)\n",
	       gtotal, g0.uordblks, g1.uordblks, ggrew);
	CHECKF(ggrew >= (long long)gtotal, "uordblks grew by %lld for %zu bytes", ggrew, gtotal);
	for (int i = 1; i < 20; i++)
		free(g[i]);
	free(small);

	/* 2 */
	free(malloc(100000)); /* the allocator proper runs (past the early area) */
	free(calloc(1, 100)); /* and the class's slab is there: pages alone would not move */
	struct mallinfo2 m0 = mallinfo2();
	void *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = calloc(1, 100);
		CHECK(p[i] != NULL);
	}
	struct mallinfo2 m1 = mallinfo2();
	struct mallinfo i1 = mallinfo();
	long long grew = (long long)m1.uordblks - (long long)m0.uordblks;
	printf("test_mallinfo: %d x calloc(1, 100): uordblks %zu -> %zu\n", N, m0.uordblks,
	       m1.uordblks);
	CHECKF(grew >= N * 100 && grew < 64 * 1024, "uordblks grew by %lld bytes", grew);
	CHECK_EQ((size_t)(unsigned)i1.uordblks, m1.uordblks & 0xffffffffu);
	CHECK_EQ((size_t)(unsigned)i1.arena, m1.arena & 0xffffffffu);
	for (int i = 0; i < N; i++)
		free(p[i]);

	/* 3: warm caches */
	struct mallinfo2 w0 = mallinfo2();
	static void *churn[4096];
	uint64_t rng = 42;
	for (int r = 0; r < 32; r++) {
		for (int i = 0; i < 4096; i++) {
			churn[i] = malloc(tu_rand_range(&rng, 16, 1024));
			CHECK(churn[i] != NULL);
		}
		for (int i = 0; i < 4096; i++)
			free(churn[i]);
	}
	struct mallinfo2 w1 = mallinfo2();
	size_t live_bytes = 0;
	for (int i = 0; i < 4096; i++) {
		size_t n = tu_rand_range(&rng, 16, 1024);
		churn[i] = malloc(n);
		CHECK(churn[i] != NULL);
		live_bytes += n;
	}
	struct mallinfo2 w2 = mallinfo2();
	for (int i = 0; i < 4096; i++)
		free(churn[i]);
	struct mallinfo2 w3 = mallinfo2();
	printf("test_mallinfo: warm, one thread: uordblks %zu before, %zu after the churn, "
	       "%zu with %zu bytes live, %zu freed\n",
	       w0.uordblks, w1.uordblks, w2.uordblks, live_bytes, w3.uordblks);
	CHECKF(w1.uordblks == w0.uordblks, "the churn's freed blocks count as in use: %zu -> %zu",
	       w0.uordblks, w1.uordblks);
	CHECKF(w2.uordblks >= w1.uordblks + live_bytes, "uordblks grew by %lld for %zu bytes",
	       (long long)w2.uordblks - (long long)w1.uordblks, live_bytes);
	CHECK_EQ(w3.uordblks, w1.uordblks);
	CHECK_EQ(w3.arena, w3.uordblks + w3.fordblks);

	/* 4: many threads */
	CHECK(pthread_barrier_init(&bar, NULL, THREADS + 1) == 0);
	struct mallinfo2 t0 = mallinfo2();
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
	pthread_barrier_wait(&bar);
	struct mallinfo2 t1 = mallinfo2();
	size_t total = 0;
	for (int i = 0; i < THREADS; i++)
		total += thread_bytes[i];
	pthread_barrier_wait(&bar);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	struct mallinfo2 t2 = mallinfo2();
	printf("test_mallinfo: %d threads: uordblks %zu -> %zu with %zu bytes live -> %zu after "
	       "remote frees\n",
	       THREADS, t0.uordblks, t1.uordblks, total, t2.uordblks);
	CHECKF(t1.uordblks >= t0.uordblks + total, "uordblks grew by %lld for %zu bytes",
	       (long long)t1.uordblks - (long long)t0.uordblks, total);
	CHECKF(t2.uordblks <= t0.uordblks + 64 * TU_KIB,
	       "after every block was freed uordblks stays %zu above where it was",
	       t2.uordblks - t0.uordblks);
	CHECK_EQ(t2.arena, t2.uordblks + t2.fordblks);

	/* 5 */
	struct mallinfo2 h0 = mallinfo2();
	char *big = malloc(64 * TU_MIB);
	CHECK(big != NULL);
	big[0] = 1;
	struct mallinfo2 h1 = mallinfo2();
	CHECKF(h1.hblkhd >= h0.hblkhd + 64 * TU_MIB, "hblkhd %zu -> %zu", h0.hblkhd, h1.hblkhd);
	CHECK_EQ(h1.hblks, h0.hblks + 1);
	free(big);
	struct mallinfo2 h2 = mallinfo2();
	printf("test_mallinfo: 64 MiB block: hblkhd %zu -> %zu -> %zu after free\n", h0.hblkhd,
	       h1.hblkhd, h2.hblkhd);
	CHECK_EQ(h2.hblkhd, h0.hblkhd);
	CHECK_EQ(h2.hblks, h0.hblks);
	printf("test_mallinfo: ok\n");
	return 0;
}
