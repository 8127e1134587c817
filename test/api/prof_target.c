/*
 * prof_target.c - a program whose heap profile is known, for test_prof.sh (run under
 * LD_PRELOAD=libpcpmalloc.so with PCPMALLOC_PROF=1 or PCPMALLOC_LEAKS=1).
 *
 *   prof_target ratio DUMP   three sites allocate 4 KiB blocks (the thread-cache path) in a
 *                            1 : 2 : 4 ratio of bytes: 512 MiB, 1 GiB, 2 GiB, in rounds of
 *                            1024 blocks allocated then freed (little memory), then
 *                            leak_site leaks 448 blocks of 1 MiB (448 MiB, never touched),
 *                            and pcpmalloc_prof_dump(DUMP) writes the profile.
 *   prof_target noleak       allocates and frees; nothing is left at exit.
 *   prof_target fork DIR     samples in the parent, forks; the child allocates at its own
 *                            site and dumps DIR/child.heap, the parent DIR/parent.heap.
 *   prof_target threads DUMP four threads allocate at thread_site; then a dump.
 *   prof_target signal       leak_site, then raise(12) (PCPMALLOC_PROF_SIGNAL=12 dumps).
 *   prof_target baddump PATH leak_site, then a dump to PATH that may fail; goes on.
 *   prof_target apis DUMP    one function per allocation call (api_malloc, api_calloc,
 *                            api_realloc, api_posix_memalign with 64 and 16, api_aligned_alloc,
 *                            api_memalign, api_valloc) allocates and frees 256 blocks; a dump.
 *                            Each must be its stack's innermost frame (PCPMALLOC_PROF_SAMPLE=1).
 *   prof_target reallocfail  realloc_fail_site allocates 16 blocks of 1 MiB and asks realloc
 *                            to grow each to 64 TiB, which fails (ENOMEM): the blocks stay
 *                            allocated (a leak the report must name), and say so.
 *   prof_target stress SECS DIR  four threads malloc, calloc, realloc, posix_memalign and
 *                            free blocks of 1 B - 2 MiB with a pattern checked at each free;
 *                            the main thread signals one of them each round of 50 us or more
 *                            (the handler allocates, reallocs, frees), raises signal 12 every 400
 *                            (PCPMALLOC_PROF_SIGNAL=12: dumps from a handler); one thread
 *                            forks every 25 ms (the child allocates, starts a thread, dumps
 *                            DIR/child.PID.heap); main dumps DIR/main.heap every 2000 rounds
 *                            and at the end (which must succeed), after a last signal 12.  A
 *                            hang is killed by alarm(); exits 0 when every block and child
 *                            was sound.  Run with PCPMALLOC_PROF_SAMPLE=1: every allocation
 *                            sampled, signals landing in the sampling path.
 *
 * The functions are exported (-rdynamic) and not inlined, so google-pprof and the leak
 * report (dladdr) name them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUND 1024
#define SMALL 4096

static int (*prof_dump)(const char *);

static void **blocks;

/* Each site allocates `bytes` in 4 KiB blocks and frees them round by round. */
#define SITE(name)                                                                                 \
	__attribute__((noinline)) void name(size_t bytes)                                          \
	{                                                                                          \
		for (size_t done = 0; done < bytes; done += (size_t)ROUND * SMALL) {               \
			for (int i = 0; i < ROUND; i++)                                            \
				blocks[i] = malloc(SMALL);                                         \
			__asm__ volatile("" ::: "memory");                                         \
			for (int i = 0; i < ROUND; i++)                                            \
				free(blocks[i]);                                                   \
		}                                                                                  \
	}
SITE(alloc_one)
SITE(alloc_two)
SITE(alloc_four)

__attribute__((noinline)) void leak_site(void)
{
	for (int i = 0; i < 448; i++) {
		void *volatile p = malloc(1 << 20);
		(void)p;
	}
}

#define API_SITE(name, call)                                                                       \
	__attribute__((noinline)) void name(void)                                                  \
	{                                                                                          \
		for (int i = 0; i < 256; i++) {                                                    \
			void *p = NULL;                                                            \
			call;                                                                      \
			blocks[i] = p;                                                             \
		}                                                                                  \
		__asm__ volatile("" ::: "memory");                                                 \
		for (int i = 0; i < 256; i++)                                                      \
			free(blocks[i]);                                                           \
	}
/* (each site a size class of its own: its first allocations find the class's stack empty
 * and refill it, which is where the bytes are counted) */
API_SITE(api_malloc, p = malloc(40))
API_SITE(api_calloc, p = calloc(1, 72))
API_SITE(api_realloc, p = realloc(NULL, 104))
API_SITE(api_posix_memalign64, if (posix_memalign(&p, 64, 136)) p = NULL)
API_SITE(api_posix_memalign16, if (posix_memalign(&p, 16, 168)) p = NULL)
API_SITE(api_aligned_alloc, p = aligned_alloc(128, 256))
API_SITE(api_memalign, p = memalign(256, 300))
API_SITE(api_valloc, p = valloc(24 + i))

__attribute__((noinline)) int realloc_fail_site(void)
{
	int kept = 0;
	for (int i = 0; i < 16; i++) {
		void *p = malloc(1 << 20);
		errno = 0;
		if (p && !realloc(p, (size_t)1 << 46) && errno == ENOMEM)
			kept++; /* p is still allocated: never freed, a leak */
	}
	return kept;
}

__attribute__((noinline)) void child_site(void)
{
	for (int i = 0; i < 256; i++) {
		void *volatile p = malloc(1 << 20);
		(void)p;
	}
}

__attribute__((noinline)) void *thread_site(void *arg)
{
	(void)arg;
	for (int r = 0; r < 64; r++) {
		void *b[256];
		for (int i = 0; i < 256; i++)
			b[i] = malloc(SMALL);
		__asm__ volatile("" ::: "memory");
		for (int i = 0; i < 256; i++)
			free(b[i]);
	}
	return NULL;
}

/* ---- stress: threads, signals, fork, dumps at once ---- */

#define STRESS_THREADS 4
#define STRESS_SLOTS 64
static atomic_int stress_stop;
static atomic_long stress_handled;
static char stress_dir[2048];

static uint64_t next_rand(uint64_t *r)
{
	*r = *r * 6364136223846793005ull + 1442695040888963407ull;
	return *r >> 33;
}

static size_t stress_size(uint64_t *r)
{
	uint64_t x = next_rand(r);
	switch (x % 8) {
	case 0:
		return 1 + x % 64;
	case 1:
	case 2:
		return 1 + x % 1024;
	case 3:
	case 4:
		return 1 + x % 16384;
	case 5:
		return 16384 + x % 65536;
	case 6:
		return 4096 * (1 + x % 8); /* page multiples: sampled or not, page aligned */
	default:
		return x % 64 ? 1 + x % 256 : (1 << 20) + x % (1 << 20);
	}
}

/* A pattern of the block's address and size in its first and last bytes (and every 4 KiB). */
static void stamp(unsigned char *p, size_t n, size_t tag)
{
	for (size_t i = 0; i < n; i += (i < 32 || i + 32 >= n) ? 1 : 4096)
		p[i] = (unsigned char)(tag * 31 + i * 7);
}

/* Are the first k bytes of a block stamped for n bytes still as stamped?  (k <= n) */
static int stamped(const unsigned char *p, size_t n, size_t k, size_t tag)
{
	for (size_t i = 0; i < k; i += (i < 32 || i + 32 >= n) ? 1 : 4096)
		if (p[i] != (unsigned char)(tag * 31 + i * 7))
			return 0;
	return 1;
}

static void say(const char *msg)
{
	ssize_t w = write(2, msg, strlen(msg));
	(void)w;
}

static void stress_handler(int sig)
{
	(void)sig;
	static __thread uint64_t r;
	r += 0x9e3779b97f4a7c15ull;
	size_t n = stress_size(&r), m = stress_size(&r);
	unsigned char *p = malloc(n);
	if (p) {
		stamp(p, n, n);
		unsigned char *q = realloc(p, m);
		if (q) {
			p = q;
			if (!stamped(p, n, n < m ? n : m, n)) {
				say("prof_target stress: a block realloc'ed in a handler lost its data\n");
				_exit(3);
			}
		}
		free(p);
	}
	atomic_fetch_add_explicit(&stress_handled, 1, memory_order_relaxed);
}

static void *stress_worker(void *arg)
{
	uint64_t r = (uintptr_t)arg * 7919 + 1;
	unsigned char *blk[STRESS_SLOTS] = { 0 };
	size_t len[STRESS_SLOTS] = { 0 };
	while (!atomic_load_explicit(&stress_stop, memory_order_relaxed)) {
		unsigned i = (unsigned)(next_rand(&r) % STRESS_SLOTS);
		if (blk[i]) {
			if (!stamped(blk[i], len[i], len[i], len[i] ^ i)) {
				say("prof_target stress: a block's pattern changed\n");
				_exit(3);
			}
			if (next_rand(&r) % 4 == 0) { /* realloc keeps the common prefix */
				size_t m = stress_size(&r);
				unsigned char *q = realloc(blk[i], m);
				if (q) {
					if (!stamped(q, len[i], len[i] < m ? len[i] : m, len[i] ^ i)) {
						say("prof_target stress: realloc lost a block's data\n");
						_exit(3);
					}
					blk[i] = q;
					len[i] = m;
					stamp(q, m, m ^ i);
				}
				continue;
			}
			free(blk[i]);
			blk[i] = NULL;
			continue;
		}
		size_t n = stress_size(&r);
		void *p = NULL;
		switch (next_rand(&r) % 4) {
		case 0:
			p = calloc(1, n);
			for (size_t k = 0; p && k < n; k += 512)
				if (((unsigned char *)p)[k]) {
					say("prof_target stress: calloc's block not zero\n");
					_exit(3);
				}
			break;
		case 1:
			if (posix_memalign(&p, (size_t)16 << (next_rand(&r) % 10), n))
				p = NULL;
			break;
		default:
			p = malloc(n);
		}
		if (p) {
			blk[i] = p;
			len[i] = n;
			stamp(p, n, n ^ i);
		}
	}
	for (unsigned i = 0; i < STRESS_SLOTS; i++)
		free(blk[i]);
	return NULL;
}

static void *stress_child_thread(void *arg)
{
	(void)arg;
	thread_site(NULL);
	return NULL;
}

static int dump(const char *path);

/* fork every 25 ms: the child allocates at its own site (and in a thread), dumps, exits */
static void *stress_forker(void *arg)
{
	(void)arg;
	int bad = 0;
	while (!atomic_load_explicit(&stress_stop, memory_order_relaxed)) {
		usleep(25000);
		pid_t pid = fork();
		if (pid == 0) {
			char path[4096];
			pthread_t t;
			child_site();
			if (pthread_create(&t, NULL, stress_child_thread, NULL) ||
			    pthread_join(t, NULL))
				_exit(4);
			snprintf(path, sizeof(path), "%s/child.%d.heap", stress_dir, (int)getpid());
			_exit(dump(path) ? 5 : 0);
		}
		int st;
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "prof_target stress: a fork child failed (status %#x)\n",
				pid < 0 ? -1 : st);
			bad = 1;
		}
	}
	return (void *)(intptr_t)bad;
}

static int stress(int secs, const char *dir)
{
	snprintf(stress_dir, sizeof(stress_dir), "%s", dir);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = stress_handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	alarm((unsigned)secs + 60); /* a deadlock ends the program with SIGALRM */
	pthread_t w[STRESS_THREADS], f;
	for (int i = 0; i < STRESS_THREADS; i++)
		pthread_create(&w[i], NULL, stress_worker, (void *)(intptr_t)(i + 1));
	pthread_create(&f, NULL, stress_forker, NULL);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	char path[4096];
	snprintf(path, sizeof(path), "%s/main.heap", dir);
	for (long k = 1;; k++) {
		struct timespec d = { 0, 50000 }; /* 50 us */
		nanosleep(&d, NULL);
		pthread_kill(w[k % STRESS_THREADS], SIGUSR1);
		if (k % 400 == 0)
			raise(12); /* PCPMALLOC_PROF_SIGNAL=12: a dump from a handler */
		if (k % 2000 == 0 && dump(path))
			fprintf(stderr, "prof_target stress: a dump failed (another in progress?)\n");
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= secs)
			break;
	}
	/* a dump from the handler and one asked for, at least, however few rounds ran */
	raise(12);
	int bad_dump = dump(path) != 0;
	atomic_store(&stress_stop, 1);
	for (int i = 0; i < STRESS_THREADS; i++)
		pthread_join(w[i], NULL);
	void *bad;
	pthread_join(f, &bad);
	printf("stress: %ld handler runs\n", (long)atomic_load(&stress_handled));
	return bad || bad_dump ? 1 : 0;
}

static int dump(const char *path)
{
	if (!prof_dump) {
		fprintf(stderr, "prof_target: pcpmalloc_prof_dump not found (not under pcpmalloc)\n");
		exit(2);
	}
	return prof_dump(path);
}

int main(int argc, char **argv)
{
	prof_dump = (int (*)(const char *))dlsym(RTLD_DEFAULT, "pcpmalloc_prof_dump");
	blocks = calloc(ROUND, sizeof(void *));
	if (argc == 3 && !strcmp(argv[1], "ratio")) {
		alloc_one((size_t)512 << 20);
		alloc_two((size_t)1024 << 20);
		alloc_four((size_t)2048 << 20);
		leak_site();
		return dump(argv[2]) ? 1 : 0;
	}
	if (argc == 2 && !strcmp(argv[1], "noleak")) {
		alloc_one((size_t)64 << 20);
		free(blocks);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "fork")) {
		char path[4096];
		leak_site();
		pid_t pid = fork();
		if (pid == 0) {
			child_site();
			snprintf(path, sizeof(path), "%s/child.heap", argv[2]);
			_exit(dump(path) ? 1 : 0);
		}
		int st;
		waitpid(pid, &st, 0);
		snprintf(path, sizeof(path), "%s/parent.heap", argv[2]);
		return dump(path) || !WIFEXITED(st) || WEXITSTATUS(st);
	}
	if (argc == 3 && !strcmp(argv[1], "threads")) {
		pthread_t t[4];
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, thread_site, NULL);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		return dump(argv[2]) ? 1 : 0;
	}
	if (argc == 2 && !strcmp(argv[1], "signal")) {
		leak_site();
		raise(12); /* PCPMALLOC_PROF_SIGNAL=12 writes a dump */
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "baddump")) {
		leak_site();
		int r = dump(argv[2]);
		printf("dump returned %d, the program continued\n", r);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "apis")) {
		api_malloc();
		api_calloc();
		api_realloc();
		api_posix_memalign64();
		api_posix_memalign16();
		api_aligned_alloc();
		api_memalign();
		api_valloc();
		return dump(argv[2]) ? 1 : 0;
	}
	if (argc == 2 && !strcmp(argv[1], "reallocfail")) {
		printf("%d failed reallocs kept their block\n", realloc_fail_site());
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "stress"))
		return stress(atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: prof_target ratio DUMP | noleak | fork DIR | threads DUMP | signal | "
			"baddump PATH | apis DUMP | reallocfail | stress SECS DIR\n");
	return 2;
}
