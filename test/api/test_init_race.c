/*
 * test_init_race.c - threads that start the allocator while a preloaded interposer's
 * wrappers look their targets up with dlsym (issue 26 item 1: hung in 23 of 26 runs).
 *
 * init_shim.so, preloaded before libpcpmalloc.so, wraps libc functions a start-up may call
 * (sched_getaffinity, clock_gettime, sysconf, pthread_key_create); each wrapper mallocs and
 * calls dlsym, which takes the dynamic loader's lock.  In the child, four threads are
 * released together and each loops over a failing dlsym (the loader formats its error with
 * malloc while it holds its lock) and a kept malloc of 600-1000 bytes: the early area
 * (16 KiB) fills within a few rounds, so the thread whose request it cannot serve runs the
 * initialisation while every other request waits for it - some inside dlsym, holding the
 * loader's lock.  The initialisation
 * must call nothing that can wait for that lock (a wrapper's dlsym would: the two-lock
 * deadlock of the issue), and a lock wait must not either (the clock).
 *
 * The driver (run without LD_PRELOAD) runs the child RUNS times (500; 50 with "quick"),
 * each under alarm(10) kept across execve, and stops at the first hang or crash.
 *
 * Usage: test_init_race SHIM.so LIBPCPMALLOC.so [runs]      (driver)
 *        test_init_race --child                           (the program under the shim)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "testutil.h"

extern char **environ;

#define THREADS 4
#define ROUNDS 48

static atomic_int go, ready;

static void *worker(void *arg)
{
	long id = (long)(uintptr_t)arg;
	void *keep[ROUNDS];
	atomic_fetch_add(&ready, 1);
	while (!atomic_load_explicit(&go, memory_order_acquire))
		sched_yield();
	for (int i = 0; i < ROUNDS; i++) {
		char name[64];
		snprintf(name, sizeof(name), "test_init_race_missing_%ld_%d", id, i);
		CHECK(dlsym(RTLD_DEFAULT, name) == NULL); /* the loader's lock; malloc under it */
		keep[i] = malloc(600 + (size_t)i * 8);
		CHECK(keep[i] != NULL);
		memset(keep[i], (int)id, 200);
	}
	for (int i = 0; i < ROUNDS; i++) {
		CHECK(((unsigned char *)keep[i])[199] == (unsigned char)id);
		free(keep[i]);
	}
	return NULL;
}

static int child_main(void)
{
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0);
	while (atomic_load(&ready) < THREADS)
		sched_yield();
	atomic_store_explicit(&go, 1, memory_order_release);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	tu_require_pcpmalloc("test_init_race (child)");
	int *calls = (int *)dlsym(RTLD_DEFAULT, "init_shim_calls");
	CHECKF(calls != NULL, "init_shim.so is not loaded");
	int *failed = (int *)dlsym(RTLD_DEFAULT, "init_shim_failed");
	CHECKF(failed && *failed == 0, "%d of the wrappers' mallocs returned NULL", *failed);
	return 0;
}

/* One run of the child under the shim; false on a hang (SIGALRM) or any other failure. */
static bool run_once(const char *self, const char *shim, const char *lib)
{
	char preload[4096];
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s %s", shim, lib);
	char *env[64];
	int n = 0;
	env[n++] = preload;
	for (char **e = environ; *e && n < 62; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "PCPMALLOC_", 10))
			env[n++] = *e;
	env[n] = NULL;
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		alarm(10); /* survives execve: SIGALRM (default action) ends a hang */
		char *argv[] = {(char *)self, (char *)"--child", NULL};
		execve(self, argv, env);
		_exit(127);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	return tu_status_ok("threads starting the allocator under a dlsym interposer", st);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--child") == 0)
		return child_main();
	CHECKF(argc == 3 || argc == 4, "usage: %s SHIM.so LIBPCPMALLOC.so [runs]", argv[0]);
	int runs = argc == 4 ? atoi(argv[3]) : 500;
	CHECK(runs > 0);
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(n > 0);
	self[n] = '\0';
	double t0 = tu_now();
	for (int i = 0; i < runs; i++)
		CHECKF(run_once(self, argv[1], argv[2]), "run %d of %d failed", i + 1, runs);
	printf("test_init_race: %d of %d runs finished (%.1f s)\n", runs, runs, tu_now() - t0);
	printf("test_init_race: ok\n");
	return 0;
}
