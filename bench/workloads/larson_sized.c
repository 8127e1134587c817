/* wl-larson-sized - the larson server benchmark's pattern in a C++ program: T threads, each
 * owning an array of K blocks (8-1000 B, uniform), replace random blocks with `new` and the
 * sized `operator delete(void *, size_t)`; after R replacements each thread exits and a new
 * thread takes its array over (a server handing a connection's state to the next worker), so
 * the first frees of every generation are of blocks another thread allocated, and thread
 * exit (cache flushes) is on the path as in the original.  The initial blocks come from the
 * main thread.  Calls the C++ runtime's operators by their ABI names (`_Znwm`, `_ZdlPvm`), so
 * under glibc they are libstdc++'s (malloc/free) and under a preloaded allocator its own. */
#include "wl.h"

void *_Znwm(unsigned long size);		/* operator new(size_t) */
void _ZdlPvm(void *p, unsigned long size);	/* operator delete(void *, size_t) */

static long threads = 2, gens = 10, rounds = 500000, blocks = 5000, lo = 8, hi = 1000;

struct lineage {
	long id;
	unsigned long long check;
	uint64_t seed;
	unsigned char **blk;
	unsigned long *len;
};

static size_t pick(uint64_t *s)
{
	return (size_t)(lo + (long)(wl_rand(s) % (uint64_t)(hi - lo + 1)));
}

static void *worker(void *p)
{
	struct lineage *l = p;
	unsigned long long check = l->check;
	for (long i = 0; i < rounds; i++) {
		long k = (long)(wl_rand(&l->seed) % (uint64_t)blocks);
		size_t n = pick(&l->seed);
		if (l->blk[k][0] != (unsigned char)l->len[k]) {
			fprintf(stderr, "larson-sized: block %ld overwritten\n", k);
			exit(1);
		}
		_ZdlPvm(l->blk[k], l->len[k]);
		unsigned char *b = _Znwm(n);
		b[0] = (unsigned char)n;
		b[n - 1] = (unsigned char)k;
		l->blk[k] = b;
		l->len[k] = n;
		check += n;
	}
	l->check = check;
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads (lineages)", &threads},
			     {'g', "generations (threads started per lineage)", &gens},
			     {'n', "replacements per thread", &rounds},
			     {'k', "blocks per lineage", &blocks}, {'s', "smallest size (bytes)", &lo},
			     {'S', "largest size (bytes)", &hi}};
	wl_parse(argc, argv, "larson server with C++ sized delete: threads replace their blocks, "
		 "then hand them to a new thread", o, 6);
	if (threads < 1 || gens < 1 || blocks < 1 || hi < lo || lo < 1)
		return fprintf(stderr, "bad options\n"), 2;
	struct lineage *l = calloc(threads, sizeof *l);
	for (long t = 0; t < threads; t++) {
		l[t].id = t;
		l[t].seed = wl_seed(t + 300);
		l[t].blk = calloc(blocks, sizeof *l[t].blk);
		l[t].len = calloc(blocks, sizeof *l[t].len);
		for (long k = 0; k < blocks; k++) {
			l[t].len[k] = pick(&l[t].seed);
			l[t].blk[k] = _Znwm(l[t].len[k]);
			l[t].blk[k][0] = (unsigned char)l[t].len[k];
		}
	}
	pthread_t th[threads];
	double t0 = wl_now();
	for (long g = 0; g < gens; g++) {
		wl_start_threads(th, threads, worker, l, sizeof *l);
		wl_join_threads(th, threads);
	}
	double dt = wl_now() - t0;
	unsigned long long check = 0;
	for (long t = 0; t < threads; t++) {
		check = check * 31 + l[t].check;
		for (long k = 0; k < blocks; k++)
			_ZdlPvm(l[t].blk[k], l[t].len[k]);
		free(l[t].blk);
		free(l[t].len);
	}
	free(l);
	wl_report("larson-sized", (unsigned long long)threads * gens * rounds, check, dt);
	return 0;
}
