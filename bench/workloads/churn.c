/* wl-churn - thread-local churn of small objects: each thread keeps a working set of slots
 * and replaces a random one per operation (free, then malloc of a new random size), writing
 * into every new block.  Nothing crosses threads. */
#include "wl.h"

static long threads = 2, ops = 4000000, slots = 1000, lo = 16, hi = 512;

struct arg {
	long id;
	unsigned long long check;
};

static void *worker(void *p)
{
	struct arg *a = p;
	uint64_t s = wl_seed(a->id);
	unsigned char **slot = calloc(slots, sizeof *slot);
	unsigned long long check = 0;
	for (long i = 0; i < ops; i++) {
		long k = wl_rand(&s) % slots;
		if (slot[k]) {
			check += slot[k][0];
			free(slot[k]);
		}
		size_t n = wl_size(&s, lo, hi);
		slot[k] = wl_xmalloc(n);
		memset(slot[k], (int)(n & 0xff), n < 64 ? n : 64);
		check += n;
	}
	for (long k = 0; k < slots; k++)
		free(slot[k]);
	free(slot);
	a->check = check;
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads", &threads}, {'n', "operations per thread", &ops},
			     {'k', "working-set slots per thread", &slots},
			     {'s', "smallest size (bytes)", &lo}, {'S', "largest size (bytes)", &hi}};
	wl_parse(argc, argv, "thread-local churn of small objects", o, 5);
	if (threads < 1 || slots < 1 || hi < lo || lo < 1)
		return fprintf(stderr, "bad options\n"), 2;
	struct arg a[threads];
	double dt = wl_run_threads(threads, worker, a, sizeof a[0]);
	unsigned long long check = wl_checksum(a, threads, sizeof a[0], offsetof(struct arg, check));
	wl_report("churn", (unsigned long long)threads * ops, check, dt);
	return 0;
}
