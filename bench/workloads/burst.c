/* wl-burst - allocation bursts then idle: each of T threads allocates M MiB in blocks of
 * 4-32 KiB (touching every page), frees them all, and the threads idle together; B bursts.
 * Reports the process RSS at the peak of the last burst and after the idle period that
 * follows it (how much memory the allocator gives back).  -P N runs N such processes at
 * once (forked before any allocation); each prints its own lines. */
#include "wl.h"
#include <sys/wait.h>

static long threads = 2, mib = 256, bursts = 4, lo = 4096, hi = 32768, idle_ms = 300, procs = 1;
static pthread_barrier_t bar;
static long rss_peak, rss_idle;

struct arg {
	long id;
	unsigned long long ops, check;
};

static void *worker(void *p)
{
	struct arg *a = p;
	uint64_t s = wl_seed(a->id + 300);
	size_t cap = 1024, n = 0;
	void **v = wl_xmalloc(cap * sizeof *v);
	for (long b = 0; b < bursts; b++) {
		size_t total = 0;
		n = 0;
		while (total < (size_t)mib << 20) {
			size_t sz = lo + (wl_rand(&s) % (hi - lo + 1));
			if (n == cap)
				v = realloc(v, (cap *= 2) * sizeof *v);
			v[n] = wl_xmalloc(sz);
			wl_touch(v[n++], sz, (unsigned char)b);
			total += sz;
			a->check += sz;
		}
		a->ops += n;
		pthread_barrier_wait(&bar);
		if (a->id == 0 && b == bursts - 1)
			rss_peak = wl_rss_kib();
		pthread_barrier_wait(&bar);
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		pthread_barrier_wait(&bar);
		struct timespec ts = {idle_ms / 1000, (idle_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
	free(v);
	return NULL;
}

static int run_one(void);

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads", &threads}, {'m', "MiB allocated per thread per burst", &mib},
			     {'b', "bursts", &bursts}, {'s', "smallest block (bytes)", &lo},
			     {'S', "largest block (bytes)", &hi}, {'i', "idle time after each burst (ms)", &idle_ms},
			     {'P', "processes running this at once", &procs}};
	wl_parse(argc, argv, "allocation bursts then idle: RSS after free", o, 7);
	if (threads < 1 || hi < lo || lo < 1 || bursts < 1 || procs < 1)
		return fprintf(stderr, "bad options\n"), 2;
	fflush(stdout);
	for (long p = 1; p < procs; p++) {
		pid_t pid = fork();
		if (pid < 0)
			return perror("fork"), 1;
		if (pid == 0) {
			procs = 1; /* a child runs one instance */
			break;
		}
	}
	if (procs > 1) { /* the parent runs one instance too, then waits for the others */
		int rc = run_one();
		fflush(stdout);
		for (long p = 1; p < procs; p++) {
			int st;
			if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
				rc = 1;
		}
		return rc;
	}
	return run_one();
}

static int run_one(void)
{
	pthread_barrier_init(&bar, NULL, threads);
	struct arg a[threads];
	double dt = wl_run_threads(threads, worker, a, sizeof a[0]) - bursts * idle_ms / 1000.0; /* throughput excludes the idling */
	rss_idle = wl_rss_kib();
	unsigned long long ops = 0, check = 0;
	for (long i = 0; i < threads; i++) {
		ops += a[i].ops;
		check = check * 31 + a[i].check;
	}
	wl_report("burst", ops, check, dt > 1e-6 ? dt : 1e-6);
	printf("# burst: rss_peak_kib=%ld rss_idle_kib=%ld\n", rss_peak, rss_idle);
	return 0;
}
