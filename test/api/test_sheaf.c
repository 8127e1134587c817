/*
 * test_sheaf.c - the per-CPU sheaves on a synthetic 224-CPU machine with one pcp slot per
 * thread (set by meson: PCPMALLOC_TOPOLOGY_SYNTHETIC, PCPMALLOC_CPU_SOURCE=tid, the decay
 * thread at PCPMALLOC_DECAY_MS=200).  Sheaves of 64-byte objects hold 128 objects there.
 *
 * edge: a CPU whose main and spare sheaves are both full (1024 objects freed) runs a
 * balanced loop: 200 allocations, then 200 frees, 2000 times.  The swing (200) fits the
 * CPU's two sheaves (256), and the barn exchanges one sheaf for one
 * (barn_replace_full_sheaf / barn_replace_empty_sheaf), so the CPU keeps a full and an empty
 * sheaf and the loop stays off the barn: at most 1 barn lock acquisition per 1000 calls.
 * Exchanging both sheaves in one hold landed the CPU on the opposite edge of its window
 * every time: 5.0 per 1000 calls (main at 69c8fdf).
 *
 * decay: 16 threads allocate 400 blocks of 8 KiB each (50 MiB live at once), free them all
 * and exit; the program then only sleeps.  The decay thread gives the idle sheaves and barns
 * back (sheaf_decayed counts the objects) down to the slabs, the pcps, the zone and the
 * purge: the resident memory goes back to within 16 MiB of where it started (it stayed above
 * 30 MiB when nothing decayed sheaves).
 *
 * cpuslab: a CPU's new objects come from its own frozen slabs (slab_cpu.c, SLUB's CPU slab):
 * 16 threads, each holding one object of each of the 25 classes from 4 to 16 KiB, take no
 * kmem_cache lock for them (one per quarter-sheaf refill before: 400), and the resident
 * memory grows by at most 24 KiB per object held (the thread caches' refills carve a few
 * objects ahead; carving a quarter sheaf ahead wrote the free mark of 16-32 objects per
 * class: 52 KiB per object).  Then 8 threads allocate 3000 objects of 96 bytes five times,
 * each round freed by the next thread (objects go home, sheaves overflow into the slabs,
 * frees reach frozen slabs), and after malloc_trim every slab those rounds made is gone
 * again and mallinfo counts what it counted before: frozen slabs are unfrozen, their
 * freelists and uncarved tails accounted.
 *
 * depot: a CPU keeps at most two chains of a class on its sheaves and its surplus goes to
 * its node's depot (depot.c), which the node's other CPUs take before they carve new objects.
 * 8 threads, one after the other, each on its own CPU slot, allocate 256 blocks of 8 KiB,
 * write them, free them and exit.  After the first, its sheaves hold at most two chains
 * (4 objects each: 64 KiB) and the depot holds most of the rest; the 8 threads together add
 * at most 8 MiB of resident memory (2 MiB live at a time, 2 nodes in the topology: a thread
 * on either carves only what its node's depot cannot give).  Before, each slot kept its 256
 * blocks on its own sheaves: 16 MiB and more.  Then 8 threads at once, 5 rounds: each
 * allocates 1000 blocks of 8-32 KiB, tags them, and frees the next thread's after checking its
 * tags (chains of both nodes move through the depots while CPUs trim and fill); after
 * malloc_trim the depots hold nothing and mallinfo counts in use what it counted before.
 */
#include "testutil.h"

#include <malloc.h>
#include <pthread.h>

enum { EDGE_N = 1024, EDGE_K = 200, DECAY_THREADS = 16, DECAY_OBJS = 400, DECAY_SIZE = 8192 };

static void edge(void)
{
	static void *v[EDGE_N];
	/* fill: every sheaf of this CPU full, the rest in the barn */
	for (int i = 0; i < EDGE_N; i++)
		CHECK((v[i] = malloc(64)) != NULL);
	for (int i = 0; i < EDGE_N; i++)
		free(v[i]);
	long long barn0 = tu_stat("barn_lock"), calls0 = tu_calls();
	for (int r = 0; r < 2000; r++) {
		for (int i = 0; i < EDGE_K; i++)
			CHECK((v[i] = malloc(64)) != NULL);
		for (int i = 0; i < EDGE_K; i++)
			free(v[i]);
	}
	long long calls = tu_calls() - calls0;
	double per1k = 1000.0 * (double)(tu_stat("barn_lock") - barn0) / (double)calls;
	printf("edge: %lld calls, %.2f barn lock acquisitions per 1000 calls\n", calls, per1k);
	fflush(stdout);
	CHECK(calls >= 2000 * 2 * EDGE_K);
	CHECK(per1k <= 1.0);
}

static pthread_barrier_t bar;

static void *decay_worker(void *arg)
{
	(void)arg;
	static __thread void *v[DECAY_OBJS];
	for (int i = 0; i < DECAY_OBJS; i++) {
		CHECK((v[i] = malloc(DECAY_SIZE)) != NULL);
		memset(v[i], 0x5a, DECAY_SIZE);
	}
	pthread_barrier_wait(&bar);
	for (int i = 0; i < DECAY_OBJS; i++)
		free(v[i]);
	return NULL;
}

static void decay(void)
{
	long long before = tu_rss_bytes();
	pthread_t t[DECAY_THREADS];
	/* all alive together: each holds its blocks until all have allocated theirs */
	CHECK(pthread_barrier_init(&bar, NULL, DECAY_THREADS) == 0);
	for (int i = 0; i < DECAY_THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, decay_worker, NULL) == 0);
	for (int i = 0; i < DECAY_THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	long long peak = tu_rss_bytes();
	/* no allocator call from here on: only the decay thread can give memory back */
	long long rss = peak;
	double t0 = tu_now();
	long long decayed = 0;
	while (tu_now() - t0 < 20 && (rss > before + 16 * (long long)TU_MIB || decayed <= 0)) {
		usleep(100 * 1000);
		rss = tu_rss_bytes();
		decayed = tu_stat("sheaf_decayed");
	}
	printf("decay: RSS %lld MiB before, %lld after the threads, %lld after %.1f s idle; "
	       "%lld objects decayed\n", before >> 20, peak >> 20, rss >> 20, tu_now() - t0, decayed);
	fflush(stdout);
	CHECK(peak > before + 32 * (long long)TU_MIB); /* 50 MiB were live at once */
	CHECK(decayed > 0);
	CHECK(rss <= before + 16 * (long long)TU_MIB);
}

enum { FRESH_THREADS = 16, FRESH_CLASSES = 25, RECYCLE_THREADS = 8, RECYCLE_OBJS = 3000 };

static void *fresh_worker(void *arg)
{
	(void)arg;
	void *v[FRESH_CLASSES];
	free(malloc(16)); /* the thread's cache and CPU slot set up */
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar); /* main reads RSS and the lock count */
	for (int i = 0; i < FRESH_CLASSES; i++)
		CHECK((v[i] = malloc(4096 + 512 * (size_t)i)) != NULL);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar); /* main reads them again */
	for (int i = 0; i < FRESH_CLASSES; i++)
		free(v[i]);
	return NULL;
}

static void *recycle_objs[RECYCLE_THREADS][RECYCLE_OBJS];

static void *recycle_worker(void *arg)
{
	long me = (long)arg, next = (me + 1) % RECYCLE_THREADS;
	for (int r = 0; r < 5; r++) {
		for (int i = 0; i < RECYCLE_OBJS; i++) {
			CHECK((recycle_objs[me][i] = malloc(96)) != NULL);
			memset(recycle_objs[me][i], (int)me, 96);
		}
		pthread_barrier_wait(&bar);
		for (int i = 0; i < RECYCLE_OBJS; i++) { /* the next thread's: they go home */
			CHECK(((unsigned char *)recycle_objs[next][i])[95] == (unsigned char)next);
			free(recycle_objs[next][i]);
		}
		pthread_barrier_wait(&bar);
	}
	return NULL;
}

static void cpuslab(void)
{
	pthread_t t[FRESH_THREADS];
	CHECK(pthread_barrier_init(&bar, NULL, FRESH_THREADS + 1) == 0);
	for (int i = 0; i < FRESH_THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, fresh_worker, NULL) == 0);
	pthread_barrier_wait(&bar);
	long long rss0 = tu_rss_bytes(), lock0 = tu_stat("slab_lock");
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	long long rss1 = tu_rss_bytes(), locks = tu_stat("slab_lock") - lock0;
	pthread_barrier_wait(&bar);
	for (int i = 0; i < FRESH_THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(pthread_barrier_destroy(&bar) == 0);
	double per_obj = (double)(rss1 - rss0) / 1024.0 / (FRESH_THREADS * FRESH_CLASSES);
	printf("cpuslab: %d objects of 4-16 KiB: %lld kmem_cache lock acquisitions, RSS +%.1f KiB "
	       "per object\n", FRESH_THREADS * FRESH_CLASSES, locks, per_obj);
	fflush(stdout);
	CHECK(locks <= FRESH_THREADS / 2);
	CHECK(per_obj <= 24.0);

	malloc_trim(0);
	long long slabs0 = tu_stat("slab_alloc") - tu_stat("slab_free");
	size_t used0 = mallinfo2().uordblks;
	pthread_t r[RECYCLE_THREADS];
	CHECK(pthread_barrier_init(&bar, NULL, RECYCLE_THREADS) == 0);
	for (long i = 0; i < RECYCLE_THREADS; i++)
		CHECK(pthread_create(&r[i], NULL, recycle_worker, (void *)i) == 0);
	for (int i = 0; i < RECYCLE_THREADS; i++)
		CHECK(pthread_join(r[i], NULL) == 0);
	CHECK(pthread_barrier_destroy(&bar) == 0);
	long long made = tu_stat("slab_alloc") - tu_stat("slab_free") - slabs0;
	malloc_trim(0);
	long long left = tu_stat("slab_alloc") - tu_stat("slab_free") - slabs0;
	size_t used1 = mallinfo2().uordblks;
	printf("cpuslab: recycle: %lld slabs held before malloc_trim, %lld after; in use %zu KiB "
	       "before, %zu KiB after\n", made, left, used0 >> 10, used1 >> 10);
	fflush(stdout);
	CHECK(made > 0);
	CHECK(left <= 0);
	CHECK(used1 <= used0 + (64 << 10));
}

enum { DEPOT_THREADS = 8, DEPOT_OBJS = 256, DEPOT_SIZE = 8192 };

static void *depot_worker(void *arg)
{
	(void)arg;
	static void *v[DEPOT_OBJS];
	for (int i = 0; i < DEPOT_OBJS; i++) {
		CHECK((v[i] = malloc(DEPOT_SIZE)) != NULL);
		memset(v[i], 0x5a, DEPOT_SIZE);
	}
	for (int i = 0; i < DEPOT_OBJS; i++)
		free(v[i]);
	return NULL;
}

enum { POOL_THREADS = 8, POOL_OBJS = 1000 };
static unsigned char *pool_objs[POOL_THREADS][POOL_OBJS];
static size_t pool_size[POOL_THREADS][POOL_OBJS];

static void *pool_worker(void *arg)
{
	long me = (long)arg, next = (me + 1) % POOL_THREADS;
	uint64_t seed = (uint64_t)me * 0x9e3779b97f4a7c15ULL + 1;
	for (int r = 0; r < 5; r++) {
		for (int i = 0; i < POOL_OBJS; i++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			size_t n = 8192 + (size_t)(seed >> 33) % (32768 - 8192 + 1);
			unsigned char *b = malloc(n);
			CHECK(b != NULL);
			b[0] = b[n - 1] = (unsigned char)(me * 31 + i);
			pool_objs[me][i] = b;
			pool_size[me][i] = n;
		}
		pthread_barrier_wait(&bar);
		for (int i = 0; i < POOL_OBJS; i++) { /* the next thread's */
			unsigned char *b = pool_objs[next][i], tag = (unsigned char)(next * 31 + i);
			CHECK(b[0] == tag && b[pool_size[next][i] - 1] == tag);
			free(b);
		}
		pthread_barrier_wait(&bar);
	}
	return NULL;
}

static void depot(void)
{
	malloc_trim(0);
	long long rss0 = tu_rss_bytes(), sheaf = 0, depot = 0;
	for (int i = 0; i < DEPOT_THREADS; i++) {
		pthread_t t;
		CHECK(pthread_create(&t, NULL, depot_worker, NULL) == 0);
		CHECK(pthread_join(t, NULL) == 0);
		if (i == 0) {
			sheaf = tu_stat("sheaf_bytes");
			depot = tu_stat("depot_bytes");
		}
	}
	long long grown = tu_rss_bytes() - rss0;
	printf("depot: after one thread %lld KiB on sheaves, %lld KiB in depots; %d threads grew "
	       "RSS by %lld KiB\n", sheaf >> 10, depot >> 10, DEPOT_THREADS, grown >> 10);
	fflush(stdout);
	CHECK(sheaf <= 2 * 4 * DEPOT_SIZE + (64 << 10)); /* two chains, and a few small objects */
	CHECK(depot >= (DEPOT_OBJS / 2) * (long long)DEPOT_SIZE);
	CHECK(grown <= 8 * (long long)TU_MIB);

	malloc_trim(0);
	size_t used0 = mallinfo2().uordblks;
	pthread_t t[POOL_THREADS];
	CHECK(pthread_barrier_init(&bar, NULL, POOL_THREADS) == 0);
	for (long i = 0; i < POOL_THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, pool_worker, (void *)i) == 0);
	for (int i = 0; i < POOL_THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(pthread_barrier_destroy(&bar) == 0);
	long long pooled = tu_stat("depot_bytes");
	malloc_trim(0);
	size_t used1 = mallinfo2().uordblks;
	printf("depot: 8 threads passing 8-32 KiB blocks: %lld KiB in depots, 0 after malloc_trim: "
	       "%lld; in use %zu KiB before, %zu KiB after\n", pooled >> 10, tu_stat("depot_bytes"),
	       used0 >> 10, used1 >> 10);
	fflush(stdout);
	CHECK(pooled > 0);
	CHECK(tu_stat("depot_bytes") == 0);
	CHECK(used1 <= used0 + (64 << 10));
}

int main(int argc, char **argv)
{
	tu_require_pcpmalloc("test_sheaf");
	tu_watchdog(60);
	/* argv[1]: "edge", "cpuslab", "depot" or "decay" runs one case (meson passes the
	 * mode: all) */
	tu_run_cases(argc, argv, (const struct tu_case[]){
		{"edge", edge}, {"cpuslab", cpuslab}, {"depot", depot}, {"decay", decay},
		{NULL, NULL}});
	printf("test_sheaf: ok\n");
	return 0;
}
