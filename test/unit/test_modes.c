/*
 * test_modes.c - the API entries (core/api.c) in each of the three modes - default, secure
 * (PCPMALLOC_SECURE=1) and memcheck (PCPMALLOC_VALGRIND=1, forced outside valgrind) - from
 * the very first call of a process: the core is linked directly, so nothing has allocated
 * before the case runs (no constructor), and each case runs in a forked child whose first
 * pcpm_ call starts the allocator in the mode its environment names.
 *
 * Checked in every mode:
 *  - each entry as the process's first call (calloc, realloc, memalign, posix_memalign,
 *    aligned_alloc, valloc, pvalloc, malloc_usable_size, malloc_trim, mallinfo, free(NULL)):
 *    a usable, aligned (calloc: zeroed) block, errno left alone;
 *  - early blocks (the early area serves the first small requests) used after the start:
 *    usable size, realloc growing and shrinking with the contents kept, realloc(p, 0), free,
 *    then malloc_trim and enough churn to push them through memcheck mode's quarantine
 *    (memcheck mode once quarantined a freed early block as if it were its own - a crash
 *    when it left the quarantine - and aborted realloc of one as a double free).
 * Secure mode: a huge block freed by a signal handler that interrupted pcpmalloc (deferred)
 * goes through the quarantine like any other: the next allocation of that size gets other
 * pages and the old range stays reserved, no access.
 * Default mode: frees alone (no allocation after them) still run the periodic work a pcp
 * drain found due, so idle free memory is purged (the lazy vmstat_update); a handler's
 * mallocs and frees of blocks no slab serves leave no mapping behind.
 *
 * Usage: test_modes [CASE MODE]  (no argument: every case in every mode, each in a child).
 */
#define _GNU_SOURCE
#include "api.h"
#include "trim.h"
#include "early.h"
#include "os.h"
#include "stat.h"
#include "unit.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const modes[][2] = {
	{"default", NULL},
	{"secure", "PCPMALLOC_SECURE"},
	{"memcheck", "PCPMALLOC_VALGRIND"},
};

static void fill(void *p, size_t n, unsigned char v)
{
	memset(p, v, n);
}

static int holds(const void *p, size_t n, unsigned char v)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		if (c[i] != v)
			return 0;
	return 1;
}

/* Reading *p faults (SIGSEGV caught and jumped out of)? */
static sigjmp_buf fault_jmp;
static void on_fault(int sig)
{
	(void)sig;
	siglongjmp(fault_jmp, 1);
}

static int faults(const volatile char *p)
{
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fault;
	sigaction(SIGSEGV, &sa, &old);
	int f = 1;
	if (!sigsetjmp(fault_jmp, 1)) {
		(void)*p;
		f = 0;
	}
	sigaction(SIGSEGV, &old, NULL);
	return f;
}

/* A block just handed out: usable, aligned, kept across a realloc, freed. */
static void use(void *p, size_t n, size_t align)
{
	CHECK(p != NULL);
	CHECK(((uintptr_t)p & (align - 1)) == 0);
	CHECK(pcpm_usable_size(p) >= n);
	fill(p, n, 0x3c);
	char *q = pcpm_realloc(p, 50000);
	CHECK(q != NULL);
	CHECK(holds(q, n < 50000 ? n : 50000, 0x3c));
	pcpm_free(q);
}

static void case_first(const char *call)
{
	void *p = NULL;
	errno = 1234;
	if (!strcmp(call, "calloc")) {
		p = pcpm_calloc(100, 200);
		CHECK(p && holds(p, 20000, 0));
		use(p, 20000, 16);
	} else if (!strcmp(call, "calloc_small")) {
		p = pcpm_calloc(10, 10);
		CHECK(p && holds(p, 100, 0));
		use(p, 100, 16);
	} else if (!strcmp(call, "realloc")) {
		use(pcpm_realloc(NULL, 100), 100, 16);
	} else if (!strcmp(call, "memalign")) {
		use(pcpm_memalign(64, 100), 100, 64);
	} else if (!strcmp(call, "memalign_big")) {
		use(pcpm_memalign(1 << 16, 100000), 100000, 1 << 16);
	} else if (!strcmp(call, "posix_memalign")) {
		CHECK_EQ(pcpm_posix_memalign(&p, 256, 1000), 0);
		use(p, 1000, 256);
	} else if (!strcmp(call, "aligned_alloc")) {
		use(pcpm_aligned_alloc(4096, 4096), 4096, 4096);
	} else if (!strcmp(call, "valloc")) {
		use(pcpm_valloc(10), 10, 4096);
	} else if (!strcmp(call, "pvalloc")) {
		p = pcpm_pvalloc(10);
		CHECK(p && pcpm_usable_size(p) >= 4096);
		use(p, 4096, 4096);
	} else if (!strcmp(call, "usable")) {
		CHECK_EQ(pcpm_usable_size(NULL), 0);
		use(pcpm_malloc(10), 10, 16);
	} else if (!strcmp(call, "trim")) {
		pcpm_trim(0);
		use(pcpm_malloc(10), 10, 16);
	} else if (!strcmp(call, "mallinfo")) {
		struct pcpm_mallinfo mi;
		pcpm_mallinfo(&mi);
		use(pcpm_malloc(10), 10, 16);
	} else if (!strcmp(call, "free")) {
		pcpm_free(NULL);
		use(pcpm_malloc(10), 10, 16);
	} else {
		CHECK(!"unknown call");
	}
	CHECK_EQ(errno, 1234);
}

/* Early blocks, then the start, then every operation on them. */
static void case_early(void)
{
	char *e[8];
	for (int i = 0; i < 8; i++) {
		e[i] = pcpm_malloc(100 * (size_t)(i + 1));
		CHECK(e[i] && pcpm_is_early(e[i]));
		fill(e[i], 100 * (size_t)(i + 1), (unsigned char)(i + 1));
	}
	char *big = pcpm_malloc(100000); /* the early area cannot serve it: the start */
	CHECK(big && !pcpm_is_early(big));
	CHECK(pcpm_usable_size(e[0]) >= 100);
	char *r = pcpm_realloc(e[0], 50); /* shrinking: kept (in place or moved) */
	CHECK(r && holds(r, 50, 1));
	e[0] = r;
	r = pcpm_realloc(e[1], 5000); /* growing out of the early area */
	CHECK(r && !pcpm_is_early(r) && holds(r, 200, 2));
	e[1] = r;
	CHECK(pcpm_realloc(e[2], 0) == NULL); /* freed */
	e[2] = NULL;
	errno = 1234;
	for (int i = 0; i < 8; i++)
		pcpm_free(e[i]);
	pcpm_free(big);
	CHECK_EQ(errno, 1234);
	pcpm_trim(0);
	/* more frees than memcheck mode's quarantine holds: the early blocks leave it */
	for (int i = 0; i < 10000; i++) {
		char *p = pcpm_malloc(64);
		CHECK(p);
		p[0] = 1;
		pcpm_free(p);
	}
	pcpm_trim(0);
}

/* Secure mode: a huge block freed from a handler, then the same size again. */
static void case_nested_huge(void)
{
	size_t sz = 8UL << 20;
	char *a = pcpm_malloc(sz);
	CHECK(a);
	fill(a, sz, 1);
	pcpm_sig_depth = 1; /* a handler that interrupted pcpmalloc: the no-wait free */
	pcpm_free(a);
	pcpm_sig_depth = 0;
	char *b = pcpm_malloc(sz);
	CHECK(b);
	CHECK(b != a);	  /* the freed range is quarantined, not reused */
	CHECK(faults(a)); /* and a use after free faults */
	fill(b, sz, 2);	  /* no guard page left inside the block */
	pcpm_free(b);
	/* the same through malloc_trim, which also frees what handlers deferred */
	char *c = pcpm_malloc(sz);
	CHECK(c);
	pcpm_sig_depth = 1;
	pcpm_free(c);
	pcpm_sig_depth = 0;
	pcpm_trim(0);
	char *d = pcpm_malloc(sz);
	CHECK(d && d != c && faults(c));
	pcpm_free(d);
}

static int nr_mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	CHECK(f);
	int n = 0, c;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Default mode: a handler that interrupted pcpmalloc and allocates and frees blocks that no
 * slab serves (each a fresh mapping: the no-wait path) leaves no mapping behind, though no
 * call outside a handler follows (they waited for one, and reached vm.max_map_count). */
static void case_nested_churn(void)
{
	pcpm_free(pcpm_malloc(100000)); /* started (the early area serves small ones first) */
	int before = nr_mappings();
	pcpm_sig_depth = 1;
	for (int i = 0; i < 2000; i++) {
		char *p = pcpm_malloc(5000 + (size_t)(i % 7) * 40000);
		CHECK(p);
		p[0] = 1;
		pcpm_free(p);
	}
	pcpm_sig_depth = 0;
	int after = nr_mappings();
	if (after > before + 8) {
		fprintf(stderr, "test_modes: %d mappings before 2000 nested malloc/free pairs, %d "
				"after\n", before, after);
		exit(1);
	}
}

static long long stat_of(const char *name)
{
	struct pcpm_stats s;
	pcpm_stats_read(&s);
	return pcpm_stats_get(&s, name);
}

/* Default mode: memory freed, left idle past the decay period, then frees only. */
static void case_decay_on_free(void)
{
	enum { N = 3000 };
	static char *a[N], *b[N];
	for (int i = 0; i < N; i++) {
		a[i] = pcpm_malloc(16384);
		b[i] = pcpm_malloc(16384);
		CHECK(a[i] && b[i]);
		fill(a[i], 16384, 1);
		fill(b[i], 16384, 1);
	}
	for (int i = 0; i < N; i++)
		pcpm_free(a[i]);
	struct timespec ts = {0, 200 * 1000000L}; /* four decay periods */
	nanosleep(&ts, NULL);
	long long before = stat_of("purged_bytes");
	for (int i = 0; i < N; i++) /* frees only: their pcp drains find the period passed */
		pcpm_free(b[i]);
	long long after = stat_of("purged_bytes");
	if (after <= before) {
		fprintf(stderr, "test_modes: no purge during the frees: purged_bytes %lld before, "
				"%lld after\n", before, after);
		exit(1);
	}
}

static int run_case(const char *name, const char *mode)
{
	if (!strcmp(name, "nested_huge"))
		case_nested_huge();
	else if (!strcmp(name, "nested_churn"))
		case_nested_churn();
	else if (!strcmp(name, "decay_on_free"))
		case_decay_on_free();
	else if (!strcmp(name, "early"))
		case_early();
	else if (!strncmp(name, "first_", 6))
		case_first(name + 6);
	else
		CHECK(!"unknown case");
	(void)mode;
	return 0;
}

/* Runs one case in a child, in the mode named; false when it failed. */
static bool child(const char *name, int m)
{
	fflush(stderr);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (modes[m][1])
			setenv(modes[m][1], "1", 1);
		setenv("PCPMALLOC_DECAY_MS", "50", 1);
		_exit(run_case(name, modes[m][0]));
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (!ok)
		fprintf(stderr, "test_modes: case %s, %s mode: failed (status 0x%x)\n", name,
			modes[m][0], st);
	return ok;
}

int main(int argc, char **argv)
{
	static const char *const firsts[] = {
		"first_calloc", "first_calloc_small", "first_realloc", "first_memalign",
		"first_memalign_big", "first_posix_memalign", "first_aligned_alloc", "first_valloc",
		"first_pvalloc", "first_usable", "first_trim", "first_mallinfo", "first_free",
		"early",
	};
	if (argc == 3) { /* one case, in this process, in the mode the environment names */
		return run_case(argv[1], argv[2]);
	}
	int failed = 0;
	for (int m = 0; m < 3; m++)
		for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++)
			failed += !child(firsts[i], m);
	failed += !child("nested_huge", 1);
	failed += !child("decay_on_free", 0);
	failed += !child("nested_churn", 0);
	if (failed) {
		fprintf(stderr, "test_modes: %d cases failed\n", failed);
		return 1;
	}
	printf("test_modes: all cases passed\n");
	return 0;
}
