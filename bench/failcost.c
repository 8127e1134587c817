/*
 * failcost.c - what a request that cannot be served costs (issue 26 item 6): CALLS calls of
 * malloc(SIZE) for sizes from 2^47 up to PTRDIFF_MAX, each failing with NULL/ENOMEM, after a
 * warm-up that leaves every cache of the allocator holding something (small blocks of every
 * class freed by 4 threads, a freed 8 MiB block in the huge cache).  Prints the microseconds
 * per failed call per size, of the thread's CPU time and of wall time; run it with and without LD_PRELOAD to compare with glibc.
 * With "rlimit", the address space is first limited to 1 GiB (setrlimit RLIMIT_AS) and a
 * 2 GiB request is timed as well.
 *
 * Usage: failcost [CALLS] [rlimit]
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_us(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void *warm(void *arg)
{
	(void)arg;
	void *p[512];
	for (int r = 0; r < 4; r++) {
		for (int i = 0; i < 512; i++)
			p[i] = malloc(16 + (size_t)(i % 128) * 64);
		for (int i = 0; i < 512; i++)
			free(p[i]);
	}
	return NULL;
}

static void run(size_t size, long calls)
{
	double t0 = now_us(CLOCK_MONOTONIC), c0 = now_us(CLOCK_THREAD_CPUTIME_ID);
	long wrong = 0;
	for (long i = 0; i < calls; i++) {
		errno = 0;
		void *volatile p = malloc(size);
		if (p || errno != ENOMEM) {
			wrong++;
			free(p);
		}
	}
	double us = (now_us(CLOCK_MONOTONIC) - t0) / (double)calls;
	double cpu = (now_us(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)calls;
	printf("failcost: malloc(%#zx) x %ld: %.3f us CPU, %.3f us wall per failed call%s\n",
	       size, calls, cpu, us, wrong ? " (SOME SUCCEEDED OR LEFT ANOTHER ERRNO)" : "");
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 20000;
	bool limit = argc > 2 && strcmp(argv[2], "rlimit") == 0;
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, warm, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	warm(NULL);
	free(malloc(8 << 20));
	if (limit) {
		struct rlimit rl = { 1UL << 30, 1UL << 30 };
		if (setrlimit(RLIMIT_AS, &rl) != 0) {
			perror("setrlimit");
			return 1;
		}
		run((size_t)2 << 30, calls);
	}
	run((size_t)1 << 47, calls);
	run((size_t)1 << 50, calls);
	run((size_t)PTRDIFF_MAX, calls);
	return 0;
}
