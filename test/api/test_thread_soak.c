/*
 * test_thread_soak.c - many threads at once, and very many threads one after another, all
 * handing blocks to each other: memory must stay bounded and the caches of dead threads must
 * come back.
 *
 * Part 1 (concurrent): NCONC threads (1000) alive together.  In each of 4 rounds (16 in long
 * mode) every
 * thread allocates a set of blocks (16 B .. 64 KiB, malloc and calloc) with a pattern,
 * publishes it, waits at a barrier, checks and frees the set of the thread next to it (a
 * remote free for every block), and waits again.  RSS after round 1 is the steady state; RSS
 * after the last round (the same threads, the same live memory) must be at most 2x of it.
 *
 * Part 2 (waves): NSHORT threads (10,000; 100,000 in long mode) created and joined in waves of
 * WAVE, each allocating, freeing, and trading blocks through a shared exchange (blocks
 * allocated by one thread are freed by a later one).  RSS after the first 10% of the threads
 * is the steady state; RSS at every sample and at the end must stay within 2x of it.
 *
 * After each part, with no block of the test alive, malloc_trim(0) must bring pcpmalloc's
 * in-use bytes (mallinfo2: managed pages minus free ones) back to what they were before the
 * part, within 4 MiB: the objects left in the thread caches of the dead threads went back
 * to their slabs (a leak of 1000 or 10,000 caches would hold hundreds of MiB); after part 1
 * RSS must also fall below half of its round-1 value (the memory went back to the kernel).
 *
 * Usage: test_thread_soak [short|long]   (SOAK_TRACE=1 prints RSS and in-use per sample)
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "testutil.h"

#define NCONC 1000
#define MAX_ROUNDS 16
static int rounds = 4; /* 16 in long mode */
#define PER_THREAD 24 /* blocks per thread and round in part 1 */
#define WAVE 64
#define XCHG_SLOTS 1024
#define STACK_SIZE (128 * TU_KIB)

static const size_t sizes[] = {16, 24, 40, 64, 100, 128, 200, 256, 400, 512, 1000, 1024,
			       2000, 4096, 6000, 8192, 12000, 16384, 20000, 32768, 65536};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static atomic_uint failures;

#define EXPECT(cond)                                                                               \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			atomic_fetch_add(&failures, 1);                                            \
			return NULL;                                                               \
		}                                                                                  \
	} while (0)

static long long mib(long long b)
{
	return b / (long long)TU_MIB;
}

static long long in_use_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();
	return (long long)mi.uordblks;
}

/* --- Part 1: NCONC threads at once ----------------------------------------------------- */

struct block {
	unsigned char *p;
	size_t n;
	uint64_t seed;
};
static struct block (*sets)[PER_THREAD]; /* sets[t]: what thread t allocated this round */
static pthread_barrier_t barrier;
static long long rss_round[MAX_ROUNDS];

static void *conc_thread(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint64_t rng = (uint64_t)(t + 1) * 0x9e3779b97f4a7c15ULL | 1;
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < PER_THREAD; k++) {
			size_t n = sizes[tu_rand(&rng) % NSIZES] - (size_t)(tu_rand(&rng) % 8);
			unsigned char *p = (k & 3) == 1 ? calloc(1, n) : malloc(n);
			EXPECT(p != NULL);
			if ((k & 3) == 1)
				EXPECT(tu_first_nonzero(p, n) == SIZE_MAX);
			uint64_t seed = tu_seed(p, (uint64_t)t * 1000 + (uint64_t)r * 100 + (uint64_t)k);
			tu_fill(p, n, seed);
			sets[t][k] = (struct block){p, n, seed};
		}
		/* everybody has published; thread 0 measures with all sets live */
		pthread_barrier_wait(&barrier);
		if (t == 0)
			rss_round[r] = tu_rss_bytes();
		unsigned from = (t + 1) % NCONC;
		for (int k = 0; k < PER_THREAD; k++) {
			struct block *b = &sets[from][k];
			EXPECT(tu_verify(b->p, b->n, b->seed) == SIZE_MAX);
			free(b->p);
		}
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

static void part_concurrent(pthread_attr_t *attr)
{
	double t0 = tu_now();
	malloc_trim(0);
	long long used0 = in_use_bytes();
	sets = calloc(NCONC, sizeof(*sets));
	CHECK(sets != NULL);
	CHECK(pthread_barrier_init(&barrier, NULL, NCONC) == 0);
	pthread_t *th = calloc(NCONC, sizeof(*th));
	CHECK(th != NULL);
	for (unsigned t = 0; t < NCONC; t++) {
		int rc = pthread_create(&th[t], attr, conc_thread, (void *)(uintptr_t)t);
		CHECKF(rc == 0, "pthread_create #%u of %d: %s", t, NCONC, strerror(rc));
	}
	for (unsigned t = 0; t < NCONC; t++)
		CHECK(pthread_join(th[t], NULL) == 0);
	CHECK_EQ(atomic_load(&failures), 0);
	CHECK(pthread_barrier_destroy(&barrier) == 0);
	free(th);
	free(sets);
	long long steady = rss_round[0], last = rss_round[rounds - 1];
	malloc_trim(0);
	long long used1 = in_use_bytes(), trimmed = tu_rss_bytes();
	printf("part 1: %d threads alive together, %d rounds in %.1f s; RSS per round:", NCONC,
	       rounds, tu_now() - t0);
	for (int r = 0; r < rounds; r++)
		printf(" %lld", mib(rss_round[r]));
	printf(" MiB, %lld MiB after the threads exited and malloc_trim; in use then %lld KiB "
	       "(before: %lld KiB)\n", mib(trimmed), used1 >> 10, used0 >> 10);
	CHECK(steady > 0);
	for (int r = 1; r < rounds; r++)
		CHECKF(rss_round[r] <= 2 * steady, "round %d: RSS %lld MiB, over 2x the %lld MiB of round 1",
		       r + 1, mib(rss_round[r]), mib(steady));
	CHECKF(last <= 2 * steady, "RSS %lld MiB at the end, over 2x %lld MiB", mib(last), mib(steady));
	CHECKF(trimmed <= steady / 2, "RSS %lld MiB after the threads exited and malloc_trim, "
	       "round 1 had %lld MiB: the freed memory did not go back", mib(trimmed), mib(steady));
	CHECKF(used1 <= used0 + (long long)(4 * TU_MIB),
	       "in use after %d threads exited and malloc_trim: %lld KiB, before %lld KiB: "
	       "their thread caches were not reclaimed", NCONC, used1 >> 10, used0 >> 10);
}

/* --- Part 2: waves of short-lived threads ---------------------------------------------- */

static pthread_mutex_t xchg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block xchg[XCHG_SLOTS];

static void *short_thread(void *arg)
{
	uint64_t rng = (uint64_t)(uintptr_t)arg * 0x2545f4914f6cdd1dULL | 1;
	struct block mine[16];
	for (int k = 0; k < 16; k++) {
		size_t n = sizes[tu_rand(&rng) % NSIZES] - (size_t)(tu_rand(&rng) % 8);
		unsigned char *p = malloc(n);
		EXPECT(p != NULL);
		uint64_t seed = tu_seed(p, (uint64_t)(uintptr_t)arg * 16 + (uint64_t)k);
		tu_fill(p, n < 256 ? n : 256, seed);
		mine[k] = (struct block){p, n < 256 ? n : 256, seed};
	}
	/* hand four blocks to later threads, take four from earlier ones */
	for (int k = 0; k < 4; k++) {
		size_t slot = (size_t)(tu_rand(&rng) % XCHG_SLOTS);
		pthread_mutex_lock(&xchg_lock);
		struct block theirs = xchg[slot];
		xchg[slot] = mine[k];
		pthread_mutex_unlock(&xchg_lock);
		mine[k].p = NULL;
		if (theirs.p) {
			EXPECT(tu_verify(theirs.p, theirs.n, theirs.seed) == SIZE_MAX);
			free(theirs.p);
		}
	}
	for (int k = 4; k < 16; k++) {
		EXPECT(tu_verify(mine[k].p, mine[k].n, mine[k].seed) == SIZE_MAX);
		free(mine[k].p);
	}
	return NULL;
}

static void run_waves(long first, long count, pthread_attr_t *attr)
{
	pthread_t t[WAVE];
	for (long base = 0; base < count; base += WAVE) {
		int n = count - base < WAVE ? (int)(count - base) : WAVE;
		for (int i = 0; i < n; i++) {
			int rc = pthread_create(&t[i], attr, short_thread,
						(void *)(uintptr_t)(first + base + i + 1));
			CHECKF(rc == 0, "pthread_create #%ld: %s", first + base + i, strerror(rc));
		}
		for (int i = 0; i < n; i++)
			CHECK(pthread_join(t[i], NULL) == 0);
	}
}

static void part_waves(long nthreads, pthread_attr_t *attr)
{
	double t0 = tu_now();
	malloc_trim(0);
	long long used0 = in_use_bytes();
	long warm = nthreads / 10;
	run_waves(0, warm, attr);
	CHECK_EQ(atomic_load(&failures), 0);
	long long steady = tu_rss_bytes(), peak = steady;
	long step = nthreads / 20;
	for (long done = warm; done < nthreads; done += step) {
		long n = nthreads - done < step ? nthreads - done : step;
		run_waves(done, n, attr);
		long long rss = tu_rss_bytes();
		if (rss > peak)
			peak = rss;
		if (getenv("SOAK_TRACE"))
			printf("  after %ld threads: RSS %lld KiB, in use %lld KiB, mapped %lld KiB\n", done + n,
			       rss >> 10, in_use_bytes() >> 10, tu_stat("mapped_bytes") >> 10);
		CHECKF(rss <= 2 * steady, "after %ld threads: RSS %lld MiB, over 2x the steady %lld MiB",
		       done + n, mib(rss), mib(steady));
	}
	CHECK_EQ(atomic_load(&failures), 0);
	long long end = tu_rss_bytes();
	for (int i = 0; i < XCHG_SLOTS; i++) {
		if (xchg[i].p) {
			CHECK(tu_verify(xchg[i].p, xchg[i].n, xchg[i].seed) == SIZE_MAX);
			free(xchg[i].p);
			xchg[i].p = NULL;
		}
	}
	malloc_trim(0);
	long long used1 = in_use_bytes();
	printf("part 2: %ld threads in waves of %d in %.1f s; RSS steady %lld MiB (after %ld), "
	       "peak %lld MiB, end %lld MiB; in use after trim %lld KiB (before: %lld KiB)\n",
	       nthreads, WAVE, tu_now() - t0, mib(steady), warm, mib(peak), mib(end), used1 >> 10,
	       used0 >> 10);
	CHECKF(end <= 2 * steady, "RSS %lld MiB at the end, over 2x the steady %lld MiB", mib(end),
	       mib(steady));
	CHECKF(used1 <= used0 + (long long)(4 * TU_MIB),
	       "in use after %ld threads and malloc_trim: %lld KiB, before %lld KiB: their thread "
	       "caches were not reclaimed", nthreads, used1 >> 10, used0 >> 10);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_require_pcpmalloc("test_thread_soak");
	bool long_mode = tu_long_mode(argc, argv);
	long nshort = long_mode ? 100000 : 10000;
	rounds = long_mode ? MAX_ROUNDS : 4;
	tu_watchdog(long_mode ? 1200 : 240);

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	part_concurrent(&attr);
	part_waves(nshort, &attr);
	pthread_attr_destroy(&attr);
	return 0;
}
