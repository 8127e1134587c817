/* wl-threads - many live threads, each with a few objects of many size classes (a server's
 * thread pool, a parallel build's workers): the memory a thread cache costs per thread.
 * T threads start at once; each allocates K blocks of 16 + i*S bytes (i = 0..K-1), writes
 * them, waits until every thread has, then frees them and exits.  The main thread measures
 * the RSS while all of them hold their blocks, after they are joined, and after
 * malloc_trim(0).  Not in the pcpmalloc-ab suite (a memory figure, not a time).
 *
 * Prints the blocks allocated and their checksum, then '# rss_live_kib=... rss_joined_kib=...
 * rss_trim_kib=... live_bytes=...' (live_bytes: the bytes the threads asked for).
 */
#include "wl.h"
#include <malloc.h>

static long nthreads = 2000, per = 64, step = 40, stack_kib = 64;
static pthread_barrier_t all_allocated, measured;

struct targ {
	long id;
	unsigned long long check;
};

static void *worker(void *arg)
{
	struct targ *a = arg;
	void *p[per];
	for (long i = 0; i < per; i++) {
		size_t n = 16 + (size_t)(i * step);
		p[i] = wl_xmalloc(n);
		memset(p[i], (int)(a->id + i) & 0xff, n);
	}
	pthread_barrier_wait(&all_allocated);
	pthread_barrier_wait(&measured);
	for (long i = 0; i < per; i++) {
		a->check = a->check * 31 + ((unsigned char *)p[i])[16 + i * step - 1];
		free(p[i]);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt opts[] = {
		{ 't', "threads live at once", &nthreads },
		{ 'k', "blocks per thread", &per },
		{ 's', "size step between a thread's blocks (bytes; sizes 16, 16+s, ...)", &step },
		{ 'z', "thread stack size (KiB)", &stack_kib },
	};
	wl_parse(argc, argv, "many live threads with a few blocks of many sizes each: RSS", opts,
		 4);
	if (!nthreads || !per) {
		fprintf(stderr, "%s: -t and -k must be at least 1\n", argv[0]);
		return 2;
	}
	pthread_t *t = wl_xmalloc((size_t)nthreads * sizeof(*t));
	struct targ *args = calloc((size_t)nthreads, sizeof(*args));
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, (size_t)stack_kib << 10);
	pthread_barrier_init(&all_allocated, NULL, (unsigned)nthreads + 1);
	pthread_barrier_init(&measured, NULL, (unsigned)nthreads + 1);
	for (long i = 0; i < nthreads; i++) {
		args[i].id = i;
		if (pthread_create(&t[i], &attr, worker, &args[i])) {
			fprintf(stderr, "%s: pthread_create failed at thread %ld\n", argv[0], i);
			return 1;
		}
	}
	pthread_barrier_wait(&all_allocated);
	long live = wl_rss_kib();
	pthread_barrier_wait(&measured);
	wl_join_threads(t, nthreads);
	long joined = wl_rss_kib();
	malloc_trim(0);
	long trimmed = wl_rss_kib();
	unsigned long long check = wl_checksum(args, nthreads, sizeof(*args),
					       offsetof(struct targ, check));
	size_t bytes = (size_t)nthreads * (size_t)(16 * per + step * per * (per - 1) / 2);
	printf("threads: blocks=%ld checksum=%016llx\n", nthreads * per, check);
	printf("# threads: rss_live_kib=%ld rss_joined_kib=%ld rss_trim_kib=%ld live_bytes=%zu\n",
	       live, joined, trimmed, bytes);
	return 0;
}
