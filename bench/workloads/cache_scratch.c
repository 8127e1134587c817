/* wl-cache-scratch - Hoard's cache-scratch test of passive false sharing: the main thread
 * allocates one small object per worker, one after another (so they share cache lines), and
 * hands them out; each worker frees its object first, then I times allocates an object of the
 * same size, writes every byte of it R times and frees it.  An allocator that gives the
 * freed neighbour back to the worker (a remote free reused by the freeing thread) makes the
 * workers write to one cache line: the run then takes many times longer. */
#include "wl.h"

static long threads = 2, iters = 1000, reps = 40000, objsize = 8;

struct arg {
	long id;
	unsigned long long check;
	unsigned char *first;
	char pad[64];
};

static void *worker(void *p)
{
	struct arg *a = p;
	unsigned long long check = 0;
	free(a->first);
	for (long i = 0; i < iters; i++) {
		volatile unsigned char *o = wl_xmalloc(objsize);
		for (long r = 0; r < reps; r++)
			for (long k = 0; k < objsize; k++)
				o[k] = (unsigned char)(o[k] + 1 + k);
		check += o[0];
		free((void *)o);
	}
	a->check = check;
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads", &threads}, {'i', "objects per thread", &iters},
			     {'r', "writes of each byte per object", &reps},
			     {'s', "object size (bytes)", &objsize}};
	wl_parse(argc, argv, "Hoard cache-scratch: passive false sharing through remote frees",
		 o, 4);
	if (threads < 1 || objsize < 1)
		return fprintf(stderr, "bad options\n"), 2;
	struct arg *a = calloc(threads, sizeof *a);
	pthread_t t[threads];
	for (long i = 0; i < threads; i++) {
		a[i].id = i;
		a[i].first = wl_xmalloc(objsize);
	}
	double t0 = wl_now();
	wl_start_threads(t, threads, worker, a, sizeof *a);
	wl_join_threads(t, threads);
	double dt = wl_now() - t0;
	/* the bytes written do not depend on the allocator unless an object was overwritten; a
	 * fresh object's first byte is not defined, so only the count of objects is checked */
	unsigned long long check = 0;
	for (long i = 0; i < threads; i++)
		check = check * 31 + (unsigned long long)iters;
	free(a);
	wl_report("cache-scratch", (unsigned long long)threads * iters * reps, check, dt);
	return 0;
}
