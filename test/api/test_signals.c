/*
 * test_signals.c - malloc and free from signal handlers that interrupt the allocator
 * (kernel-pcp.md §12.2 "Re-entrancy").
 *
 * A worker thread allocates, fills, checks and frees blocks of every kind (thread-cache
 * sizes, page runs, huge mappings) in a tight loop, and calls malloc_trim now and then (which
 * holds every lock in turn), while a POSIX timer sends it a signal every 100 µs (and another every 330 µs).  The handler
 * (installed with sigaction, and a second one with signal()) allocates, fills and frees blocks
 * too, hands some to the worker to free and frees some the worker handed to it.  Each block
 * carries a pattern derived from its address and size, checked before it is freed: a block
 * handed out twice or memory corrupted by a half-done push/pop shows up as a wrong pattern.
 * A deadlock is caught by meson's timeout (and the test's own alarm).
 * The worker and the handlers also call the introspection API (pcpmalloc_stat,
 * pcpmalloc_stats_json, mallinfo2), which takes the thread registry's lock: a handler that
 * interrupted one of them must not wait for the lock it holds.
 *
 * Usage: test_signals [short|long]  (3 s / 60 s)
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>

#include "testutil.h"

static inline uint8_t pattern(const void *p, size_t n, size_t i)
{
	return (uint8_t)(((uintptr_t)p >> 4) ^ n ^ (i * 131));
}

/* Fills the first and last 64 bytes and every 4 KiB (cheap for big blocks, still detects
 * overlaps and corruption). */
static void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i += (i < 64 || i + 64 >= n) ? 1 : 4096)
		p[i] = pattern(p, n, i);
}

static void check(const uint8_t *p, size_t n, const char *who)
{
	for (size_t i = 0; i < n; i += (i < 64 || i + 64 >= n) ? 1 : 4096)
		if (p[i] != pattern(p, n, i)) {
			char msg[160];
			int l = snprintf(msg, sizeof(msg), "test_signals: %s: block %p (%zu bytes) corrupt at %zu\n",
					 who, (const void *)p, n, i);
			ssize_t w = write(2, msg, (size_t)l);
			(void)w;
			_exit(1);
		}
}

static size_t pick_size(uint64_t *rng)
{
	*rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
	unsigned r = (unsigned)(*rng >> 33);
	switch (r % 16) {
	case 0:
		return 20000 + r % 200000; /* page runs */
	case 1:
		return (r % 64 == 0) ? 5 * TU_MIB + r % 4096 : 4096 + r % 12000;
	default:
		return 1 + r % 1024; /* thread-cache sizes */
	}
}

/* Hand-off slots: blocks allocated on one side and freed on the other. */
#define SLOTS 64
struct slot {
	_Atomic(uint8_t *) p;
	_Atomic size_t n;
};
static struct slot to_worker[SLOTS], to_handler[SLOTS];

/* Takes the block a handler left in to_worker[s], if any: checks its contents and frees it.
 * The length comes with the block (its first word): a handler may refill the slot's n between
 * our exchange and a load of it. */
static void take_from_handler(unsigned s, const char *who)
{
	uint8_t *p = atomic_exchange(&to_worker[s].p, NULL);
	if (p) {
		size_t n;
		memcpy(&n, p, sizeof(n));
		check(p + sizeof(n), n - sizeof(n), who);
		free(p);
	}
}

static _Atomic unsigned long handler_runs, handler_allocs, handler_null;
static _Atomic bool stop;

/* pcpmalloc's introspection calls (tu_require_pcpmalloc proved they exist) */
static long long (*stat_fn)(const char *);
static size_t (*stats_json_fn)(char *, size_t);

/* Reads the counters three ways; the calls count must be positive whenever it is read. */
static void introspect(const char *who)
{
	static _Thread_local char buf[16384];
	long long calls = stat_fn("malloc_calls");
	if (calls <= 0) {
		char msg[96];
		int l = snprintf(msg, sizeof(msg), "test_signals: %s: malloc_calls %lld\n", who, calls);
		ssize_t w = write(2, msg, (size_t)l);
		(void)w;
		_exit(1);
	}
	size_t n = stats_json_fn(buf, sizeof(buf));
	if (n == 0 || buf[0] != '{')
		_exit(3);
	struct mallinfo2 mi = mallinfo2();
	if (mi.arena == 0)
		_exit(4);
}

static void handler_work(void)
{
	static uint64_t rng = 12345; /* one handler at a time on the worker: no race */
	enum { K = 4 };
	uint8_t *mine[K];
	size_t len[K];
	for (int i = 0; i < K; i++) {
		len[i] = pick_size(&rng);
		mine[i] = malloc(len[i]);
		if (!mine[i]) { /* allowed: ENOMEM when no lock and no mapping could be had */
			handler_null++;
			continue;
		}
		handler_allocs++;
		fill(mine[i], len[i]);
	}
	/* a realloc and a calloc for good measure */
	uint8_t *c = calloc(1, 100);
	if (c) {
		for (int i = 0; i < 100; i++)
			if (c[i] != 0)
				_exit(2);
		uint8_t *r = realloc(c, 3000);
		free(r ? r : c);
	}
	if (rng % 4 == 0)
		introspect("handler");
	for (int i = 0; i < K; i++) {
		if (!mine[i])
			continue;
		check(mine[i], len[i], "handler");
		unsigned s = (unsigned)(rng >> 40) % SLOTS;
		uint8_t *expect = NULL;
		if (i == 0 && len[i] >= 32 &&
		    atomic_compare_exchange_strong(&to_worker[s].p, &expect, NULL)) {
			/* slot was empty: give this one to the worker, its length in front */
			size_t n = len[i];
			memcpy(mine[i], &n, sizeof(n));
			fill(mine[i] + sizeof(n), n - sizeof(n));
			atomic_store(&to_worker[s].p, mine[i]);
			continue;
		}
		free(mine[i]);
	}
	/* free a block the worker handed over */
	unsigned s = (unsigned)(rng >> 20) % SLOTS;
	uint8_t *p = atomic_exchange(&to_handler[s].p, NULL);
	if (p) {
		check(p, atomic_load(&to_handler[s].n), "handler (from worker)");
		free(p);
	}
	handler_runs++;
}

static void on_sigusr(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	int e = errno;
	handler_work();
	errno = e;
}

static void on_sigrt(int sig)
{
	(void)sig;
	int e = errno;
	handler_work();
	errno = e;
}

static pid_t worker_tid;
static _Atomic unsigned long worker_ops;

static void *worker(void *arg)
{
	(void)arg;
	worker_tid = (pid_t)syscall(SYS_gettid);
	uint64_t rng = 987654321;
	enum { LIVE = 64 };
	uint8_t *live[LIVE] = {0};
	size_t len[LIVE] = {0};
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned i = (unsigned)(rng >> 33) % LIVE;
		if (live[i]) {
			check(live[i], len[i], "worker");
			unsigned s = (unsigned)(rng >> 45) % SLOTS;
			uint8_t *expect = NULL;
			if ((rng >> 50) % 4 == 0 &&
			    atomic_compare_exchange_strong(&to_handler[s].p, &expect, NULL)) {
				atomic_store(&to_handler[s].n, len[i]);
				atomic_store(&to_handler[s].p, live[i]);
			} else {
				free(live[i]);
			}
		}
		len[i] = pick_size(&rng);
		live[i] = malloc(len[i]);
		CHECK(live[i] != NULL);
		fill(live[i], len[i]);
		/* blocks the handler gave us */
		unsigned s = (unsigned)(rng >> 25) % SLOTS;
		take_from_handler(s, "worker (from handler)");
		if (++worker_ops % 20000 == 0)
			malloc_trim(0);
		if (worker_ops % 8 == 0)
			introspect("worker");
	}
	for (unsigned i = 0; i < LIVE; i++)
		if (live[i]) {
			check(live[i], len[i], "worker");
			free(live[i]);
		}
	return NULL;
}

static timer_t make_timer(int sig, long ns)
{
	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = sig;
	sev._sigev_un._tid = worker_tid;
	timer_t t;
	CHECK(timer_create(CLOCK_MONOTONIC, &sev, &t) == 0);
	struct itimerspec its = {{0, ns}, {0, ns}};
	CHECK(timer_settime(t, 0, &its, NULL) == 0);
	return t;
}

int main(int argc, char **argv)
{
	tu_require_pcpmalloc("test_signals");
	bool is_long = argc > 1 && strcmp(argv[1], "long") == 0;
	int seconds = is_long ? 60 : 3;
	alarm((unsigned)seconds + 60); /* a deadlock ends the test (SIGALRM) */
	stat_fn = (long long (*)(const char *))dlsym(RTLD_DEFAULT, "pcpmalloc_stat");
	stats_json_fn = (size_t (*)(char *, size_t))dlsym(RTLD_DEFAULT, "pcpmalloc_stats_json");
	CHECK(stat_fn && stats_json_fn);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigusr;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	CHECK(signal(SIGRTMIN, on_sigrt) != SIG_ERR);
	/* sigaction reports the program's own handler back, not pcpmalloc's wrapper */
	struct sigaction old;
	CHECK(sigaction(SIGUSR1, NULL, &old) == 0);
	CHECK(old.sa_sigaction == on_sigusr && (old.sa_flags & SA_SIGINFO));
	CHECK(sigaction(SIGRTMIN, NULL, &old) == 0);
	CHECK(old.sa_handler == on_sigrt && !(old.sa_flags & SA_SIGINFO));

	pthread_t t;
	CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
	while (!worker_tid)
		usleep(1000);
	timer_t t1 = make_timer(SIGUSR1, 100000);
	timer_t t2 = make_timer(SIGRTMIN, 330000);
	sleep((unsigned)seconds);
	timer_delete(t1);
	timer_delete(t2);
	atomic_store(&stop, true);
	CHECK(pthread_join(t, NULL) == 0);
	for (int s = 0; s < SLOTS; s++) {
		take_from_handler(s, "main");
		uint8_t *p = atomic_exchange(&to_handler[s].p, NULL);
		if (p) {
			check(p, to_handler[s].n, "main");
			free(p);
		}
	}
	unsigned long runs = handler_runs, allocs = handler_allocs, nulls = handler_null;
	printf("test_signals: %lu worker operations, %lu handler runs, %lu handler allocations "
	       "(%lu NULL)\n",
	       (unsigned long)worker_ops, runs, allocs, nulls);
	CHECKF(runs >= 200, "only %lu handler runs", runs);
	CHECKF(nulls * 10 <= allocs, "%lu of %lu handler allocations failed", nulls, allocs);
	/* the process still allocates normally afterwards */
	void *p = malloc(100);
	CHECK(p != NULL);
	free(p);
	printf("ok\n");
	return 0;
}
