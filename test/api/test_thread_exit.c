/*
 * test_thread_exit.c - threads that exit with full caches must give their memory back.
 *
 * Part 1: THREADS threads, created in waves of WAVE, each allocates and frees enough blocks of
 * many size classes (some of them allocated by other threads, taken from a shared exchange) to
 * fill its thread caches, then exits.  The resident set size after the first ~500 threads is
 * the baseline; at the end it must be at most 2 x baseline + 16 MiB.  A leak of the caches of
 * each exiting thread would grow it by gigabytes.
 *
 * Part 2: threads whose exit runs a C++-style TLS destructor (__cxa_thread_atexit_impl, what
 * thread_local objects use) and a pthread key destructor that both allocate and free.  The key
 * destructor sets its key again, so glibc calls it in a later round, after the allocator's own
 * thread-exit flush; it allocates then, too.  Part 3 re-arms the key in every round glibc
 * allows (PTHREAD_DESTRUCTOR_ITERATIONS), so the last allocations happen in the last round.
 * Neither may crash, and RSS must not grow across the threads.
 *
 * Usage: test_thread_exit [short|long]
 */
#define _GNU_SOURCE
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "testutil.h"

#define WAVE 32
#define XCHG_SLOTS 512
#define STACK_SIZE (256 * TU_KIB)

/* Sizes spanning small classes, slab orders 0..3 and pcp-cached page orders. */
static const size_t class_sizes[] = {8,    16,   24,   32,    48,    64,    80,    96,
				     128,  160,  192,  256,   320,   384,   512,   768,
				     1024, 1536, 2048, 3072,  4096,  6144,  8192,  12288,
				     16384, 24576, 32768, 65536, 131072, 262144};
#define NCLASSES (sizeof(class_sizes) / sizeof(class_sizes[0]))
#define PER_CLASS 24

/* Blocks deposited by one thread, freed by another. */
static pthread_mutex_t xchg_lock = PTHREAD_MUTEX_INITIALIZER;
static void *xchg[XCHG_SLOTS];

static atomic_uint thread_failures;

static inline void stamp(unsigned char *p, size_t n, unsigned char v)
{
	p[0] = v;
	p[n / 2] = v;
	p[n - 1] = v;
}

static inline bool stamped(const unsigned char *p, size_t n, unsigned char v)
{
	return p[0] == v && p[n / 2] == v && p[n - 1] == v;
}

/* Allocates PER_CLASS blocks of every class (fewer of the big ones), checks and frees them,
 * exchanges a few blocks with other threads.  Returns false on a content error. */
static bool churn(uint64_t *rng, int per_class)
{
	/* Class by class, so that a thread holds at most ~256 KiB at a time: the RSS checks
	 * must not depend on how many threads of a wave the scheduler runs at once.  The frees
	 * leave every class's cache filled. */
	unsigned char *blocks[PER_CLASS];
	size_t sizes[PER_CLASS];
	for (size_t c = 0; c < NCLASSES; c++) {
		int n = class_sizes[c] >= 65536 ? 2 : class_sizes[c] >= 8192 ? per_class / 3 : per_class;
		for (int k = 0; k < n; k++) {
			size_t sz = class_sizes[c] - (size_t)(tu_rand(rng) % 8);
			unsigned char *p = (k & 3) == 3 ? calloc(1, sz) : malloc(sz);
			if (!p)
				return false;
			if ((k & 3) == 3 && (p[0] | p[sz / 2] | p[sz - 1]))
				return false;
			stamp(p, sz, (unsigned char)(c * 7 + (size_t)k));
			blocks[k] = p;
			sizes[k] = sz;
		}
		for (int k = 0; k < n; k++) {
			if (!stamped(blocks[k], sizes[k], (unsigned char)(c * 7 + (size_t)k)))
				return false;
			free(blocks[k]);
		}
	}
	/* Take blocks another thread left, leave some of ours. */
	for (int k = 0; k < 8; k++) {
		size_t slot = (size_t)(tu_rand(rng) % XCHG_SLOTS);
		/* From 24 bytes (room for the size and a stamp) up to 32 KiB. */
		size_t sz = class_sizes[2 + tu_rand(rng) % (NCLASSES - 5)];
		unsigned char *mine = malloc(sz);
		if (!mine)
			return false;
		/* The first 8 bytes carry the size, so the receiver can check the block. */
		memcpy(mine, &sz, sizeof(sz));
		stamp(mine + 8, sz - 8, 0xab);
		pthread_mutex_lock(&xchg_lock);
		unsigned char *theirs = xchg[slot];
		xchg[slot] = mine;
		pthread_mutex_unlock(&xchg_lock);
		if (theirs) {
			size_t tsz;
			memcpy(&tsz, theirs, sizeof(tsz));
			if (malloc_usable_size(theirs) < tsz || !stamped(theirs + 8, tsz - 8, 0xab))
				return false;
			free(theirs);
		}
	}
	/* End on frees that fill the caches: the thread exits with them full. */
	void *last[64];
	for (int k = 0; k < 64; k++) {
		last[k] = malloc(class_sizes[k % 12]);
		if (!last[k])
			return false;
	}
	for (int k = 0; k < 64; k++)
		free(last[k]);
	return true;
}

static void *plain_thread(void *arg)
{
	uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL | 1;
	if (!churn(&rng, PER_CLASS))
		atomic_fetch_add(&thread_failures, 1);
	return NULL;
}

static void run_waves(int first, int count, void *(*fn)(void *), pthread_attr_t *attr)
{
	pthread_t t[WAVE];
	for (int base = 0; base < count; base += WAVE) {
		int n = count - base < WAVE ? count - base : WAVE;
		for (int i = 0; i < n; i++) {
			int rc = pthread_create(&t[i], attr, fn,
						(void *)(uintptr_t)(first + base + i + 1));
			CHECKF(rc == 0, "pthread_create #%d: %s", first + base + i, strerror(rc));
		}
		for (int i = 0; i < n; i++)
			CHECK(pthread_join(t[i], NULL) == 0);
	}
}

/* --- Part 2/3: destructors that allocate -------------------------------------------------- */

extern int __cxa_thread_atexit_impl(void (*dtor)(void *), void *obj, void *dso_symbol);
extern void *__dso_handle;

static pthread_key_t key;
static int rearm_rounds; /* how many times the key destructor sets the key again */
static atomic_uint key_dtor_calls, key_dtor_last_round, tls_dtor_calls;

struct key_state {
	uint64_t magic;
	int round;
	unsigned char payload[200];
};
#define KEY_MAGIC 0x6b65795f73746174ULL

static void key_dtor(void *v)
{
	struct key_state *s = v;
	atomic_fetch_add(&key_dtor_calls, 1);
	if (s->magic != KEY_MAGIC || s->payload[199] != (unsigned char)s->round) {
		atomic_fetch_add(&thread_failures, 1);
		return;
	}
	int round = s->round;
	s->magic = 0;
	free(s);
	/* Allocate and free again, after the allocator's own exit work may have run. */
	uint64_t rng = (uint64_t)round * 0x2545f4914f6cdd1dULL + (uint64_t)(uintptr_t)&rng;
	if (!churn(&rng, 8))
		atomic_fetch_add(&thread_failures, 1);
	if (round < rearm_rounds) {
		struct key_state *next = malloc(sizeof(*next));
		if (!next) {
			atomic_fetch_add(&thread_failures, 1);
			return;
		}
		next->magic = KEY_MAGIC;
		next->round = round + 1;
		memset(next->payload, round + 1, sizeof(next->payload));
		if (pthread_setspecific(key, next) != 0)
			atomic_fetch_add(&thread_failures, 1);
	} else {
		atomic_fetch_add(&key_dtor_last_round, 1);
	}
}

struct tls_obj {
	uint64_t magic;
	void *held; /* a block allocated by the thread, freed by the destructor */
};
static _Thread_local struct tls_obj tls_obj;

static void tls_dtor(void *v)
{
	struct tls_obj *o = v;
	atomic_fetch_add(&tls_dtor_calls, 1);
	if (o->magic != KEY_MAGIC + 1 || !o->held || ((unsigned char *)o->held)[999] != 0x42) {
		atomic_fetch_add(&thread_failures, 1);
		return;
	}
	free(o->held);
	o->held = NULL;
	uint64_t rng = (uint64_t)(uintptr_t)o | 1;
	if (!churn(&rng, 8))
		atomic_fetch_add(&thread_failures, 1);
}

static void *dtor_thread(void *arg)
{
	uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL | 1;
	tls_obj.magic = KEY_MAGIC + 1;
	tls_obj.held = malloc(1000);
	if (!tls_obj.held) {
		atomic_fetch_add(&thread_failures, 1);
		return NULL;
	}
	memset(tls_obj.held, 0x42, 1000);
	if (__cxa_thread_atexit_impl(tls_dtor, &tls_obj, &__dso_handle) != 0)
		atomic_fetch_add(&thread_failures, 1);
	struct key_state *s = malloc(sizeof(*s));
	if (!s) {
		atomic_fetch_add(&thread_failures, 1);
		return NULL;
	}
	s->magic = KEY_MAGIC;
	s->round = 0;
	memset(s->payload, 0, sizeof(s->payload));
	if (pthread_setspecific(key, s) != 0)
		atomic_fetch_add(&thread_failures, 1);
	if (!churn(&rng, PER_CLASS / 2))
		atomic_fetch_add(&thread_failures, 1);
	return NULL;
}

static long long mib(long long bytes)
{
	return bytes / (long long)TU_MIB;
}

static void run_dtor_part(const char *name, int nthreads, int rearm, pthread_attr_t *attr)
{
	rearm_rounds = rearm;
	atomic_store(&key_dtor_calls, 0);
	atomic_store(&key_dtor_last_round, 0);
	atomic_store(&tls_dtor_calls, 0);
	double t0 = tu_now();
	int warm = nthreads / 10;
	run_waves(0, warm, dtor_thread, attr);
	long long base = tu_rss_bytes();
	run_waves(warm, nthreads - warm, dtor_thread, attr);
	long long end = tu_rss_bytes();
	CHECK_EQ(atomic_load(&thread_failures), 0);
	CHECKF(atomic_load(&tls_dtor_calls) == (unsigned)nthreads, "TLS destructor ran %u times",
	       atomic_load(&tls_dtor_calls));
	CHECKF(atomic_load(&key_dtor_calls) == (unsigned)(nthreads * (rearm + 1)),
	       "key destructor ran %u times for %d threads x %d rounds",
	       atomic_load(&key_dtor_calls), nthreads, rearm + 1);
	CHECK_EQ(atomic_load(&key_dtor_last_round), nthreads);
	printf("%s: %d threads, key destructor in %d rounds, RSS %lld MiB after %d threads, "
	       "%lld MiB at the end, %.1f s\n",
	       name, nthreads, rearm + 1, mib(base), warm, mib(end), tu_now() - t0);
	CHECKF(end <= base + (long long)(16 * TU_MIB),
	       "%s: RSS grew from %lld to %lld MiB over %d threads whose destructors allocate "
	       "after the allocator's thread-exit flush",
	       name, mib(base), mib(end), nthreads - warm);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_require_pcpmalloc("test_thread_exit");
	bool long_mode = tu_long_mode(argc, argv);
	int nthreads = long_mode ? 100000 : 10000;
	int ndtor = long_mode ? 10000 : 2000;
	tu_watchdog(long_mode ? 1800 : 300);

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);

	/* Part 1. */
	double t0 = tu_now();
	long long calls0 = tu_stat("malloc_calls");
	int warm = 512;
	run_waves(0, warm, plain_thread, &attr);
	CHECK_EQ(atomic_load(&thread_failures), 0);
	long long base = tu_rss_bytes();
	long long mapped0 = tu_stat("mapped_bytes");
	long long peak = base;
	for (int done = warm; done < nthreads; done += 1024) {
		int n = nthreads - done < 1024 ? nthreads - done : 1024;
		run_waves(done, n, plain_thread, &attr);
		long long rss = tu_rss_bytes();
		if (rss > peak)
			peak = rss;
	}
	CHECK_EQ(atomic_load(&thread_failures), 0);
	long long end = tu_rss_bytes();
	long long mapped1 = tu_stat("mapped_bytes");
	long long calls1 = tu_stat("malloc_calls");
	/* Proof that the threads did their work: about 500 mallocs each (callocs not counted). */
	if (calls0 >= 0)
		CHECKF(calls1 - calls0 >= 400LL * nthreads, "malloc_calls grew by %lld for %d threads",
		       calls1 - calls0, nthreads);
	printf("part 1: malloc_calls +%lld\n", calls1 - calls0);
	printf("part 1: %d threads in %.1f s; RSS %lld MiB after %d threads, peak %lld MiB, "
	       "end %lld MiB; pcpmalloc mapped_bytes %lld -> %lld MiB\n",
	       nthreads, tu_now() - t0, mib(base), warm, mib(peak), mib(end), mib(mapped0),
	       mib(mapped1));
	if (base < 0 && end < 0 && mapped0 > 0) {
		/* no /proc (a container without procfs, test/hide.sh proc): the allocator's own
		 * mapped bytes stand in for the RSS */
		printf("part 1: RSS unreadable (no /proc/self/statm): bounding mapped_bytes instead\n");
		CHECKF(mapped1 <= 2 * mapped0 + (long long)(16 * TU_MIB),
		       "mapped_bytes grew from %lld MiB after %d threads to %lld MiB after %d",
		       mib(mapped0), warm, mib(mapped1), nthreads);
	} else {
		CHECK(base > 0 && end > 0);
		CHECKF(end <= 2 * base + (long long)(16 * TU_MIB),
		       "RSS grew from %lld MiB after %d threads to %lld MiB after %d", mib(base),
		       warm, mib(end), nthreads);
	}

	/* Part 2 and 3. */
	CHECK(pthread_key_create(&key, key_dtor) == 0);
	run_dtor_part("part 2", ndtor, 1, &attr);
	run_dtor_part("part 3", ndtor, PTHREAD_DESTRUCTOR_ITERATIONS - 1, &attr);

	for (int i = 0; i < XCHG_SLOTS; i++)
		free(xchg[i]);
	pthread_attr_destroy(&attr);
	return 0;
}
