/*
 * test_fork_atfork.c - pthread_atfork handlers registered before pcpmalloc's allocate
 * (issue 15, class 2).
 *
 * A function in the program's .preinit_array runs before any library constructor, so the
 * handlers it registers come before pcpmalloc's (the way a library constructor of
 * OpenSSL/NSS style registers its own before the allocator's).  glibc runs prepare handlers
 * in the reverse order of registration and parent/child handlers in that order: this
 * program's prepare handler runs after pcpmalloc's, its parent and child handlers before
 * pcpmalloc's.  Each of them allocates (a small block, a 64 KiB page run, a 6 MiB mapping)
 * and frees: the allocator must serve the forking thread from the first prepare handler to
 * the last parent/child handler.  Another thread allocates all the time, so that fork must
 * really take the locks.
 *
 * The case runs in a child under a 20 s deadline, the test under a 60 s watchdog: a hang is
 * a failure.
 *
 * Usage: test_fork_atfork [short|long]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "testutil.h"

static atomic_int handler_calls[3];
static atomic_bool stop;
/* the handlers allocate only in the forking case (not in the fork that starts it) */
static atomic_bool armed;

static void churn(void)
{
	static const size_t sizes[] = {24, 3000, 64 << 10, 6 << 20};
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *p = malloc(sizes[i]);
		if (!p)
			_exit(40);
		memset(p, 0x5a, sizes[i] < 4096 ? sizes[i] : 4096);
		char *q = realloc(p, sizes[i] * 2);
		if (!q)
			_exit(41);
		free(q);
	}
}

static void prepare(void)
{
	if (!atomic_load(&armed))
		return;
	churn();
	atomic_fetch_add(&handler_calls[0], 1);
}

static void parent(void)
{
	if (!atomic_load(&armed))
		return;
	churn();
	atomic_fetch_add(&handler_calls[1], 1);
}

static void child(void)
{
	if (!atomic_load(&armed))
		return;
	churn();
	atomic_fetch_add(&handler_calls[2], 1);
}

/* Before any library constructor (pcpmalloc's registers its handlers). */
static void register_early(int argc, char **argv, char **envp)
{
	(void)argc;
	(void)argv;
	(void)envp;
	if (pthread_atfork(prepare, parent, child) != 0)
		_exit(42);
}
__attribute__((section(".preinit_array"), used)) static void (*const preinit_hook)(int, char **,
										     char **) =
	register_early;

static void *allocator_thread(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		void *p = malloc(64 << 10);
		void *q = malloc(40);
		free(p);
		free(q);
	}
	return NULL;
}

static int forks = 50;

/* Forks stop after 15 s once 10 are done: each runs the handlers' 6 -> 12 MiB reallocs into
 * fresh mappings three times, and on a VM where fork copies page tables slowly (28 ms for a
 * 100 MB process, glibc too) 50 forks outlasted the 20 s deadline under load.  A hang still
 * runs into the deadline. */
static void forking_case(void)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, allocator_thread, NULL) == 0);
	atomic_store(&armed, true);
	double end = tu_now() + 15;
	int done = 0;
	for (int i = 0; i < forks && (i < 10 || tu_now() < end); i++, done++) {
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			churn();
			_exit(atomic_load(&handler_calls[2]) == 1 ? 0 : 43);
		}
		int st;
		CHECK(waitpid(pid, &st, 0) == pid);
		CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	}
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	CHECK_EQ(atomic_load(&handler_calls[0]), done);
	CHECK_EQ(atomic_load(&handler_calls[1]), done);
}

int main(int argc, char **argv)
{
	tu_require_pcpmalloc("test_fork_atfork");
	tu_watchdog(150);
	if (tu_long_mode(argc, argv))
		forks = 2000;
	CHECK(tu_status_ok("fork with allocating atfork handlers registered first",
			   tu_run_deadline(forking_case, 120)));
	printf("test_fork_atfork: up to %d forks (at least 10, 15 s): ok\n", forks);
	return 0;
}
