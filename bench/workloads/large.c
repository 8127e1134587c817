/* wl-large - large blocks: a few live slots per thread, each replaced by a block of a random
 * size between 256 KiB and 64 MiB (log-uniform: as many 256-512 KiB blocks as 32-64 MiB
 * ones); every page of a new block is written, so page faults and the reuse of resident
 * memory count. */
#include "wl.h"
#include <math.h>

static long threads = 1, ops = 4000, slots = 4, lo_kib = 256, hi_kib = 65536;

struct arg {
	long id;
	unsigned long long check;
};

static void *worker(void *p)
{
	struct arg *a = p;
	uint64_t s = wl_seed(a->id + 600);
	void **slot = calloc(slots, sizeof *slot);
	double llo = log2((double)lo_kib), lhi = log2((double)hi_kib);
	for (long i = 0; i < ops; i++) {
		long k = wl_rand(&s) % slots;
		free(slot[k]);
		double f = (double)(wl_rand(&s) >> 11) / (double)(1ULL << 53);
		size_t n = (size_t)(exp2(llo + f * (lhi - llo)) * 1024);
		slot[k] = wl_xmalloc(n);
		wl_touch(slot[k], n, (unsigned char)i);
		a->check += n;
	}
	for (long k = 0; k < slots; k++)
		free(slot[k]);
	free(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads", &threads}, {'n', "operations per thread", &ops},
			     {'k', "live blocks per thread", &slots},
			     {'s', "smallest block (KiB)", &lo_kib}, {'S', "largest block (KiB)", &hi_kib}};
	wl_parse(argc, argv, "large blocks (256 KiB - 64 MiB), touched", o, 5);
	if (threads < 1 || slots < 1 || hi_kib < lo_kib || lo_kib < 1)
		return fprintf(stderr, "bad options\n"), 2;
	struct arg a[threads];
	double dt = wl_run_threads(threads, worker, a, sizeof a[0]);
	unsigned long long check = wl_checksum(a, threads, sizeof a[0], offsetof(struct arg, check));
	wl_report("large", (unsigned long long)threads * ops, check, dt);
	return 0;
}
