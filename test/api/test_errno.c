/*
 * test_errno.c - successful malloc and every free leave errno alone, also when their locks
 * are contended (issue 15, class 5).
 *
 * 8 threads each do rounds of 64 mallocs then 64 frees of 20-40 KB blocks (paged slab
 * classes and page runs: the pcp and zone locks, contended), errno set to a marker before
 * each call.  A successful malloc and every free must leave the marker there (glibc 2.33+
 * preserves errno in free; POSIX now requires it): a futex wait's EAGAIN or EINTR must not
 * leak out.  Such a leak needs a race (a futex wait that finds the lock word changed): the
 * threads share pcps (meson runs it with PCPMALLOC_CPU_SOURCE=tid) and run for 3 s.
 *
 * Usage: test_errno [short|long]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>

#include "testutil.h"

#define THREADS 8
#define BLOCKS 64
#define MARKER 12345

static double run_s = 3.0;
static double end_at;
static atomic_long changed_malloc, changed_free, calls;

static void *worker(void *arg)
{
	uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
	void *b[BLOCKS];
	while (tu_now() < end_at) {
		for (int i = 0; i < BLOCKS; i++) {
			size_t n = tu_rand_range(&rng, 20000, 40000);
			errno = MARKER;
			b[i] = malloc(n);
			int e = errno;
			CHECK(b[i] != NULL);
			if (e != MARKER)
				atomic_fetch_add(&changed_malloc, 1);
			((char *)b[i])[0] = 1;
		}
		for (int i = 0; i < BLOCKS; i++) {
			errno = MARKER;
			free(b[i]);
			if (errno != MARKER)
				atomic_fetch_add(&changed_free, 1);
		}
		atomic_fetch_add(&calls, 2 * BLOCKS);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	tu_require_pcpmalloc("test_errno");
	tu_watchdog(100);
	if (tu_long_mode(argc, argv))
		run_s = 30.0;
	end_at = tu_now() + run_s;
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(i + 1)) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("test_errno: %ld calls; errno changed by %ld successful mallocs, %ld frees\n",
	       atomic_load(&calls), atomic_load(&changed_malloc), atomic_load(&changed_free));
	CHECK_EQ(atomic_load(&changed_malloc), 0);
	CHECK_EQ(atomic_load(&changed_free), 0);
	printf("test_errno: ok\n");
	return 0;
}
