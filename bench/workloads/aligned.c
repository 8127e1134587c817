/* wl-aligned - aligned allocations: posix_memalign, aligned_alloc and memalign in turn, with
 * alignments from 16 B to 64 KiB (mostly small ones) and sizes from 1 B to 4 alignments,
 * in a working set of slots per thread; every result is checked for its alignment.  A
 * misaligned block is counted (per function) and reported on stderr and as a metric rather
 * than stopping the run: mimalloc 2.0.9's aligned_alloc, preloaded, returns some. */
#include "wl.h"
#include <malloc.h>

static long threads = 1, ops = 2000000, slots = 500, maxshift = 16;
static const char *fname[3] = {"posix_memalign", "aligned_alloc", "memalign"};
static unsigned long misaligned[3];

struct arg {
	long id;
	unsigned long long check;
};

static void *worker(void *p)
{
	struct arg *a = p;
	uint64_t s = wl_seed(a->id + 500);
	void **slot = calloc(slots, sizeof *slot);
	for (long i = 0; i < ops; i++) {
		long k = wl_rand(&s) % slots;
		free(slot[k]);
		uint64_t r = wl_rand(&s);
		/* shift 4..maxshift, geometric: each larger alignment half as likely */
		unsigned sh = 4;
		while (sh < maxshift && (r & 1)) {
			sh++;
			r >>= 1;
		}
		size_t al = (size_t)1 << sh;
		size_t n = 1 + (wl_rand(&s) % (4 * al));
		void *q = NULL;
		switch (i % 3) {
		case 0:
			if (posix_memalign(&q, al, n))
				q = NULL;
			break;
		case 1:
			q = aligned_alloc(al, (n + al - 1) & ~(al - 1));
			break;
		default:
			q = memalign(al, n);
		}
		if (!q) {
			fprintf(stderr, "aligned: %s(%zu, %zu) failed\n", fname[i % 3], al, n);
			exit(1);
		}
		if ((uintptr_t)q & (al - 1))
			__atomic_add_fetch(&misaligned[i % 3], 1, __ATOMIC_RELAXED);
		*(unsigned char *)q = (unsigned char)i;
		slot[k] = q;
		a->check += al + n;
	}
	for (long k = 0; k < slots; k++)
		free(slot[k]);
	free(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads", &threads}, {'n', "operations per thread", &ops},
			     {'k', "working-set slots per thread", &slots},
			     {'A', "largest alignment, as a power of two (4..20)", &maxshift}};
	wl_parse(argc, argv, "aligned allocations", o, 4);
	if (threads < 1 || slots < 1 || maxshift < 4 || maxshift > 20)
		return fprintf(stderr, "bad options\n"), 2;
	struct arg a[threads];
	double dt = wl_run_threads(threads, worker, a, sizeof a[0]);
	unsigned long long check = wl_checksum(a, threads, sizeof a[0], offsetof(struct arg, check));
	wl_report("aligned", (unsigned long long)threads * ops, check, dt);
	unsigned long bad = 0;
	for (int f = 0; f < 3; f++) {
		if (misaligned[f])
			fprintf(stderr, "aligned: %lu blocks from %s were misaligned\n", misaligned[f],
				fname[f]);
		bad += misaligned[f];
	}
	printf("# aligned: misaligned=%lu\n", bad);
	return 0;
}
