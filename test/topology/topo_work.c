/* topo_work.c - allocator work for the topology tests: "small" does a few allocations
 * (a short-lived process), "busy" moves 32 MiB at a time through the pcps for 150 ms,
 * "numa" allocates page runs on CPU 0 and on CPU 1 (pinned threads) and has each CPU free
 * the other's, then trims: on a fake machine with CPU 0 on node 0 and CPU 1 on node 1 every
 * zone must get back all of its own pages.  Exit 77 when CPU 1 is not available.
 * "dlopen-lock LIB": the deadlock that lazy discovery must not cause (see dlopen_lock).
 * "busy-paged" does the same with 20 KiB blocks (a paged class: slabs from the zone).
 * "busy" then waits for the discovery to finish and exits 3 when libhwloc is still mapped
 * (the library is unloaded once the sizes are known).
 * "cancel": lazy discovery in a thread with a deferred cancellation pending (issue 26: it
 * must meet no cancellation point inside the allocator).  "stack": lazy discovery in a
 * PTHREAD_STACK_MIN thread; prints the bytes of its stack that were touched. */
#define _GNU_SOURCE
#include <dirent.h>
#include <limits.h>
#include <sys/mman.h>
#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NUMA_BLOCKS 256 /* 32 KiB runs (order 3): 8 MiB per CPU, several refills and drains */

struct numa_job {
	int cpu;
	int alloc; /* 1: fill blocks, 0: free them */
	void **blocks;
	int failed;
};

static void *numa_thread(void *arg)
{
	struct numa_job *j = arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(j->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		j->failed = 77;
		return NULL;
	}
	for (int i = 0; i < NUMA_BLOCKS; i++) {
		if (j->alloc) {
			j->blocks[i] = malloc(32768);
			if (!j->blocks[i]) {
				j->failed = 1;
				return NULL;
			}
			memset(j->blocks[i], j->cpu + 1, 32768);
		} else {
			if (((unsigned char *)j->blocks[i])[32767] != (unsigned char)(2 - j->cpu)) {
				fprintf(stderr, "topo_work: block %d of cpu %d corrupted\n", i, 1 - j->cpu);
				abort();
			}
			free(j->blocks[i]);
		}
	}
	return NULL;
}

static int numa_phase(int alloc, void **b0, void **b1)
{
	/* alloc: CPU n fills bn; free: CPU 0 frees b1 and CPU 1 frees b0 */
	struct numa_job j[2] = { { 0, alloc, alloc ? b0 : b1, 0 }, { 1, alloc, alloc ? b1 : b0, 0 } };
	pthread_t t[2];
	for (int i = 0; i < 2; i++) {
		/* one after the other: each thread's run of the pcp is its own */
		if (pthread_create(&t[i], NULL, numa_thread, &j[i]) != 0)
			return 1;
		pthread_join(t[i], NULL);
		if (j[i].failed)
			return j[i].failed;
	}
	return 0;
}

static int numa(void)
{
	static void *b0[NUMA_BLOCKS], *b1[NUMA_BLOCKS];
	free(malloc(100)); /* initialise; PCPMALLOC_TOPOLOGY=now discovers here */
	int r = numa_phase(1, b0, b1);
	if (!r)
		r = numa_phase(0, b0, b1);
	if (r == 77)
		fprintf(stderr, "topo_work: CPU 1 not available: skipped\n");
	malloc_trim(0);
	return r;
}

pthread_mutex_t topo_work_lock = PTHREAD_MUTEX_INITIALIZER;

static int nr_threads(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void *load_lib(void *lib)
{
	/* dlopen holds the loader's lock while ctor_lock's constructor waits for ours */
	return dlopen(lib, RTLD_NOW | RTLD_LOCAL);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/*
 * Thread B is inside dlopen (the loader's lock held), its library's constructor waiting for
 * topo_work_lock; this thread holds topo_work_lock and does allocator work until lazy
 * discovery is due and runs.  Had discovery called dlopen here, this thread would wait for
 * the loader's lock and B for topo_work_lock: a deadlock (the test would hang).  Discovery
 * reads sysfs with plain system calls instead, in this thread, and starts no thread: prints
 * the thread count seen while holding the lock (2: main and B).
 */
static int dlopen_lock(const char *lib)
{
	static void *big[1024];
	pthread_mutex_lock(&topo_work_lock);
	pthread_t b;
	if (pthread_create(&b, NULL, load_lib, (void *)lib) != 0)
		return 1;
	sleep_ms(100); /* B is in the constructor by now; the process is older than 50 ms */
	for (int round = 0; round < 16; round++) {
		for (int i = 0; i < 1024; i++)
			if (!(big[i] = malloc(32768)))
				return 1;
		for (int i = 0; i < 1024; i++)
			free(big[i]);
	}
	sleep_ms(50);
	printf("threads while holding the lock: %d\n", nr_threads());
	pthread_mutex_unlock(&topo_work_lock);
	void *h;
	pthread_join(b, &h);
	if (!h) {
		fprintf(stderr, "topo_work: dlopen %s: %s\n", lib, dlerror());
		return 1;
	}
	return 0;
}

/* Waits up to 2 s for pcpmalloc's discovery to end (its stats leave "provisional"), then
 * tells whether libhwloc is still in /proc/self/maps. */
static int hwloc_left_mapped(void)
{
	size_t (*stats)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "pcpmalloc_stats_json");
	static char buf[1 << 16];
	for (int i = 0; stats && i < 200; i++) {
		stats(buf, sizeof buf);
		if (!strstr(buf, "\"topology\": \"provisional\""))
			break;
		usleep(10000);
	}
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int found = 0;
	while (f && fgets(line, sizeof line, f))
		if (strstr(line, "libhwloc"))
			found = 1;
	if (f)
		fclose(f);
	if (found)
		fprintf(stderr, "topo_work: libhwloc still mapped after the discovery\n");
	return found;
}

/* The process's allocator topology source ("provisional" without pcpmalloc's stats). */
static const char *topology_source(void)
{
	size_t (*stats)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "pcpmalloc_stats_json");
	static char buf[1 << 16];
	if (!stats)
		return "none";
	stats(buf, sizeof buf);
	const char *t = strstr(buf, "\"topology\": \"");
	if (!t)
		return "?";
	static char src[32];
	t += strlen("\"topology\": \"");
	size_t n = strcspn(t, "\"");
	snprintf(src, sizeof src, "%.*s", (int)(n < 31 ? n : 31), t);
	return src;
}

/* Page runs through the pcps until discovery has run (refills): 16 rounds of 64 x 64 KiB,
 * each block grown from 16 bytes by realloc (the malloc slow path under realloc). */
static int page_runs(void)
{
	void *b[64];
	for (int round = 0; round < 16; round++) {
		for (int i = 0; i < 64; i++) {
			void *p = malloc(16);
			if (!p || !(b[i] = realloc(p, 65536)))
				return 1;
			((char *)b[i])[65535] = (char)i;
		}
		for (int i = 0; i < 64; i++)
			free(b[i]);
	}
	return 0;
}

static volatile int go;

/* In the thread under test: waits for main's go (no allocation, no cancellation point). */
static void wait_go(void)
{
	while (!go)
		sched_yield();
}

/*
 * Lazy discovery in the thread running fn.  Of the three conditions (64 pcp refills, a
 * 16 MiB heap, 50 ms of age) main meets two: it sleeps 60 ms first, then grows the heap to
 * 32 MiB with 16 blocks of 2 MiB (order 9: one refill each, as rmqueue's order > 3 path
 * counts them) and frees them; start-up did a few refills more.  The thread's page runs do
 * the rest of the 64 refills, and the one that meets the count makes discovery due in the
 * thread, whatever the load.  (The warm-up was 1024 x 32 KiB in main within the first
 * 50 ms: on a loaded 2-CPU VM start-up, libgcc_s's dlopen and that heap took 60-90 ms,
 * discovery ran in main and every retry failed.)  The heap grows in main, not in the
 * thread: the stack measured is the page runs' and the discovery's.  Exit 75 (the test runs
 * again) when discovery ran before the thread all the same.
 */
static int discovery_in_thread(void *(*fn)(void *), pthread_attr_t *attr, void **ret)
{
	static void *big[16];
	sleep_ms(60);
	for (int i = 0; i < 16; i++)
		if (!(big[i] = malloc((size_t)2 << 20)))
			return 1;
	for (int i = 0; i < 16; i++)
		free(big[i]);
	const char *src = topology_source();
	if (strcmp(src, "provisional") != 0 && strcmp(src, "none") != 0) {
		printf("discovery ran before the thread (topology %s)\n", src);
		exit(75);
	}
	pthread_t t;
	if (pthread_create(&t, attr, fn, NULL) != 0)
		return 1;
	src = topology_source();
	if (strcmp(src, "provisional") != 0 && strcmp(src, "none") != 0) {
		printf("discovery ran before the thread (topology %s)\n", src);
		exit(75);
	}
	go = 1;
	return pthread_join(t, ret);
}

static volatile int cancel_reached;

static void *cancel_thread(void *arg)
{
	(void)arg;
	int old;
	wait_go();
	pthread_cancel(pthread_self()); /* pending: acted on at the next cancellation point */
	if (page_runs() != 0)
		return (void *)1;
	cancel_reached = 1; /* no cancellation point was met inside the allocator */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	return NULL;
}

static void *idle_thread(void *arg)
{
	pause(); /* a cancellation point */
	return arg;
}

static int cancel_test(void)
{
	void *ret;
	/* glibc's first pthread_cancel dlopens libgcc_s (its unwinder), which allocates: done
	 * here, before the warm-up, it cannot run the discovery itself */
	pthread_t idle;
	if (pthread_create(&idle, NULL, idle_thread, NULL) != 0 || pthread_cancel(idle) != 0 ||
	    pthread_join(idle, &ret) != 0 || ret != PTHREAD_CANCELED)
		return 1;
	if (discovery_in_thread(cancel_thread, NULL, &ret) != 0)
		return 1;
	printf("cancel: thread %s the allocation loop (%s); topology %s\n",
	       cancel_reached ? "finished" : "died in", ret == PTHREAD_CANCELED ? "cancelled" : "returned",
	       topology_source());
	return cancel_reached && ret == NULL ? 0 : 1;
}

#define STACK_FILL 0xa5

static void *stack_thread(void *arg)
{
	(void)arg;
	wait_go();
	return (void *)(long)page_runs();
}

/* The thread runs on a PTHREAD_STACK_MIN stack of our own, filled with a pattern: the bytes
 * below its top that are no longer the pattern afterwards are what it used (glibc's thread
 * descriptor and TLS at the top included, the same with any allocator). */
static int stack_test(void)
{
	size_t len = PTHREAD_STACK_MIN;
	unsigned char *stack = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (stack == MAP_FAILED)
		return 1;
	memset(stack, STACK_FILL, len);
	pthread_attr_t attr;
	void *ret;
	pthread_attr_init(&attr);
	if (pthread_attr_setstack(&attr, stack, len) != 0 ||
	    discovery_in_thread(stack_thread, &attr, &ret) != 0 || ret != NULL)
		return 1;
	size_t low = 0;
	while (low < len && stack[low] == STACK_FILL)
		low++;
	printf("stack: %zu of %zu bytes used; topology %s\n", len - low, len, topology_source());
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "cancel") == 0)
		return cancel_test();
	if (argc > 1 && strcmp(argv[1], "stack") == 0)
		return stack_test();
	if (argc > 1 && strcmp(argv[1], "numa") == 0)
		return numa();
	if (argc > 2 && strcmp(argv[1], "dlopen-lock") == 0)
		return dlopen_lock(argv[2]);
	int busy = argc > 1 && strncmp(argv[1], "busy", 4) == 0;
	/* "busy-paged": 20 KiB blocks, a paged slab class whose order-5 slabs come from the
	 * zone, not through a pcp (20 MiB per round) */
	size_t block = argc > 1 && strcmp(argv[1], "busy-paged") == 0 ? 20480 : 32768;
	void *keep[64] = { 0 };
	if (!busy) {
		for (int i = 0; i < 64; i++)
			if (!(keep[i] = malloc(100 + i)))
				return 1;
		for (int i = 0; i < 64; i++)
			free(keep[i]);
		return 0;
	}
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	static void *big[1024];
	for (long round = 0;; round++) {
		/* 32 MiB in 32 KiB page runs (order 3: 7 blocks per refill), held, then freed */
		for (int i = 0; i < 1024; i++) {
			big[i] = malloc(block);
			if (!big[i])
				return 1;
			memset(big[i], (int)(round + i), 64);
		}
		/* every block still holds its own bytes: no two runs overlapped */
		for (int i = 0; i < 1024; i++) {
			if (((unsigned char *)big[i])[63] != (unsigned char)(round + i)) {
				fprintf(stderr, "topo_work: block %d corrupted\n", i);
				abort();
			}
			free(big[i]);
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > 150)
			break;
	}
	return hwloc_left_mapped() ? 3 : 0;
}
