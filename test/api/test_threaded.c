/*
 * test_threaded.c - the slab layer's per-thread and per-CPU levels on a small machine (set by
 * meson: the 2-CPU synthetic topology, PCPMALLOC_CPU_SOURCE=tid), where the threaded
 * patterns of issue 22 (glibc-thread, xthread-large, xmalloc) met the sheaf and kmem_cache
 * locks.  Single-threaded cases: a thread stays on one CPU slot, so the counts are exact.
 *
 * paged: 20-32 KiB blocks (the paged slab classes, which the fast paths' size tests never
 * reach) have a thread-cache stack: 4000 malloc/free pairs of each paged size refill and
 * flush it a handful of times in all.  Without one every such malloc and free went to the
 * CPU's sheaves under its lock (no refill, no flush counted: 0).
 *
 * swing: one thread allocates 48 blocks of 8 KiB and frees them, 500 times: the swing a
 * producer and a consumer that share a CPU slot make.  8 KiB and larger objects' sheaves hold
 * at least 256 KiB (32 objects of 8 KiB) on small machines, so after the first round the
 * swing stays in the thread cache and the CPU's two sheaves: at most 1 kmem_cache lock
 * acquisition per 1000 calls.  With 32 KiB sheaves (4 objects) each round went through the
 * barn and the slabs: about 200.
 *
 * producer: 8192 blocks of 64 bytes are freed (their slabs become partial: the sheaves and the
 * barn overflow) and allocated again: a CPU whose sheaf refills keep coming from the slabs
 * (a producer) takes a whole sheaf of partial slabs' objects per kmem_cache hold, not a
 * quarter: at most 1 acquisition per 40 objects (a quarter sheaf: 1 per 16).
 */
#include "testutil.h"

#include <malloc.h>

static void paged(void)
{
	static const size_t sizes[] = {20 << 10, 24 << 10, 28 << 10, 32 << 10};
	long long moves0 = tu_stat("tcache_refills") + tu_stat("fbatch_flushes");
	for (int s = 0; s < 4; s++) {
		for (int i = 0; i < 4000; i++) {
			char *p = malloc(sizes[s]);
			CHECK(p != NULL);
			p[0] = p[sizes[s] - 1] = (char)i;
			free(p);
		}
	}
	long long moves = tu_stat("tcache_refills") + tu_stat("fbatch_flushes") - moves0;
	printf("paged: 16000 malloc/free pairs of 20-32 KiB: %lld thread-cache refills and "
	       "flushes\n", moves);
	fflush(stdout);
	CHECK(moves >= 1 && moves <= 16);
}

enum { SWING_N = 48, SWING_ROUNDS = 500 };

static void swing(void)
{
	static void *v[SWING_N];
	long long lock0 = 0, calls0 = 0;
	for (int r = 0; r <= SWING_ROUNDS; r++) {
		if (r == 1) { /* after the first round: the warm-up is not counted */
			lock0 = tu_stat("slab_lock");
			calls0 = tu_calls();
		}
		for (int i = 0; i < SWING_N; i++)
			CHECK((v[i] = malloc(8192)) != NULL);
		for (int i = 0; i < SWING_N; i++)
			free(v[i]);
	}
	long long calls = tu_calls() - calls0;
	double per1k = 1000.0 * (double)(tu_stat("slab_lock") - lock0) / (double)calls;
	printf("swing: %lld calls, %.2f kmem_cache lock acquisitions per 1000 calls\n", calls, per1k);
	fflush(stdout);
	CHECK(calls >= 2LL * SWING_N * SWING_ROUNDS);
	CHECK(per1k <= 1.0);
}

enum { PROD_N = 8192 };

static void producer(void)
{
	static void *v[PROD_N];
	for (int i = 0; i < PROD_N; i++)
		CHECK((v[i] = malloc(64)) != NULL);
	for (int i = 0; i < PROD_N; i++)
		free(v[i]);
	long long lock0 = tu_stat("slab_lock");
	for (int i = 0; i < PROD_N; i++)
		CHECK((v[i] = malloc(64)) != NULL);
	long long locks = tu_stat("slab_lock") - lock0;
	for (int i = 0; i < PROD_N; i++)
		free(v[i]);
	printf("producer: %d objects from partial slabs: %lld kmem_cache lock acquisitions\n",
	       PROD_N, locks);
	fflush(stdout);
	CHECK(locks <= PROD_N / 40);
}

int main(int argc, char **argv)
{
	tu_require_pcpmalloc("test_threaded");
	tu_watchdog(60);
	/* argv[1]: "paged", "swing" or "producer" runs one case (meson passes the mode: all) */
	tu_run_cases(argc, argv, (const struct tu_case[]){
		{"paged", paged}, {"swing", swing}, {"producer", producer}, {NULL, NULL}});
	printf("test_threaded: ok\n");
	return 0;
}
