/* wl.h - shared helpers of the bench/ workloads: options, a deterministic PRNG, timing, the
 * result lines.  Every workload does a fixed amount of work decided by its options (and the
 * PRNG seeds), prints deterministic result lines (counts, checksums) and measurement lines
 * that start with '#' and carry key=value pairs (ops_per_s=..., rss_..._kib=...); the A/B
 * harness reads the '#' lines as metrics and ignores them when comparing outputs. */
#ifndef WL_H
#define WL_H
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One option: a letter, a description, and the long it fills. */
struct wl_opt {
	char letter;
	const char *help;
	long *value;
};

static inline void wl_usage(const char *prog, const char *what, const struct wl_opt *opts, int n)
{
	fprintf(stderr, "usage: %s [options]\n  %s\n", prog, what);
	for (int i = 0; i < n; i++)
		fprintf(stderr, "  -%c N  %s (default %ld)\n", opts[i].letter, opts[i].help,
			*opts[i].value);
}

/* Parses "-x N" pairs; exits 2 on anything else.  Values must be >= 0. */
static inline void wl_parse(int argc, char **argv, const char *what, const struct wl_opt *opts,
			    int n)
{
	for (int a = 1; a < argc; a++) {
		const char *s = argv[a];
		int found = -1;
		if (s[0] == '-' && s[1] && !s[2])
			for (int i = 0; i < n; i++)
				if (opts[i].letter == s[1])
					found = i;
		if (found < 0 || a + 1 >= argc) {
			if (strcmp(s, "-h") && strcmp(s, "--help"))
				fprintf(stderr, "%s: bad argument '%s'\n", argv[0], s);
			wl_usage(argv[0], what, opts, n);
			exit(strcmp(s, "-h") && strcmp(s, "--help") ? 2 : 0);
		}
		char *end;
		errno = 0;
		long v = strtol(argv[++a], &end, 0);
		if (errno || *end || v < 0) {
			fprintf(stderr, "%s: bad value '%s' for -%c\n", argv[0], argv[a], s[1]);
			exit(2);
		}
		*opts[found].value = v;
	}
}

/* xorshift64*: deterministic per seed. */
static inline uint64_t wl_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static inline uint64_t wl_seed(uint64_t i)
{
	return 0x9E3779B97F4A7C15ULL * (i + 1) ^ 0xD1B54A32D192ED03ULL;
}

/* A size in [lo, hi], skewed towards small sizes (log-uniform-ish), as real programs are. */
static inline size_t wl_size(uint64_t *s, size_t lo, size_t hi)
{
	if (hi <= lo)
		return lo;
	uint64_t r = wl_rand(s);
	size_t span = hi - lo + 1;
	size_t cap = span >> (r % 4 == 0 ? 0 : (r >> 8) % 6);
	if (cap == 0)
		cap = 1;
	return lo + (size_t)((r >> 16) % cap);
}

static inline double wl_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Resident set size of this process now, in KiB (from /proc/self/statm). */
static inline long wl_rss_kib(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static inline void *wl_xmalloc(size_t n)
{
	void *p = malloc(n);
	if (!p) {
		fprintf(stderr, "out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

/* Touch every page (and the first and last byte) so the memory is really used. */
static inline void wl_touch(void *p, size_t n, unsigned char v)
{
	unsigned char *c = p;
	for (size_t i = 0; i < n; i += 4096)
		c[i] = v;
	if (n)
		c[n - 1] = v;
}

static inline void wl_start_threads(pthread_t *t, long n, void *(*fn)(void *), void *args,
				    size_t argsize)
{
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, fn, (char *)args + i * argsize)) {
			fprintf(stderr, "pthread_create failed\n");
			exit(1);
		}
}

static inline void wl_join_threads(pthread_t *t, long n)
{
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/*
 * Runs fn on n threads, each given its own element of args (zeroed; its first member is a
 * `long id`, set to the thread's index), and returns the elapsed seconds.
 */
static inline double wl_run_threads(long n, void *(*fn)(void *), void *args, size_t argsize)
{
	pthread_t t[n];
	memset(args, 0, (size_t)n * argsize);
	for (long i = 0; i < n; i++)
		*(long *)((char *)args + i * argsize) = i;
	double t0 = wl_now();
	wl_start_threads(t, n, fn, args, argsize);
	wl_join_threads(t, n);
	return wl_now() - t0;
}

/* The run's checksum: each thread's `unsigned long long` at check_off in its element of args,
 * folded in thread order (the same for every allocator when the workload is correct). */
static inline unsigned long long wl_checksum(const void *args, long n, size_t argsize,
					     size_t check_off)
{
	unsigned long long check = 0;
	for (long i = 0; i < n; i++)
		check = check * 31 +
			*(const unsigned long long *)((const char *)args + i * argsize + check_off);
	return check;
}

/* The closing lines: a deterministic result, then the measurements. */
static inline void wl_report(const char *name, unsigned long long ops, unsigned long long check,
			     double secs)
{
	printf("%s: ops=%llu checksum=%016llx\n", name, ops, check);
	printf("# %s: %.0f ops/s in %.4f s  ops_per_s=%.0f\n", name, ops / secs, secs, ops / secs);
}
#endif
