/* wl-realloc - realloc growth: K buffers grow side by side (so that the block after each one
 * is usually taken) from 16 B to about M bytes in steps of 1/8 to 1/2 of their size, the way
 * string builders and vectors grow; each one is checked and restarted when it reaches M. */
#include "wl.h"

static long threads = 1, chains = 20000, live = 64, maxsz = 1 << 20;

struct arg {
	long id;
	unsigned long long ops, check;
};

static void *worker(void *p)
{
	struct arg *a = p;
	uint64_t s = wl_seed(a->id + 400);
	unsigned char **buf = calloc(live, sizeof *buf);
	size_t *len = calloc(live, sizeof *len);
	long started = 0, done = 0;
	while (done < chains) {
		long k = wl_rand(&s) % live;
		if (!buf[k]) {
			if (started == chains)
				continue;
			started++;
			len[k] = 16;
			buf[k] = wl_xmalloc(16);
			buf[k][0] = (unsigned char)k;
			continue;
		}
		size_t n = len[k] + 16 + len[k] / (2 + wl_rand(&s) % 7);
		unsigned char *q = realloc(buf[k], n);
		if (!q || q[0] != (unsigned char)k) {
			fprintf(stderr, "realloc: lost contents\n");
			exit(1);
		}
		q[n - 1] = (unsigned char)n;
		buf[k] = q;
		len[k] = n;
		a->ops++;
		if (n >= (size_t)maxsz) {
			a->check += n;
			free(buf[k]);
			buf[k] = NULL;
			done++;
		}
	}
	free(buf);
	free(len);
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads", &threads}, {'n', "buffers grown per thread", &chains},
			     {'k', "buffers growing side by side", &live},
			     {'m', "size a buffer grows to (bytes)", &maxsz}};
	wl_parse(argc, argv, "realloc growth", o, 4);
	if (threads < 1 || live < 1 || maxsz < 32)
		return fprintf(stderr, "bad options\n"), 2;
	struct arg a[threads];
	double dt = wl_run_threads(threads, worker, a, sizeof a[0]);
	unsigned long long ops = 0, check = 0;
	for (long i = 0; i < threads; i++) {
		ops += a[i].ops;
		check = check * 31 + a[i].check;
	}
	wl_report("realloc", ops, check, dt);
	return 0;
}
