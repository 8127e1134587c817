/* wl-frag - a fragmentation pattern: objects of 16 B - 4 KiB are allocated in a stream; one
 * in F lives long (it joins a pool of L long-lived objects, replacing the oldest), the others
 * die soon (a short FIFO).  Long-lived survivors pin the slabs and pages the short-lived
 * objects were cut from.  Reports live bytes and RSS at the end, after the short-lived ones
 * are freed: rss_kib / live_kib is the fragmentation overhead. */
#include "wl.h"

static long threads = 1, ops = 3000000, every = 16, longlived = 50000, shortlived = 4096,
	    lo = 16, hi = 4096;

struct arg {
	long id;
	unsigned long long check;
	size_t live;
	void **pool;
	size_t *plen;
};

static void *worker(void *p)
{
	struct arg *a = p;
	uint64_t s = wl_seed(a->id + 700);
	void **pool = calloc(longlived, sizeof *pool), **fifo = calloc(shortlived, sizeof *fifo);
	size_t *plen = calloc(longlived, sizeof *plen);
	long ph = 0, fh = 0;
	size_t live = 0;
	for (long i = 0; i < ops; i++) {
		size_t n = wl_size(&s, lo, hi);
		unsigned char *b = wl_xmalloc(n);
		memset(b, (int)i, n < 32 ? n : 32);
		a->check += n;
		if (i % every == 0) {
			long k = ph++ % longlived;
			if (pool[k]) {
				live -= plen[k];
				free(pool[k]);
			}
			pool[k] = b;
			plen[k] = n;
			live += n;
		} else {
			long k = fh++ % shortlived;
			free(fifo[k]);
			fifo[k] = b;
		}
	}
	for (long k = 0; k < shortlived; k++)
		free(fifo[k]);
	free(fifo);
	a->live = live;
	a->pool = pool;
	a->plen = plen;
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads", &threads}, {'n', "allocations per thread", &ops},
			     {'f', "one in F objects is long-lived", &every},
			     {'l', "long-lived objects kept per thread", &longlived},
			     {'q', "short-lived objects alive at once", &shortlived},
			     {'s', "smallest size (bytes)", &lo}, {'S', "largest size (bytes)", &hi}};
	wl_parse(argc, argv, "fragmentation: interleaved long- and short-lived objects", o, 7);
	if (threads < 1 || every < 1 || longlived < 1 || shortlived < 1 || hi < lo || lo < 1)
		return fprintf(stderr, "bad options\n"), 2;
	struct arg a[threads];
	double dt = wl_run_threads(threads, worker, a, sizeof a[0]);
	long rss = wl_rss_kib();
	unsigned long long check = 0;
	size_t live = 0;
	for (long i = 0; i < threads; i++) {
		check = check * 31 + a[i].check;
		live += a[i].live;
	}
	wl_report("frag", (unsigned long long)threads * ops, check, dt);
	printf("frag: live_kib=%zu\n", live / 1024);
	printf("# frag: rss_kib=%ld rss_over_live=%.3f\n", rss, live ? rss / (live / 1024.0) : 0.0);
	for (long i = 0; i < threads; i++) {
		for (long k = 0; k < longlived; k++)
			free(a[i].pool[k]);
		free(a[i].pool);
		free(a[i].plen);
	}
	return 0;
}
