/*
 * test_decay_thread.c - PCPMALLOC_DECAY_THREAD=1 (set by meson, with PCPMALLOC_DECAY_MS=200):
 * after a burst of 4-32 KiB blocks is freed, the background worker runs decay_pcp_high and
 * the purge with no further allocator calls from the program, so the pages the pcps and the
 * zone kept after the burst go back to the kernel.  The main thread only sleeps and reads
 * counters (pcpmalloc_stat does not allocate).  Then, with the worker asleep (nothing left to
 * do), huge blocks are freed into the huge-mapping cache: the free wakes the worker, which
 * purges them once they stayed unused (they stayed resident for good before: the worker
 * neither woke for them nor counted them as work).
 */
#include "testutil.h"

int main(void)
{
	tu_require_pcpmalloc("test_decay_thread");
	tu_watchdog(60);
	CHECK(getenv("PCPMALLOC_DECAY_THREAD") && atoi(getenv("PCPMALLOC_DECAY_THREAD")) == 1);
	long long before = tu_rss_bytes();
	enum { N = 12000 };
	static void *p[N];
	uint64_t rng = 7;
	for (int i = 0; i < N; i++) {
		size_t n = tu_rand_range(&rng, 4 * TU_KIB, 32 * TU_KIB);
		p[i] = malloc(n);
		CHECK(p[i]);
		memset(p[i], 0x5a, n);
	}
	long long peak = tu_rss_bytes();
	CHECK(peak > before + 100 * (long long)TU_MIB);
	for (int i = 0; i < N; i++)
		free(p[i]);
	long long after_free = tu_rss_bytes();
	long long decays0 = tu_stat("decay_runs");
	/* no allocator calls from here on: only the worker can give memory back */
	long long rss = after_free;
	double t0 = tu_now();
	while (tu_now() - t0 < 20 && rss > before + 12 * (long long)TU_MIB) {
		usleep(100 * 1000);
		rss = tu_rss_bytes();
	}
	printf("rss before %lld MiB, peak %lld MiB, after free %lld MiB, after %.1f s idle %lld MiB; "
	       "decay runs %lld -> %lld\n",
	       before >> 20, peak >> 20, after_free >> 20, tu_now() - t0, rss >> 20, decays0,
	       tu_stat("decay_runs"));
	fflush(stdout);
	CHECK(tu_stat("decay_runs") > 0);
	/* The free itself leaves up to PCPMALLOC_DIRTY_MIN_MB (16) of resident free pages in
	 * the zone and the pcps' contents; only a decay/purge pass gives those back.  What
	 * stays is the structural floor: partial slabs (min_partial), pcp high_min, caches. */
	CHECKF(rss <= before + 12 * (long long)TU_MIB,
	       "RSS stayed at %lld MiB (before the burst %lld MiB)", rss >> 20, before >> 20);

	/* huge blocks freed while the worker sleeps */
	usleep(500 * 1000);
	enum { H = 8 };
	static void *h[H];
	for (int i = 0; i < H; i++) {
		h[i] = malloc(10 * TU_MIB);
		CHECK(h[i]);
		memset(h[i], 0x5a, 10 * TU_MIB);
	}
	long long hpeak = tu_rss_bytes();
	CHECK(hpeak > rss + 60 * (long long)TU_MIB);
	for (int i = 0; i < H; i++)
		free(h[i]);
	long long hrss = tu_rss_bytes();
	t0 = tu_now();
	while (tu_now() - t0 < 10 && hrss > rss + 12 * (long long)TU_MIB) {
		usleep(100 * 1000);
		hrss = tu_rss_bytes();
	}
	printf("huge blocks: rss peak %lld MiB, after %.1f s idle %lld MiB\n", hpeak >> 20,
	       tu_now() - t0, hrss >> 20);
	CHECKF(hrss <= rss + 12 * (long long)TU_MIB,
	       "RSS stayed at %lld MiB after the huge blocks were freed (before them %lld MiB)",
	       hrss >> 20, rss >> 20);
	return 0;
}
