/* wl-rpmalloc - the pattern of rpmalloc's benchmark: T threads each keep a working set of W
 * blocks of random size in [16, 8000] B (skewed towards small sizes), replacing random ones;
 * one new block in C (the cross-thread rate) is not kept but sent, in batches of 64, to the
 * next thread, which frees the batches it received every 256 operations.  So most frees are
 * local and a steady share is remote, of every size class up to 8 KiB. */
#include "wl.h"

static long threads = 2, ops = 1500000, wset = 4096, lo = 16, hi = 8000, cross = 8;

#define XBATCH 64

struct xbatch {
	struct xbatch *next;
	int n;
	void *p[XBATCH];
};

struct arg {
	long id;
	unsigned long long check;
	struct xbatch *inbox; /* a lock-free stack of batches sent by the previous thread */
	char pad[64];
};

static struct arg *args;

static void drain(struct arg *a)
{
	struct xbatch *b = __atomic_exchange_n(&a->inbox, NULL, __ATOMIC_ACQUIRE);
	while (b) {
		struct xbatch *next = b->next;
		for (int i = 0; i < b->n; i++)
			free(b->p[i]);
		free(b);
		b = next;
	}
}

static void send(struct arg *to, struct xbatch *b)
{
	b->next = __atomic_load_n(&to->inbox, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&to->inbox, &b->next, b, 1, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
}

static void *worker(void *p)
{
	struct arg *a = p;
	struct arg *next = &args[(a->id + 1) % threads];
	uint64_t s = wl_seed(a->id + 500);
	unsigned long long check = 0;
	void **ws = calloc(wset, sizeof *ws);
	struct xbatch *out = wl_xmalloc(sizeof *out);
	out->n = 0;
	for (long i = 0; i < ops; i++) {
		long k = (long)(wl_rand(&s) % (uint64_t)wset);
		size_t n = wl_size(&s, lo, hi);
		unsigned char *b = wl_xmalloc(n);
		b[0] = (unsigned char)n;
		b[n - 1] = (unsigned char)k;
		check += n;
		if (cross && wl_rand(&s) % (uint64_t)cross == 0) {
			out->p[out->n++] = b;
			if (out->n == XBATCH) {
				send(next, out);
				out = wl_xmalloc(sizeof *out);
				out->n = 0;
			}
		} else {
			free(ws[k]);
			ws[k] = b;
		}
		if (i % 256 == 255)
			drain(a);
	}
	if (out->n)
		send(next, out);
	else
		free(out);
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
			     {'s', "smallest size (bytes)", &lo}, {'S', "largest size (bytes)", &hi},
			     {'c', "one block in C goes to the next thread (0: none)", &cross}};
	wl_parse(argc, argv, "rpmalloc benchmark pattern: random 16-8000 B working sets, a share "
		 "freed by the next thread", o, 6);
	if (threads < 1 || wset < 1 || hi < lo || lo < 1)
		return fprintf(stderr, "bad options\n"), 2;
	args = calloc(threads, sizeof *args);
	pthread_t t[threads];
	for (long i = 0; i < threads; i++)
		args[i].id = i;
	double t0 = wl_now();
	wl_start_threads(t, threads, worker, args, sizeof *args);
	wl_join_threads(t, threads);
	double dt = wl_now() - t0;
	for (long i = 0; i < threads; i++)
		drain(&args[i]);
	unsigned long long check = wl_checksum(args, threads, sizeof *args,
					       offsetof(struct arg, check));
	free(args);
	wl_report("rpmalloc", (unsigned long long)threads * ops, check, dt);
	return 0;
}
