/* wl-glibc-thread - the pattern of glibc's benchtests/bench-malloc-thread: T threads, each
 * with its own working set of 1024 blocks, repeatedly free a random block and allocate a new
 * one whose size is drawn from a table of sizes in [4, 32768] B distributed as 1/size (many
 * small, a long tail of large ones); nothing crosses threads.  With -t 1 it is the
 * single-thread figure of the same benchmark. */
#include "wl.h"
#include <math.h>

static long threads = 2, ops = 2500000, wset = 1024, lo = 4, hi = 32768;

#define NSIZES 8192
static unsigned sizes[NSIZES];

struct arg {
	long id;
	unsigned long long check;
};

static void *worker(void *p)
{
	struct arg *a = p;
	uint64_t s = wl_seed(a->id + 700);
	unsigned long long check = 0;
	void **ws = calloc(wset, sizeof *ws);
	for (long i = 0; i < ops; i++) {
		uint64_t r = wl_rand(&s);
		long k = (long)(r % (uint64_t)wset);
		size_t n = sizes[(r >> 32) % NSIZES];
		free(ws[k]);
		unsigned char *b = wl_xmalloc(n);
		b[0] = (unsigned char)i;
		ws[k] = b;
		check += n;
	}
	for (long k = 0; k < wset; k++)
		free(ws[k]);
	free(ws);
	a->check = check;
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads", &threads}, {'n', "operations per thread", &ops},
			     {'w', "working set (blocks per thread)", &wset},
			     {'s', "smallest size (bytes)", &lo}, {'S', "largest size (bytes)", &hi}};
	wl_parse(argc, argv, "glibc bench-malloc-thread pattern: per-thread random replacement, "
		 "sizes 4-32768 B as 1/size", o, 5);
	if (threads < 1 || wset < 1 || hi < lo || lo < 1)
		return fprintf(stderr, "bad options\n"), 2;
	/* inverse CDF of a density 1/x on [lo, hi]: x = lo * (hi/lo)^u, u uniform in [0, 1) */
	for (long i = 0; i < NSIZES; i++)
		sizes[i] = (unsigned)(lo * pow((double)hi / lo, (double)i / NSIZES));
	struct arg a[threads];
	double dt = wl_run_threads(threads, worker, a, sizeof a[0]);
	unsigned long long check = wl_checksum(a, threads, sizeof a[0], offsetof(struct arg, check));
	wl_report("glibc-thread", (unsigned long long)threads * ops, check, dt);
	return 0;
}
