/* wl-return - memory returned after a burst (issue 6, target 6).  Keeps a small live baseline,
 * measures the RSS (the "pre-burst" figure), allocates a burst of M MiB (half in small blocks
 * of 16-1024 B, half in blocks of 16 KiB-8 MiB, every page touched), has a second thread free
 * every fourth block while the main thread frees the rest, and then watches RSS and RSS minus
 * LazyFree (/proc/self/smaps_rollup) every I ms making NO allocator call: the sampling uses
 * open/read into static buffers and the freeing thread waits on a barrier.
 *
 *   -M 0  idle: sample for D ms after the free (the background decay thread's case)
 *   -M 1  activity: idle D ms, then a little allocator activity (malloc/free of 256 small and
 *         16 mid-sized blocks, what a program waking up does), then sample again for 500 ms
 *   -M 2  trim: malloc_trim(0) right after the free, then sample
 *
 * Prints one '# key=value' line: rss_pre_kib, rss_peak_kib, rss_free_kib (at once after the
 * free), rss_2s_kib (2 s after the free, or the end of the mode's sampling), rss_end_kib,
 * nolazy_* the same minus LazyFree, t_within10_ms (first sample at most 1.1x rss_pre, -1 if
 * never), and the samples as a 't:rss:nolazy' list on a '# samples' line. */
#include "wl.h"
#include <fcntl.h>
#include <malloc.h>

static long mib = 1024, interval = 50, duration = 2500, mode = 0, base_mib = 16;

#define MAX_SAMPLES 4096
static struct sample {
	long t_ms, rss, nolazy;
} samples[MAX_SAMPLES];
static int nsamples;
static char rbuf[8192];

/* RSS and LazyFree in KiB from /proc/self/smaps_rollup, without allocating. */
static void read_rss(long *rss, long *lazy)
{
	*rss = *lazy = 0;
	int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*rss = wl_rss_kib(); /* old kernel: statm (stdio; a warning in the output) */
		return;
	}
	ssize_t n = 0, r;
	while (n < (ssize_t)sizeof(rbuf) - 1 && (r = read(fd, rbuf + n, sizeof(rbuf) - 1 - n)) > 0)
		n += r;
	close(fd);
	rbuf[n > 0 ? n : 0] = 0;
	for (char *p = rbuf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, "Rss:", 4) == 0)
			*rss = strtol(p + 4, NULL, 10);
		else if (strncmp(p, "LazyFree:", 9) == 0)
			*lazy = strtol(p + 9, NULL, 10);
	}
}

static double t0;
static void sample(void)
{
	if (nsamples >= MAX_SAMPLES)
		return;
	struct sample *s = &samples[nsamples++];
	long lazy;
	read_rss(&s->rss, &lazy);
	s->nolazy = s->rss - lazy;
	s->t_ms = (long)((wl_now() - t0) * 1000 + 0.5);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* sample every interval ms until t0 + until_ms */
static void watch(long until_ms)
{
	for (;;) {
		sample();
		long now = (long)((wl_now() - t0) * 1000);
		if (now >= until_ms)
			break;
		long next = (now / interval + 1) * interval;
		sleep_ms(next - now > 0 ? next - now : 1);
	}
}

static void **blocks;
static size_t nblocks;
static pthread_barrier_t bar;

/* the other thread: frees every fourth block, then waits (alive, no allocator call) */
static void *remote(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&bar);
	for (size_t i = 0; i < nblocks; i += 4)
		free(blocks[i]);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar); /* until the end of the run */
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'m', "burst size (MiB)", &mib},
			     {'b', "live baseline kept across the burst (MiB)", &base_mib},
			     {'I', "sampling interval (ms)", &interval},
			     {'D', "how long to watch after the free (ms)", &duration},
			     {'M', "0 idle, 1 idle then activity, 2 malloc_trim(0)", &mode}};
	wl_parse(argc, argv, "a burst freed (a quarter by another thread): RSS given back", o, 5);
	if (mib < 1 || interval < 1 || mode > 2)
		return fprintf(stderr, "bad options\n"), 2;

	/* the baseline: live data in small and page-sized blocks */
	uint64_t s = wl_seed(600);
	size_t nbase = 0, capbase = ((size_t)base_mib << 20) / 256 + 16;
	void **base = wl_xmalloc(capbase * sizeof *base);
	unsigned long long check = 0;
	for (size_t got = 0; got < (size_t)base_mib << 20 && nbase < capbase;) {
		size_t sz = wl_size(&s, 16, 8192);
		base[nbase] = wl_xmalloc(sz);
		wl_touch(base[nbase++], sz, 1);
		got += sz;
		check += sz;
	}
	size_t cap = ((size_t)mib << 20) / 256 + 4096; /* small blocks average about 300 B */
	blocks = wl_xmalloc(cap * sizeof *blocks);
	wl_touch(blocks, cap * sizeof *blocks, 0);
	pthread_barrier_init(&bar, NULL, 2);
	pthread_t th;
	if (pthread_create(&th, NULL, remote, NULL))
		return fprintf(stderr, "pthread_create failed\n"), 1;
	sleep_ms(100);
	long rss_pre, lazy_pre;
	read_rss(&rss_pre, &lazy_pre);

	/* the burst: half the bytes in small blocks, half in 16 KiB-8 MiB ones (log-uniform) */
	size_t small_bytes = 0, large_bytes = 0, half = (size_t)mib << 19;
	while ((small_bytes < half || large_bytes < half) && nblocks < cap) {
		size_t sz;
		if (small_bytes < half && (large_bytes >= half || wl_rand(&s) % 64)) {
			sz = wl_size(&s, 16, 1024);
			small_bytes += sz;
		} else {
			sz = (size_t)16384 << (wl_rand(&s) % 10); /* 16 KiB .. 8 MiB */
			sz += wl_rand(&s) % sz;
			large_bytes += sz;
		}
		blocks[nblocks] = wl_xmalloc(sz);
		wl_touch(blocks[nblocks++], sz, 2);
		check += sz;
	}
	long rss_peak, lazy_peak;
	read_rss(&rss_peak, &lazy_peak);
	pthread_barrier_wait(&bar); /* the other thread frees its quarter ... */
	for (size_t i = 0; i < nblocks; i++)
		if (i % 4)
			free(blocks[i]);
	pthread_barrier_wait(&bar); /* ... and is done */
	t0 = wl_now();
	long trim_us = -1;
	int act_idx = -1;
	if (mode == 2) {
		malloc_trim(0);
		trim_us = (long)((wl_now() - t0) * 1e6);
	}
	watch(duration);
	if (mode == 1) {
		act_idx = nsamples;
		void *v[272];
		for (int i = 0; i < 256; i++)
			v[i] = malloc(wl_size(&s, 16, 1024));
		for (int i = 256; i < 272; i++)
			v[i] = malloc(16384 << (i % 3));
		for (int i = 0; i < 272; i++)
			free(v[i]);
		watch(duration + 500);
	}

	/* report (allocator calls from here on) */
	long at2s = -1, at2s_nl = -1, within = -1, within_nl = -1, limit = rss_pre + rss_pre / 10;
	long after_act = -1, after_act_nl = -1;
	for (int i = 0; i < nsamples; i++) {
		if (samples[i].t_ms <= 2000 + interval / 2) {
			at2s = samples[i].rss;
			at2s_nl = samples[i].nolazy;
		}
		if (within < 0 && samples[i].rss <= limit)
			within = samples[i].t_ms;
		if (within_nl < 0 && samples[i].nolazy <= limit)
			within_nl = samples[i].t_ms;
		if (i == act_idx) {
			after_act = samples[i].rss;
			after_act_nl = samples[i].nolazy;
		}
	}
	pthread_barrier_wait(&bar);
	pthread_join(th, NULL);
	for (size_t i = 0; i < nbase; i++)
		free(base[i]);
	free(base);
	free(blocks);
	printf("wl-return: blocks=%zu checksum=%016llx\n", nblocks, check);
	printf("# wl-return: mode=%ld rss_pre_kib=%ld rss_peak_kib=%ld rss_free_kib=%ld rss_2s_kib=%ld "
	       "rss_end_kib=%ld nolazy_free_kib=%ld nolazy_2s_kib=%ld nolazy_end_kib=%ld "
	       "t_within10_ms=%ld t_within10_nolazy_ms=%ld rss_after_activity_kib=%ld "
	       "nolazy_after_activity_kib=%ld trim_us=%ld\n",
	       mode, rss_pre, rss_peak, samples[0].rss, at2s, samples[nsamples - 1].rss,
	       samples[0].nolazy, at2s_nl, samples[nsamples - 1].nolazy, within, within_nl, after_act,
	       after_act_nl, trim_us);
	printf("# samples (ms:rss_kib:nolazy_kib):");
	for (int i = 0; i < nsamples; i++)
		printf(" %ld:%ld:%ld", samples[i].t_ms, samples[i].rss, samples[i].nolazy);
	printf("\n");
	return 0;
}
