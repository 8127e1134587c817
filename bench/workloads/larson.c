/* wl-larson - a larson-style server: one shared array of slots; every thread repeatedly
 * picks a random slot, frees whatever block is there (often allocated by another thread)
 * and puts a new block of random size in it.  Slot ownership moves between threads, so most
 * frees are remote.  A slot is taken with an atomic exchange, so no lock is needed. */
#include "wl.h"

static long threads = 2, ops = 2000000, slots = 20000, lo = 16, hi = 1024;
static unsigned char **slot;

struct arg {
	long id;
	unsigned long long check;
};

static void *worker(void *p)
{
	struct arg *a = p;
	uint64_t s = wl_seed(a->id + 100);
	unsigned long long check = 0;
	for (long i = 0; i < ops; i++) {
		long k = wl_rand(&s) % slots;
		size_t n = wl_size(&s, lo, hi);
		unsigned char *b = wl_xmalloc(n);
		b[0] = (unsigned char)n;
		b[n - 1] = (unsigned char)k;
		check += n;
		unsigned char *old = __atomic_exchange_n(&slot[k], b, __ATOMIC_ACQ_REL);
		free(old);
	}
	a->check = check;
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads", &threads}, {'n', "operations per thread", &ops},
			     {'k', "shared slots", &slots}, {'s', "smallest size (bytes)", &lo},
			     {'S', "largest size (bytes)", &hi}};
	wl_parse(argc, argv, "larson-style server: threads replace random slots of a shared array",
		 o, 5);
	if (threads < 1 || slots < 1 || hi < lo || lo < 1)
		return fprintf(stderr, "bad options\n"), 2;
	slot = calloc(slots, sizeof *slot);
	uint64_t s = wl_seed(7);
	for (long k = 0; k < slots; k++) /* the initial population, from the main thread */
		slot[k] = wl_xmalloc(wl_size(&s, lo, hi));
	struct arg a[threads];
	double dt = wl_run_threads(threads, worker, a, sizeof a[0]);
	for (long k = 0; k < slots; k++)
		free(slot[k]);
	free(slot);
	unsigned long long check = wl_checksum(a, threads, sizeof a[0], offsetof(struct arg, check));
	wl_report("larson", (unsigned long long)threads * ops, check, dt);
	return 0;
}
