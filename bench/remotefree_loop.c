/*
 * remotefree_loop.c - what a remote free costs: thread A allocates N objects of SIZE bytes,
 * then thread B frees them all (remote frees), R rounds; with -l, A frees them itself
 * (local frees) for reference.  The three loops are functions of their own (alloc_loop,
 * free_loop_remote, free_loop_local) so that callgrind's --toggle-collect counts each one,
 * callees included (bench/remotefree runs it; noipa: the two identical free loops must not
 * be folded into one).  In the remote mode A's allocations of
 * rounds 2..R reuse what B freed, so alloc_loop also carries whatever the allocator defers
 * to the owner (mimalloc collects its page's thread-free list there).
 * Usage: remotefree_loop [-l] SIZE N R
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t size;
static long n, rounds;
static int local;
static void **obj;
static pthread_barrier_t bar;

static __attribute__((noinline, noipa)) void alloc_loop(void)
{
	for (long i = 0; i < n; i++) {
		obj[i] = malloc(size);
		*(volatile char *)obj[i] = 1;
	}
}

static __attribute__((noinline, noipa)) void free_loop_remote(void)
{
	for (long i = 0; i < n; i++)
		free(obj[i]);
}

static __attribute__((noinline, noipa)) void free_loop_local(void)
{
	for (long i = 0; i < n; i++)
		free(obj[i]);
}

static void *thread_b(void *arg)
{
	(void)arg;
	for (long r = 0; r < rounds; r++) {
		pthread_barrier_wait(&bar); /* A allocated */
		if (!local)
			free_loop_remote();
		pthread_barrier_wait(&bar); /* freed */
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int a = 1;

	if (argc > 1 && !strcmp(argv[1], "-l")) {
		local = 1;
		a++;
	}
	if (argc - a != 3) {
		fprintf(stderr, "usage: %s [-l] SIZE N R\n", argv[0]);
		return 2;
	}
	size = strtoul(argv[a], NULL, 0);
	n = strtol(argv[a + 1], NULL, 0);
	rounds = strtol(argv[a + 2], NULL, 0);
	obj = calloc(n, sizeof(*obj));
	pthread_t t;

	pthread_barrier_init(&bar, NULL, 2);
	if (!obj || pthread_create(&t, NULL, thread_b, NULL))
		return 1;
	for (long r = 0; r < rounds; r++) {
		alloc_loop();
		pthread_barrier_wait(&bar);
		if (local)
			free_loop_local();
		pthread_barrier_wait(&bar);
	}
	pthread_join(t, NULL);
	free(obj);
	return 0;
}
