/*
 * fastpath_loop.c - N allocate+free pairs of one size in one thread, with LIVE objects of
 * the same size held live throughout, for counting instructions per pair with callgrind
 * (bench/fastpath runs it twice with different N and takes the difference, so start-up,
 * the live objects' allocation and teardown cancel out).
 *
 * Usage: fastpath_loop [-l LIVE] [-a ALIGN] [-s] [-d] [-c] [-r] [-u] SIZE N
 *   -l LIVE   objects of SIZE allocated before the loop and freed after it (default 0).
 *             Real programs always hold some: with none, each free may empty the
 *             allocator's page (mimalloc then retires it on every pair).
 *   -a ALIGN  allocate with posix_memalign(ALIGN) instead of malloc
 *   -s        free with the allocator's sized free: free_sized (C23) where it is exported,
 *             else its own (jemalloc sdallocx, mimalloc mi_free_size, tcmalloc
 *             tc_free_sized), else free; the function used is printed on stdout
 *   -d        allocate with operator new (_Znwm) and free with the sized operator delete
 *             (_ZdlPvm), looked up by name; exits 3 where the process has none (glibc
 *             alone: no C++ runtime is loaded)
 *   -c        allocate with calloc(1, SIZE) instead of malloc (a pair, as the plain loop)
 *   -r        one realloc per iteration that stays in SIZE's class: the block alternates
 *             between SIZE and SIZE - 1 bytes (SIZE >= 2; not a pair: one call)
 *   -u        one malloc_usable_size per iteration on a live block of SIZE (one call)
 * Links nothing but libc: every function beyond malloc/free is found with dlsym.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef void (*sized_free_fn)(void *, size_t);
typedef void (*sdallocx_fn)(void *, size_t, int);
typedef void *(*new_fn)(size_t);

static sdallocx_fn je_sdallocx;

static void free_with_sdallocx(void *p, size_t size)
{
	je_sdallocx(p, size, 0);
}

/* the allocator's sized free, and its name */
static sized_free_fn find_sized_free(const char **name)
{
	static const char *const names[] = { "free_sized", "mi_free_size", "tc_free_sized" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *f = dlsym(RTLD_DEFAULT, names[i]);

		if (f) {
			*name = names[i];
			return (sized_free_fn)f;
		}
	}
	je_sdallocx = (sdallocx_fn)dlsym(RTLD_DEFAULT, "sdallocx");
	if (je_sdallocx) {
		*name = "sdallocx";
		return free_with_sdallocx;
	}
	*name = "free";
	return NULL;
}

/*
 * The measured loops, one per mode, each out of line with its arguments in registers, so
 * that the plain one compiles to the loop every earlier figure was counted with (the loop's
 * own 5 instructions per pair are in every column).  The first pair warms the thread cache.
 */
static __attribute__((noinline)) void pairs_free(size_t size, long n)
{
	void *volatile sink = malloc(size);

	free(sink);
	for (long i = 0; i < n; i++) {
		void *p = malloc(size);

		sink = p;
		free(p);
	}
}

static __attribute__((noinline)) void pairs_sized(size_t size, long n, sized_free_fn sfree)
{
	void *volatile sink = malloc(size);

	sfree(sink, size);
	for (long i = 0; i < n; i++) {
		void *p = malloc(size);

		sink = p;
		sfree(p, size);
	}
}

static __attribute__((noinline)) void pairs_calloc(size_t size, long n)
{
	void *volatile sink = calloc(1, size);

	free(sink);
	for (long i = 0; i < n; i++) {
		void *p = calloc(1, size);

		sink = p;
		free(p);
	}
}

static __attribute__((noinline)) int calls_realloc(size_t size, long n)
{
	void *p = malloc(size);

	for (long i = 0; i < n && p; i++) {
		void *q = realloc(p, size - (i & 1));

		if (q != p) { /* left its class: not the case this loop measures */
			free(q);
			return -1;
		}
	}
	free(p);
	return p ? 0 : -1;
}

static __attribute__((noinline)) size_t calls_usable(size_t size, long n)
{
	void *p = malloc(size);
	size_t sum = 0;

	for (long i = 0; i < n && p; i++)
		sum += malloc_usable_size(p);
	free(p);
	return sum;
}

static __attribute__((noinline)) int pairs_aligned(size_t size, long n, size_t align)
{
	void *volatile sink;

	for (long i = 0; i <= n; i++) {
		void *p;

		if (posix_memalign(&p, align, size))
			return -1;
		sink = p;
		free(p);
	}
	(void)sink;
	return 0;
}

static __attribute__((noinline)) void pairs_cxx(size_t size, long n, new_fn cnew,
						sized_free_fn cdelete)
{
	void *volatile sink = cnew(size);

	cdelete(sink, size);
	for (long i = 0; i < n; i++) {
		void *p = cnew(size);

		sink = p;
		cdelete(p, size);
	}
}

int main(int argc, char **argv)
{
	long live = 0;
	size_t align = 0;
	int sized = 0, cxx = 0, zero = 0, resize = 0, usable = 0, c;

	while ((c = getopt(argc, argv, "l:a:sdcru")) != -1) {
		switch (c) {
		case 'l':
			live = strtol(optarg, NULL, 0);
			break;
		case 'a':
			align = strtoul(optarg, NULL, 0);
			break;
		case 's':
			sized = 1;
			break;
		case 'd':
			cxx = 1;
			break;
		case 'c':
			zero = 1;
			break;
		case 'r':
			resize = 1;
			break;
		case 'u':
			usable = 1;
			break;
		default:
			goto usage;
		}
	}
	if (argc - optind != 2 || live < 0)
		goto usage;
	size_t size = strtoul(argv[optind], NULL, 0);
	long n = strtol(argv[optind + 1], NULL, 0);

	const char *fname = "free";
	sized_free_fn sfree = sized ? find_sized_free(&fname) : NULL;
	new_fn cnew = NULL;

	if (cxx) {
		cnew = (new_fn)dlsym(RTLD_DEFAULT, "_Znwm");
		sfree = (sized_free_fn)dlsym(RTLD_DEFAULT, "_ZdlPvm");
		fname = "_ZdlPvm";
		if (!cnew || !sfree) {
			fprintf(stderr, "%s: no operator new/delete in this process\n", argv[0]);
			return 3;
		}
	}
	if (sized || cxx)
		printf("sized-free=%s\n", fname);

	void **hold = calloc(live ? live : 1, sizeof(*hold));

	if (!hold)
		return 1;
	for (long i = 0; i < live; i++) {
		if (cxx)
			hold[i] = cnew(size);
		else if (align && posix_memalign(&hold[i], align, size))
			hold[i] = NULL;
		else if (!align)
			hold[i] = malloc(size);
		if (!hold[i])
			return 1;
	}
	if (cxx)
		pairs_cxx(size, n, cnew, sfree);
	else if (zero)
		pairs_calloc(size, n);
	else if (resize && (size < 2 || calls_realloc(size, n)))
		return 1;
	else if (usable)
		printf("usable-sum=%zu\n", calls_usable(size, n));
	else if (resize)
		;
	else if (align && pairs_aligned(size, n, align))
		return 1;
	else if (!align && sfree)
		pairs_sized(size, n, sfree);
	else if (!align)
		pairs_free(size, n);
	for (long i = 0; i < live; i++) {
		if (sfree)
			sfree(hold[i], size);
		else
			free(hold[i]);
	}
	free(hold);
	return 0;
usage:
	fprintf(stderr, "usage: %s [-l LIVE] [-a ALIGN] [-s] [-d] [-c] [-r] [-u] SIZE N\n", argv[0]);
	return 2;
}
