/*
 * test_early.c - the early allocator (core/early.h): a process's first small allocations
 * come from a static area inside libpcpmalloc.so, until a request it cannot serve starts the
 * allocator proper.
 *
 * Every case runs in a fresh process (this program executed again with "case NAME"), since
 * only the first allocations of a process are early.  A block is early when dladdr() places
 * it inside libpcpmalloc.so's own mapping.  Checked: blocks and their contents through
 * realloc, calloc zeroing, the hand-over (a 5000-byte request starts the allocator proper;
 * later blocks are not early; early blocks freed after it), the area filling up, four
 * threads allocating at once (no two blocks overlap), a double free, an interior free and a
 * sized free larger than the block aborting with pcpmalloc's one line, and no early blocks when a PCPMALLOC_* variable made
 * the constructor start the allocator.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "testutil.h"

static int in_lib(const void *p)
{
	Dl_info info;
	return dladdr(p, &info) && info.dli_fname && strstr(info.dli_fname, "libpcpmalloc");
}

static long long early_bytes(void)
{
	long long (*stat)(const char *) =
		(long long (*)(const char *))dlsym(RTLD_DEFAULT, "pcpmalloc_stat");
	CHECK(stat != NULL);
	return stat("early_bytes");
}

static void case_basic(void)
{
	char *a = malloc(24);
	CHECK(a && in_lib(a));
	CHECK_ALIGNED(a, 16);
	size_t u = malloc_usable_size(a);
	CHECKF(u >= 24 && u % 16 == 0 && u <= 1024, "usable %zu", u);
	memset(a, 0x5a, 24);
	char *b = realloc(a, 200);
	CHECK(b && in_lib(b));
	for (int i = 0; i < 24; i++)
		CHECK_EQ(b[i], 0x5a);
	memset(b, 0x6b, 200);
	CHECK(realloc(b, 100) == b); /* shrinking stays */
	char *z = calloc(10, 10);
	CHECK(z && in_lib(z));
	for (int i = 0; i < 100; i++)
		CHECK_EQ(z[i], 0);
	/* the first request the area cannot serve starts the allocator proper */
	char *c = realloc(b, 5000);
	CHECK(c && !in_lib(c));
	for (int i = 0; i < 200; i++)
		CHECK_EQ(c[i], 0x6b);
	char *d = malloc(24);
	CHECK(d && !in_lib(d));
	free(z); /* an early block freed after the hand-over */
	free(c);
	free(d);
	long long eb = early_bytes();
	CHECKF(eb >= 32 + 208 + 112 && eb <= 16384, "early_bytes %lld", eb);
}

/* Calls the early area served count in malloc_calls / free_calls (they were left out): ten
 * early blocks, then the statistics (whose first read starts the allocator proper). */
static void case_counted(void)
{
	void *v[10];
	for (int i = 0; i < 10; i++) {
		v[i] = malloc(40);
		CHECK(v[i] && in_lib(v[i]));
	}
	for (int i = 0; i < 10; i++)
		free(v[i]);
	long long (*stat)(const char *) =
		(long long (*)(const char *))dlsym(RTLD_DEFAULT, "pcpmalloc_stat");
	CHECK(stat != NULL);
	long long m = stat("malloc_calls"), f = stat("free_calls");
	CHECKF(m >= 10 && f >= 10, "malloc_calls %lld, free_calls %lld after 10 early blocks", m, f);
}

static void case_fill(void)
{
	enum { MAX = 2048 };
	static char *blk[MAX];
	int n = 0;
	for (;;) {
		CHECK(n < MAX);
		char *p = malloc(16);
		CHECK(p != NULL);
		if (!in_lib(p)) {
			free(p);
			break;
		}
		memcpy(p, &n, sizeof(n));
		blk[n++] = p;
	}
	/* 32 bytes a block (16-byte header): about 16 KiB / 32, less what ran before main */
	CHECKF(n > 400 && n <= 512, "%d early blocks", n);
	for (int i = 0; i < n; i++) {
		int v;
		memcpy(&v, blk[i], sizeof(v));
		CHECK_EQ(v, i);
		if (i)
			CHECK(blk[i] >= blk[i - 1] + 16);
		free(blk[i]);
	}
	long long eb = early_bytes();
	CHECKF(eb > 16384 - 32 && eb <= 16384, "early_bytes %lld", eb);
	char *q = malloc(16);
	CHECK(q && !in_lib(q));
	free(q);
}

enum { THREADS = 4, PER = 64, SZ = 48 };
static pthread_barrier_t bar;
static char *tblk[THREADS][PER];

static void *thread_main(void *arg)
{
	long t = (long)arg;
	pthread_barrier_wait(&bar);
	for (int i = 0; i < PER; i++) {
		char *p = malloc(SZ);
		CHECK(p != NULL);
		memset(p, (int)(t * PER + i) & 0xff, SZ);
		tblk[t][i] = p;
	}
	return NULL;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static void case_threads(void)
{
	pthread_t th[THREADS];
	CHECK(pthread_barrier_init(&bar, NULL, THREADS) == 0);
	for (long t = 0; t < THREADS; t++)
		CHECK(pthread_create(&th[t], NULL, thread_main, (void *)t) == 0);
	for (int t = 0; t < THREADS; t++)
		CHECK(pthread_join(th[t], NULL) == 0);
	static uintptr_t all[THREADS * PER];
	int early = 0;
	for (int t = 0; t < THREADS; t++)
		for (int i = 0; i < PER; i++) {
			for (int k = 0; k < SZ; k++)
				CHECK_EQ((unsigned char)tblk[t][i][k], (t * PER + i) & 0xff);
			early += in_lib(tblk[t][i]);
			all[t * PER + i] = (uintptr_t)tblk[t][i];
		}
	qsort(all, THREADS * PER, sizeof(all[0]), cmp_ptr);
	for (int i = 1; i < THREADS * PER; i++)
		CHECK(all[i] >= all[i - 1] + SZ);
	CHECKF(early > 0, "%d early blocks", early);
	for (int t = 0; t < THREADS; t++)
		for (int i = 0; i < PER; i++)
			free(tblk[t][i]);
}

static void say_pointer(const void *p)
{
	fprintf(stderr, "test: pointer %p\n", p);
	fflush(stderr);
}

static void case_double(void)
{
	char *p = malloc(32);
	CHECK(p && in_lib(p));
	free(p);
	say_pointer(p);
	free(p);
}

/* realloc of a freed early block: a double free, as for every other block (it said
 * "invalid pointer") */
static void case_realloc_freed(void)
{
	char *p = malloc(32);
	CHECK(p && in_lib(p));
	free(p);
	say_pointer(p);
	p = realloc(tu_opaque_ptr(p), 64);
	free(p);
}

static void case_interior(void)
{
	char *p = malloc(64);
	CHECK(p && in_lib(p));
	say_pointer(p + 16);
	free(p + 16);
}

/* A sized free larger than an early block aborts, as for every other block (it was not
 * checked: the README's own example, free_sized of 65 bytes for a 64-byte block, passed
 * when the block came from the early area); the size it was asked for passes. */
static void case_sized(void)
{
	void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
	CHECK(fs);
	char *q = malloc(48);
	CHECK(q && in_lib(q));
	fs(q, 48);
	char *p = malloc(64);
	CHECK(p && in_lib(p));
	say_pointer(p);
	fs(p, 65);
}

static void case_env(void)
{
	char *p = malloc(24);
	CHECK(p && !in_lib(p));
	CHECK_EQ(early_bytes(), 0);
	free(p);
}

static const struct {
	const char *name;
	void (*fn)(void);
	const char *abort_prefix; /* NULL: must exit 0 */
	const char *env;	  /* one more variable, or NULL */
} cases[] = {
	{"basic", case_basic, NULL, NULL},
	{"fill", case_fill, NULL, NULL},
	{"counted", case_counted, NULL, NULL},
	{"threads", case_threads, NULL, NULL},
	{"double", case_double, "pcpmalloc: free(): double free ", NULL},
	{"realloc_freed", case_realloc_freed, "pcpmalloc: realloc(): double free ", NULL},
	{"interior", case_interior, "pcpmalloc: free(): invalid pointer ", NULL},
	{"sized", case_sized, "pcpmalloc: free_sized(): size 65 for ", NULL},
	{"env", case_env, NULL, "PCPMALLOC_DECAY_MS=1000"},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static const char *self_path; /* argv[0] */

/* Runs case i in a new process; returns 0 when it behaved. */
static int run_case(size_t i)
{
	int fd[2];
	CHECK(pipe(fd) == 0);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(fd[1], 2);
		close(fd[0]);
		close(fd[1]);
		/* only LD_PRELOAD: any PCPMALLOC_* would start the allocator in its constructor */
		char *env[3] = {NULL, NULL, NULL};
		int k = 0;
		const char *pre = getenv("LD_PRELOAD");
		static char pre_var[4096];
		if (pre) {
			snprintf(pre_var, sizeof(pre_var), "LD_PRELOAD=%s", pre);
			env[k++] = pre_var;
		}
		if (cases[i].env)
			env[k++] = (char *)cases[i].env;
		char *argv[] = {"test_early", "case", (char *)cases[i].name, NULL};
		execve("/proc/self/exe", argv, env);
		execve(self_path, argv, env); /* no /proc (test/hide.sh proc): the path run */
		_exit(127);
	}
	close(fd[1]);
	static char err[8192];
	size_t len = 0;
	ssize_t n;
	while ((n = read(fd[0], err + len, sizeof(err) - 1 - len)) > 0)
		len += (size_t)n;
	err[len] = '\0';
	close(fd[0]);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	const char *line;
	int ok;
	if (!cases[i].abort_prefix) {
		ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	} else {
		ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT &&
		     tu_lines_starting(err, "pcpmalloc: ", &line) == 1 &&
		     strncmp(line, cases[i].abort_prefix, strlen(cases[i].abort_prefix)) == 0;
		/* the line names the pointer the case announced */
		const char *ann = strstr(err, "test: pointer ");
		if (ok && ann) {
			char ptr[64];
			if (sscanf(ann, "test: pointer %63s", ptr) == 1)
				ok = strstr(line, ptr) != NULL;
		} else {
			ok = 0;
		}
	}
	printf("  %-9s %s\n", cases[i].name, ok ? "ok" : "FAILED");
	if (!ok)
		printf("    status %#x, stderr:\n%s\n", st, err);
	return !ok;
}

int main(int argc, char **argv)
{
	self_path = argv[0];
	if (argc == 3 && strcmp(argv[1], "case") == 0) {
		for (size_t i = 0; i < NCASES; i++)
			if (strcmp(argv[2], cases[i].name) == 0) {
				cases[i].fn();
				return 0;
			}
		return 2;
	}
	tu_require_pcpmalloc("test_early");
	int failed = 0;
	for (size_t i = 0; i < NCASES; i++)
		failed += run_case(i);
	printf("test_early: %d of %zu cases failed\n", failed, NCASES);
	return failed ? 1 : 0;
}
