/*
 * memcheck_target.c - the program test_memcheck.sh runs under valgrind's memcheck with
 * LD_PRELOAD=libpcpmalloc.so (and --soname-synonyms=somalloc=nouserintercepts, so that
 * pcpmalloc's own malloc runs).  One mode per run:
 *
 *   clean     threads handing blocks to each other, every size class, page runs and a huge
 *             mapping, realloc up and down, calloc, the aligned forms, malloc_usable_size,
 *             strdup/fopen (libc allocating), C11 free_sized: memcheck must report nothing
 *   leak      clean, after a 100-byte slab object, a 100,000-byte page run and a 10 MiB huge
 *             mapping whose pointers are dropped (plant_leak)
 *   uaf       clean, plus a read of a freed 64-byte block after 1000 more 64-byte
 *             allocations (plant_uaf: the quarantine keeps it from reuse)
 *   overflow  a write one byte past a 24-byte block (plant_overflow)
 *   dfree     the same block freed twice (plant_double_free): memcheck reports, pcpmalloc
 *             aborts with its one line
 *
 * It prints "pcpmalloc: yes" when pcpmalloc is the allocator and "usable: N" for a 5-byte
 * block: 5 in memcheck mode (the size asked for), 16 otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT 4
#define SLOTS 64

static void *volatile mailbox[NT][SLOTS]; /* thread t fills row t, thread t+1 frees it */
static pthread_barrier_t barrier;

static size_t size_of(unsigned i, unsigned r)
{
	static const size_t sizes[] = {1, 8, 16, 24, 100, 250, 1000, 3000, 9000, 16384, 20000, 70000};
	return sizes[(i * 7 + r) % (sizeof(sizes) / sizeof(sizes[0]))];
}

static void *worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	for (unsigned r = 0; r < 6; r++) {
		for (unsigned i = 0; i < SLOTS; i++) {
			size_t n = size_of(i, r);
			unsigned char *p = (i & 1) ? calloc(1, n) : malloc(n);
			if (!p)
				abort();
			if (i & 1) {
				for (size_t k = 0; k < n; k++)
					if (p[k])
						abort();
			}
			memset(p, (int)(i + t), n);
			if (i % 5 == 0) {
				p = realloc(p, n * 3 + 1);
				p[n * 3] = 1;
				p = realloc(p, n / 2 + 1);
			}
			mailbox[t][i] = p;
		}
		pthread_barrier_wait(&barrier);
		/* free what the previous thread allocated (remote frees) */
		unsigned from = (t + NT - 1) % NT;
		for (unsigned i = 0; i < SLOTS; i++) {
			unsigned char *p = mailbox[from][i];
			if (p[0] != (unsigned char)(i + from))
				abort();
			free(p);
		}
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

static void clean(void)
{
	pthread_t th[NT];
	pthread_barrier_init(&barrier, NULL, NT);
	for (unsigned t = 0; t < NT; t++)
		pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
	for (unsigned t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&barrier);

	void *a = NULL;
	if (posix_memalign(&a, 4096, 100))
		abort();
	memset(a, 1, 100);
	free(a);
	a = memalign(64, 5000);
	memset(a, 2, 5000);
	free(a);
	a = aligned_alloc(1 << 16, 1 << 16);
	memset(a, 3, 1 << 16);
	free(a);
	a = valloc(10);
	memset(a, 4, 10);
	free(a);
	char *big = malloc(10 << 20); /* a huge mapping, then moved by realloc */
	big[0] = 1;
	big = realloc(big, 20 << 20);
	big[(20 << 20) - 1] = 2;
	if (big[0] != 1)
		abort();
	free(big);
	char *s = strdup("pcpmalloc under memcheck");
	if (strlen(s) != 24)
		abort();
	free(s);
	FILE *f = fopen("/proc/self/stat", "r");
	if (f) {
		char line[256];
		if (!fgets(line, sizeof(line), f))
			abort();
		fclose(f);
	}
	void (*fsized)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
	if (fsized)
		fsized(malloc(40), 40);
	malloc_trim(0);
}

/* One allocation site per leak: memcheck merges leaks from the same stack. */
static __attribute__((noinline)) void drop(volatile char *p)
{
	p[0] = 7; /* the only pointer dies with this frame */
}

static __attribute__((noinline)) void plant_leak(void)
{
	drop(malloc(100));
	drop(malloc(100000));
	drop(malloc(10 << 20));
}

static __attribute__((noinline)) int plant_uaf(void)
{
	volatile char *p = malloc(64);
	p[3] = 9;
	free((void *)p);
	void *other[1000];
	for (int i = 0; i < 1000; i++)
		other[i] = malloc(64);
	int v = p[3]; /* use after free */
	for (int i = 0; i < 1000; i++)
		free(other[i]);
	return v;
}

static __attribute__((noinline)) void plant_overflow(void)
{
	volatile char *p = malloc(24);
	p[24] = 1;
	free((void *)p);
}

static __attribute__((noinline)) void plant_double_free(void)
{
	void *p = malloc(48);
	free(p);
	free(p);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "clean";
	printf("pcpmalloc: %s\n", dlsym(RTLD_DEFAULT, "pcpmalloc_version") ? "yes" : "no");
	char *five = malloc(5);
	printf("usable: %zu\n", malloc_usable_size(five));
	free(five);
	fflush(stdout);
	if (!strcmp(mode, "overflow")) {
		plant_overflow();
		return 0;
	}
	if (!strcmp(mode, "dfree")) {
		plant_double_free();
		return 0;
	}
	/* leaks first, in memory no earlier block used: a stale pointer left on a dead
	 * thread's stack into a reused address would make memcheck call a leak "possible" */
	if (!strcmp(mode, "leak"))
		plant_leak();
	clean();
	if (!strcmp(mode, "uaf"))
		printf("read %d\n", plant_uaf());
	return 0;
}
