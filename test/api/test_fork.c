/*
 * test_fork.c - fork() in a threaded program.
 *
 * Four threads allocate and free all the time (small, slab and large sizes, cross-thread frees
 * between them) while the main thread forks 1000 times (5000 in the long mode) and another
 * thread forks a fifth as often at the same time.  A fork can catch any of them inside
 * the allocator, holding a tcache, slab, pcp or zone lock; the child must still be able to
 * allocate.  Each child (guarded by alarm(): a deadlock exits with a signal, not a hang)
 * checks a block inherited from the parent, allocates and frees small, 64 KiB and 8 MiB
 * blocks, reallocs, callocs, frees an inherited block and, every tenth child, starts a thread
 * that allocates too; then _exit(0).  The parent checks every exit status, and that the
 * background threads kept running.
 *
 * Then fork from a signal handler: the main thread signals the background threads in turn,
 * and the handler forks and waits for its child (which does the same work).  A handler that
 * interrupted malloc on its thread holds no lock but the interrupted code does: the fork
 * handlers must not wait for those (they hung here before pcpm_fork_prepare's nested case;
 * glibc's malloc hangs too), and the child must still allocate (pcpm_nolock_all).
 *
 * Usage: test_fork [short|long]
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "testutil.h"

#define BG_THREADS 4
#define BG_SLOTS 256
#define CHILD_ALARM_S 20

/* Child exit codes, one per failure, so the parent can say what went wrong. */
enum {
	CHILD_OK = 0,
	CHILD_INHERITED_BAD = 10,
	CHILD_MALLOC_NULL = 11,
	CHILD_CONTENT_BAD = 12,
	CHILD_CALLOC_NOT_ZERO = 13,
	CHILD_REALLOC_BAD = 14,
	CHILD_THREAD_FAILED = 15,
	CHILD_ALIGN_BAD = 16,
};

static const char *child_error(int code)
{
	switch (code) {
	case CHILD_INHERITED_BAD:
		return "block inherited from the parent has wrong contents";
	case CHILD_MALLOC_NULL:
		return "malloc returned NULL in the child";
	case CHILD_CONTENT_BAD:
		return "block contents wrong in the child";
	case CHILD_CALLOC_NOT_ZERO:
		return "calloc returned nonzero memory in the child";
	case CHILD_REALLOC_BAD:
		return "realloc lost contents in the child";
	case CHILD_THREAD_FAILED:
		return "a thread started in the child failed";
	case CHILD_ALIGN_BAD:
		return "misaligned block in the child";
	default:
		return "unknown";
	}
}

struct bg {
	pthread_t thread;
	int id;
	uint64_t rng;
	atomic_ullong ops;
};

static struct bg bgs[BG_THREADS];
static atomic_bool stop;

/* One shared exchange slot per thread: a block put there is freed by the next thread. */
static pthread_mutex_t xchg_lock = PTHREAD_MUTEX_INITIALIZER;
static void *xchg[BG_THREADS];

/* Set while the handlers fork: page runs mostly, so that a signal often lands while its
 * thread holds a pcp or zone lock. */
static atomic_bool runs_phase;

static size_t bg_size(uint64_t *rng)
{
	if (atomic_load_explicit(&runs_phase, memory_order_relaxed) && tu_rand(rng) % 4)
		return tu_rand_range(rng, 16 * TU_KIB, 256 * TU_KIB);
	uint64_t r = tu_rand(rng) % 1000;
	if (r < 700)
		return tu_rand_range(rng, 1, 512);
	if (r < 970)
		return tu_rand_range(rng, 513, 32 * TU_KIB);
	if (r < 998)
		return tu_rand_range(rng, 32 * TU_KIB, 512 * TU_KIB);
	/* Rare, and not bigger: every fork copies the page tables of all live memory. */
	return tu_rand_range(rng, 512 * TU_KIB, 4 * TU_MIB);
}

static void *bg_main(void *arg)
{
	struct bg *b = arg;
	void *slot[BG_SLOTS] = {0};
	size_t size[BG_SLOTS] = {0};
	unsigned burst = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		/* Bursts with short pauses: busy enough that forks catch threads inside the
		 * allocator, idle enough that the children get CPU on a 2-core machine. */
		if (++burst % 128 == 0)
			usleep(200);
		int i = (int)(tu_rand(&b->rng) % BG_SLOTS);
		if (slot[i]) {
			unsigned char *p = slot[i];
			CHECKF(p[0] == (unsigned char)i && p[size[i] - 1] == (unsigned char)i,
			       "background thread %d: block %p changed", b->id, (void *)p);
			if (tu_rand(&b->rng) % 4 == 0) {
				/* Pass it on; free whatever the previous thread left. */
				pthread_mutex_lock(&xchg_lock);
				void *old = xchg[b->id];
				xchg[b->id] = p;
				pthread_mutex_unlock(&xchg_lock);
				free(old);
			} else if (tu_rand(&b->rng) % 3 == 0) {
				size_t n = bg_size(&b->rng);
				p = realloc(p, n);
				CHECK(p != NULL);
				p[0] = p[n - 1] = (unsigned char)i;
				slot[i] = p;
				size[i] = n;
				atomic_fetch_add_explicit(&b->ops, 1, memory_order_relaxed);
				continue;
			} else {
				free(p);
			}
			slot[i] = NULL;
		} else {
			size_t n = bg_size(&b->rng);
			unsigned char *p;
			if (tu_rand(&b->rng) % 8 == 0) {
				p = aligned_alloc(256, n);
			} else if (tu_rand(&b->rng) % 8 == 0) {
				p = calloc(1, n);
			} else {
				p = malloc(n);
			}
			CHECK(p != NULL);
			p[0] = p[n - 1] = (unsigned char)i;
			slot[i] = p;
			size[i] = n;
		}
		/* Take over a block another thread left in the exchange. */
		int from = (b->id + 1) % BG_THREADS;
		pthread_mutex_lock(&xchg_lock);
		void *q = xchg[from];
		xchg[from] = NULL;
		pthread_mutex_unlock(&xchg_lock);
		free(q);
		atomic_fetch_add_explicit(&b->ops, 1, memory_order_relaxed);
	}
	for (int i = 0; i < BG_SLOTS; i++)
		free(slot[i]);
	return NULL;
}

/* --- The child's work --------------------------------------------------------------------- */

static unsigned char *inherited;
static size_t inherited_size;
static uint64_t inherited_seed;

static void *child_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 200; i++) {
		size_t n = 16 + (size_t)i * 97;
		unsigned char *p = malloc(n);
		if (!p)
			return (void *)1;
		memset(p, 0x3d, n);
		if (p[n - 1] != 0x3d)
			return (void *)1;
		free(p);
	}
	void *big = malloc(2 * TU_MIB);
	if (!big)
		return (void *)1;
	memset(big, 1, 2 * TU_MIB);
	free(big);
	return NULL;
}

static int child_block(size_t n, uint64_t serial)
{
	unsigned char *p = malloc(n);
	if (!p)
		return CHILD_MALLOC_NULL;
	if ((uintptr_t)p & 15)
		return CHILD_ALIGN_BAD;
	uint64_t seed = tu_seed(p, serial);
	tu_fill(p, n, seed);
	if (tu_verify(p, n, seed) != SIZE_MAX)
		return CHILD_CONTENT_BAD;
	unsigned char *q = realloc(p, n + n / 2 + 1);
	if (!q)
		return CHILD_MALLOC_NULL;
	if (tu_verify(q, n, seed) != SIZE_MAX)
		return CHILD_REALLOC_BAD;
	free(q);
	unsigned char *c = calloc(1, n);
	if (!c)
		return CHILD_MALLOC_NULL;
	if (tu_first_nonzero(c, n) != SIZE_MAX)
		return CHILD_CALLOC_NOT_ZERO;
	free(c);
	return CHILD_OK;
}

static int child_main(int iteration)
{
	/* The parent's watchdog handler is inherited: a hung child must die by SIGALRM. */
	signal(SIGALRM, SIG_DFL);
	alarm(CHILD_ALARM_S);
	if (tu_verify(inherited, inherited_size, inherited_seed) != SIZE_MAX)
		return CHILD_INHERITED_BAD;
	const size_t sizes[] = {1, 24, 100, 1000, 4000, 64 * TU_KIB, 300 * TU_KIB};
	int rc;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if ((rc = child_block(sizes[i], (uint64_t)iteration * 100 + i)) != CHILD_OK)
			return rc;
	/* One 8 MiB block.  Page faults dominate a child's time (about 5 us each here), so
	 * most children fill and check its first and last 256 KiB and one 64-byte stamp in
	 * every 64 KiB between; every tenth child fills all of it. */
	const size_t hsize = 8 * TU_MIB, edge = 256 * TU_KIB, stride = 64 * TU_KIB;
	unsigned char *huge = malloc(hsize);
	if (!huge)
		return CHILD_MALLOC_NULL;
	uint64_t hseed = tu_seed(huge, (uint64_t)iteration);
	if (iteration % 10 == 0) {
		tu_fill(huge, hsize, hseed);
		if (tu_verify(huge, hsize, hseed) != SIZE_MAX)
			return CHILD_CONTENT_BAD;
	} else {
		tu_fill(huge, edge, hseed);
		tu_fill(huge + hsize - edge, edge, hseed + 1);
		for (size_t off = edge; off < hsize - edge; off += stride)
			tu_fill(huge + off, 64, hseed + off);
		if (tu_verify(huge, edge, hseed) != SIZE_MAX ||
		    tu_verify(huge + hsize - edge, edge, hseed + 1) != SIZE_MAX)
			return CHILD_CONTENT_BAD;
		for (size_t off = edge; off < hsize - edge; off += stride)
			if (tu_verify(huge + off, 64, hseed + off) != SIZE_MAX)
				return CHILD_CONTENT_BAD;
	}
	free(huge);
	/* Many small ones at once: past the thread cache into the slab layer. */
	void *many[300];
	for (int i = 0; i < 300; i++) {
		many[i] = malloc(48);
		if (!many[i])
			return CHILD_MALLOC_NULL;
		memset(many[i], i, 48);
	}
	for (int i = 0; i < 300; i++) {
		if (((unsigned char *)many[i])[47] != (unsigned char)i)
			return CHILD_CONTENT_BAD;
		free(many[i]);
	}
	void *al = NULL;
	if (posix_memalign(&al, 4096, 10000) != 0 || ((uintptr_t)al & 4095))
		return CHILD_ALIGN_BAD;
	free(al);
	if (iteration % 10 == 0) {
		pthread_t t;
		void *ret = (void *)1;
		if (pthread_create(&t, NULL, child_thread, NULL) != 0 ||
		    pthread_join(t, &ret) != 0 || ret != NULL)
			return CHILD_THREAD_FAILED;
	}
	/* Free the parent's block in the child (the parent still owns its own copy). */
	free(inherited);
	return CHILD_OK;
}

/* --- fork from a signal handler ------------------------------------------------------------ */

static atomic_int sig_forks, sig_forks_done, sig_fork_status;

static void on_fork_signal(int sig)
{
	(void)sig;
	int e = errno;
	int it = atomic_fetch_add(&sig_forks, 1);
	pid_t pid = fork();
	if (pid == 0)
		_exit(child_main(1000000 + it));
	int status = 0;
	pid_t w = -1;
	if (pid > 0) {
		do
			w = waitpid(pid, &status, 0);
		while (w < 0 && errno == EINTR);
	}
	if (pid < 0 || w != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		atomic_store(&sig_fork_status, pid < 0 ? -1 : status ? status : -2);
	atomic_fetch_add(&sig_forks_done, 1);
	errno = e;
}

/* Signals the background threads n times in turn; each handler forks once. */
/* Forks stop early once the phase's time is spent and its minimum is done: fork copies the
 * page tables, 28 ms per fork of a 100 MB process on a VM (glibc too), 100-300 ms with the
 * background threads running, and 1,500 forks outlasted the watchdog there.  A hang still
 * runs into the watchdog. */
static double phase_end;
#define MIN_FORKS 30

/* Returns how many forks were made (n, or fewer once phase_end passed). */
static int fork_from_handlers(int n)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fork_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);
	atomic_store(&runs_phase, true);
	usleep(20 * 1000);
	int i;
	for (i = 0; i < n && (i < MIN_FORKS || tu_now() < phase_end); i++) {
		CHECK(pthread_kill(bgs[i % BG_THREADS].thread, SIGUSR2) == 0);
		while (atomic_load(&sig_forks_done) <= i)
			usleep(100); /* the watchdog ends a hang */
		int st = atomic_load(&sig_fork_status);
		CHECKF(st == 0, "fork #%d from a signal handler: child status %#x%s", i, st,
		       WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? " (deadlocked)"
		       : WIFEXITED(st) ? child_error(WEXITSTATUS(st)) : "");
	}
	atomic_store(&runs_phase, false);
	return i;
}

struct fork_loop {
	const char *who;
	int first, count, done;
	double slowest;
};

/* Forks count children one after the other, each running child_main; checks each status. */
static void fork_loop(struct fork_loop *l)
{
	for (int it = l->first; it < l->first + l->count; it++, l->done++) {
		if (l->done >= MIN_FORKS && tu_now() > phase_end)
			break;
		double f0 = tu_now();
		pid_t pid = fork();
		CHECKF(pid >= 0, "fork #%d: %s", it, strerror(errno));
		if (pid == 0)
			_exit(child_main(it));
		/* The parent allocates while the child runs. */
		void *p = malloc(1000 + (size_t)it);
		CHECK(p != NULL);
		memset(p, 2, 1000 + (size_t)it);
		int status = 0;
		pid_t w;
		do
			w = waitpid(pid, &status, 0);
		while (w < 0 && errno == EINTR);
		CHECKF(w == pid, "waitpid: %s", strerror(errno));
		CHECKF(!WIFSIGNALED(status), "child #%d (forked by the %s thread) killed by signal "
					     "%d (%s)%s",
		       it, l->who, WTERMSIG(status), strsignal(WTERMSIG(status)),
		       WTERMSIG(status) == SIGALRM ? ": deadlocked in the allocator after fork" : "");
		CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		       "child #%d (forked by the %s thread) exited %d: %s", it, l->who,
		       WEXITSTATUS(status), child_error(WEXITSTATUS(status)));
		free(p);
		double dt = tu_now() - f0;
		if (dt > l->slowest)
			l->slowest = dt;
	}
}

static void *fork_loop_thread(void *arg)
{
	fork_loop(arg);
	return NULL;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_require_pcpmalloc("test_fork");
	bool long_mode = tu_long_mode(argc, argv);
	int forks = long_mode ? 5000 : 1000;
	const char *e = getenv("PCPMALLOC_TEST_FORKS");
	if (e && atoi(e) > 0)
		forks = atoi(e);
	tu_watchdog(long_mode ? 1800 : 240);

	inherited_size = 100000;
	inherited = malloc(inherited_size);
	CHECK(inherited != NULL);
	inherited_seed = tu_seed(inherited, 1);
	tu_fill(inherited, inherited_size, inherited_seed);

	uint64_t seed = tu_seed_from_env();
	for (int i = 0; i < BG_THREADS; i++) {
		bgs[i].id = i;
		bgs[i].rng = tu_mix64(seed + (uint64_t)i) | 1;
		CHECK(pthread_create(&bgs[i].thread, NULL, bg_main, &bgs[i]) == 0);
	}
	/* Let the threads fill their caches before the first fork. */
	usleep(50 * 1000);

	double t0 = tu_now();
	unsigned long long ops_before[BG_THREADS];
	for (int i = 0; i < BG_THREADS; i++)
		ops_before[i] = atomic_load(&bgs[i].ops);
	/* A second thread forks at the same time as the main thread: two forks in flight,
	 * and children of a process whose forking thread is not the main one. */
	phase_end = t0 + (long_mode ? 900 : 90);
	struct fork_loop side = {.who = "thread", .first = forks, .count = forks / 5};
	pthread_t side_thread;
	CHECK(pthread_create(&side_thread, NULL, fork_loop_thread, &side) == 0);
	struct fork_loop mainloop = {.who = "main", .first = 0, .count = forks};
	fork_loop(&mainloop);
	CHECK(pthread_join(side_thread, NULL) == 0);
	double elapsed = tu_now() - t0;
	double h0 = tu_now();
	int hforks = long_mode ? 2000 : 300;
	phase_end = h0 + (long_mode ? 600 : 60);
	hforks = fork_from_handlers(hforks);
	double helapsed = tu_now() - h0;
	/* The parent's threads kept going through the forks, and still go after them (no lock
	 * left taken by the fork handlers). */
	unsigned long long ops_after[BG_THREADS];
	for (int i = 0; i < BG_THREADS; i++) {
		ops_after[i] = atomic_load(&bgs[i].ops);
		CHECKF(ops_after[i] > ops_before[i] + 100,
		       "background thread %d stalled: %llu ops during the forks", i,
		       ops_after[i] - ops_before[i]);
	}
	for (int wait = 0; wait < 100; wait++) {
		usleep(20 * 1000);
		int moving = 0;
		for (int i = 0; i < BG_THREADS; i++)
			moving += atomic_load(&bgs[i].ops) > ops_after[i];
		if (moving == BG_THREADS)
			break;
		CHECKF(wait < 99, "%d background thread(s) stuck for 2 s after the forks",
		       BG_THREADS - moving);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < BG_THREADS; i++)
		CHECK(pthread_join(bgs[i].thread, NULL) == 0);
	for (int i = 0; i < BG_THREADS; i++)
		free(xchg[i]);
	size_t bad = tu_verify(inherited, inherited_size, inherited_seed);
	CHECKF(bad == SIZE_MAX, "the parent's block changed at byte %zu", bad);
	free(inherited);
	printf("test_fork: %d forks from the main thread and %d from another in %.1f s "
	       "(%.1f ms each, slowest %.1f ms)\n",
	       mainloop.done, side.done, elapsed, elapsed * 1000 / (mainloop.done + side.done),
	       (mainloop.slowest > side.slowest ? mainloop.slowest : side.slowest) * 1000);
	printf("test_fork: %d forks from signal handlers in %.1f s\n", hforks, helapsed);
	return 0;
}
