/*
 * test_fork_signal.c - fork() from a signal handler; the allocator starts no thread
 * (issue 15, class 3).
 *
 * A single-threaded program that allocates enough for the allocator to size itself for the
 * machine (64+ pcp refills, a 16 MiB heap, 50 ms: what started pcpmalloc's lazy topology
 * discovery) must stay single-threaded: /proc/self/task keeps one entry and glibc's
 * __libc_single_threaded stays true.  A thread the program did not ask for makes glibc treat
 * it as multi-threaded for good, and then a fork from a signal handler that interrupted a
 * fork (or malloc) hangs in glibc's own atfork lock.  The second part does exactly that: the
 * main thread forks and allocates in a loop while a 1 ms interval timer's handler forks too
 * (its child allocates and exits).
 *
 * Each part runs in a child under a 20 s deadline: a hang is a failure.
 *
 * Usage: test_fork_signal [short|long]
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <sys/single_threaded.h>
#include <sys/time.h>

#include "testutil.h"

static double run_s = 1.5;
static int max_tasks_seen;

static void sample_tasks(void)
{
	int n = tu_nr_tasks();
	CHECK(n >= 1);
	if (n > max_tasks_seen)
		max_tasks_seen = n;
}

/* Heap churn of 64 KiB .. 1 MiB blocks (page runs: pcp refills), 32 MiB live, for 300 ms. */
static void grow_heap(void)
{
	enum { SLOTS = 64 };
	static void *slot[SLOTS];
	uint64_t rng = 12345;
	double end = tu_now() + 0.3;
	int rounds = 0;
	while (tu_now() < end || rounds < 4) {
		for (int i = 0; i < SLOTS; i++) {
			free(slot[i]);
			size_t n = tu_rand_range(&rng, 64 << 10, 1 << 20);
			slot[i] = malloc(n);
			CHECK(slot[i] != NULL);
			memset(slot[i], i, 4096);
			sample_tasks();
		}
		for (int i = 0; i < 2000; i++) /* small classes too */
			free(malloc(16 + (size_t)(i % 512)));
		rounds++;
	}
	for (int i = 0; i < SLOTS; i++) {
		free(slot[i]);
		slot[i] = NULL;
	}
}

static void no_thread_case(void)
{
	CHECK(__libc_single_threaded);
	grow_heap();
	/* give a helper thread, if one was started, time to show */
	for (int i = 0; i < 20; i++) {
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
		sample_tasks();
		free(malloc(100000));
	}
	grow_heap();
	CHECKF(max_tasks_seen == 1, "the allocator started a thread: %d tasks seen",
	       max_tasks_seen);
	CHECKF(__libc_single_threaded, "glibc now treats the process as multi-threaded");
}

static volatile sig_atomic_t handler_forks;

static void on_timer(int sig)
{
	(void)sig;
	int e = errno;
	pid_t pid = fork();
	if (pid == 0) {
		void *p = malloc(200);
		_exit(p ? 0 : 1);
	}
	if (pid > 0) {
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			_exit(50);
		handler_forks++;
	}
	errno = e;
}

static void signal_fork_case(void)
{
	grow_heap(); /* everything the allocator does on its own is done by now */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_timer;
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGPROF, &sa, NULL) == 0);
	struct itimerval it = {{0, 1000}, {0, 1000}};
	CHECK(setitimer(ITIMER_PROF, &it, NULL) == 0);
	double end = tu_now() + run_s;
	int forks = 0;
	while (tu_now() < end) {
		void *p = malloc(64 << 10);
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(0);
		int st;
		while (waitpid(pid, &st, 0) < 0)
			CHECK(errno == EINTR);
		free(p);
		forks++;
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_PROF, &it, NULL);
	printf("test_fork_signal: %d forks, %d from the handler\n", forks, (int)handler_forks);
	CHECK(handler_forks > 0);
}

int main(int argc, char **argv)
{
	tu_require_pcpmalloc("test_fork_signal");
	if (tu_long_mode(argc, argv))
		run_s = 15;
	bool ok = tu_status_ok("a single-threaded program stays single-threaded",
			       tu_run_deadline(no_thread_case, 20));
	ok &= tu_status_ok("fork from a signal handler while the program forks and allocates",
			   tu_run_deadline(signal_fork_case, 20));
	CHECK(ok);
	printf("test_fork_signal: ok\n");
	return 0;
}
