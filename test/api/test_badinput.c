/*
 * test_badinput.c - misuse is detected and reported, never silently absorbed.
 *
 * Each abort case runs in a forked child whose stderr goes to a pipe.  The child first writes
 * the pointer it is about to misuse to a second pipe, then misuses it.  The child must die by
 * SIGABRT, its stderr must hold exactly one line starting with "pcpmalloc: ", that line must
 * start with the expected prefix and name the same pointer in hex.
 *
 * Then, in-process: impossible requests fail cleanly (NULL + ENOMEM, EINVAL with the output
 * untouched); and a malformed PCPMALLOC_DECAY_MS makes a process print exactly one warning
 * line about it and still run to exit status 0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "testutil.h"

extern char **environ;

/* --- Running a case in a child ----------------------------------------------------------- */

static void describe_status(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else
		snprintf(buf, len, "status %#x", status);
}

static int failures;

/* Runs one abort case; counts (and prints) a failure rather than stopping, so one run shows
 * every case. */
static void expect_abort(const char *name, void (*fn)(void), const char *prefix)
{
	struct tu_child_result *r = malloc(sizeof(*r));
	CHECK(r != NULL);
	/* 99: misuse that was not caught */
	tu_run_child(fn, r, 99, "test: misuse returned normally\n");
	char why[512] = "";
	char st[128];
	describe_status(r->status, st, sizeof(st));
	const char *line;
	int n = tu_lines_starting(r->err, "pcpmalloc: ", &line);
	if (!WIFSIGNALED(r->status) || WTERMSIG(r->status) != SIGABRT) {
		snprintf(why, sizeof(why), "child %s, want SIGABRT", st);
	} else if (n != 1) {
		snprintf(why, sizeof(why), "%d lines start with \"pcpmalloc: \", want exactly 1", n);
	} else if (strncmp(line, prefix, strlen(prefix)) != 0) {
		snprintf(why, sizeof(why), "message does not start with \"%s\"", prefix);
	} else {
		/* The pointer in the message: the hex number after "0x" at the end of the
		 * prefix, or, when the prefix has no address, the first "0x" on the line. */
		const char *hex = strstr(line + strlen(prefix) - (strstr(prefix, "0x") ? 2 : 0), "0x");
		unsigned long long printed = hex ? strtoull(hex, NULL, 16) : 0;
		unsigned long long expected = strtoull(r->ptr, NULL, 16);
		if (!r->ptr[0])
			snprintf(why, sizeof(why), "%s", "child reported no pointer");
		else if (!hex || printed != expected)
			snprintf(why, sizeof(why), "message names %#llx, the misused pointer is %#llx",
				 printed, expected);
	}
	if (why[0]) {
		failures++;
		printf("FAIL - %s: %s\n  child stderr (%zu bytes): \"%s\"\n", name, why, r->err_len,
		       r->err);
	} else {
		size_t l = strcspn(line, "\n");
		printf("ok - %s: \"%.*s\"\n", name, (int)l, line);
	}
	free(r);
}

/* A pointer outside pcpmalloc's memory goes to glibc's own free (README "Semantics"): the
 * child dies as under glibc alone (its "free(): invalid pointer" abort, or a fault where
 * glibc reads the chunk header), and pcpmalloc says nothing. */
static void expect_glibc(const char *name, void (*fn)(void))
{
	struct tu_child_result *r = malloc(sizeof(*r));
	CHECK(r != NULL);
	tu_run_child(fn, r, 99, "test: misuse returned normally\n");
	char st[128];
	describe_status(r->status, st, sizeof(st));
	const char *line;
	int n = tu_lines_starting(r->err, "pcpmalloc: ", &line);
	if (!WIFSIGNALED(r->status) ||
	    (WTERMSIG(r->status) != SIGABRT && WTERMSIG(r->status) != SIGSEGV) || n != 0) {
		failures++;
		printf("FAIL - %s: child %s, %d pcpmalloc lines; want glibc's abort\n"
		       "  child stderr (%zu bytes): \"%s\"\n",
		       name, st, n, r->err_len, r->err);
	} else {
		printf("ok - %s: glibc's free (child %s)\n", name, st);
	}
	free(r);
}

/* --- The abort cases ------------------------------------------------------------------------ */

static void free_interior_small(void)
{
	char *p = malloc(64);
	memset(p, 1, 64);
	tu_report_pointer(p + 16);
	free(tu_opaque_ptr(p + 16));
}

static void free_interior_large(void)
{
	char *p = malloc(100000);
	memset(p, 1, 100000);
	tu_report_pointer(p + 4096);
	free(tu_opaque_ptr(p + 4096));
}

static void double_free_tcache(void)
{
	void *keep = malloc(64); /* a neighbour, so the slab stays in use */
	void *p = malloc(64);
	memset(p, 2, 64);
	free(p);
	tu_report_pointer(p);
	free(tu_opaque_ptr(p));
	free(keep);
}

static void double_free_after_flush(void)
{
	enum { N = 200 };
	void *others[N];
	/* Neighbours that stay live keep p's slab a slab (not given back as pages). */
	void *keep_before = malloc(64);
	void *p = malloc(64);
	void *keep_after = malloc(64);
	memset(p, 3, 64);
	for (int i = 0; i < N; i++)
		others[i] = malloc(64);
	/* p is freed first, then 200 more of its size: the thread cache overflows and p goes
	 * back to its slab. */
	free(p);
	for (int i = 0; i < N; i++)
		free(others[i]);
	tu_report_pointer(p);
	free(tu_opaque_ptr(p));
	free(keep_before);
	free(keep_after);
}

static void double_free_large(void)
{
	void *p = malloc(256 * TU_KIB);
	memset(p, 4, 256 * TU_KIB);
	free(p);
	tu_report_pointer(p);
	free(tu_opaque_ptr(p));
}

static void double_free_huge(void)
{
	void *p = malloc(16 * TU_MIB);
	memset(p, 4, TU_MIB);
	free(p);
	tu_report_pointer(p);
	free(tu_opaque_ptr(p));
}

static void realloc_interior(void)
{
	char *p = malloc(64);
	memset(p, 5, 64);
	tu_report_pointer(p + 16);
	void *q = realloc(tu_opaque_ptr(p + 16), 100);
	(void)q;
}

static void free_stack(void)
{
	char local[64];
	memset(local, 6, sizeof(local));
	tu_report_pointer(local);
	free(tu_opaque_ptr(local));
	/* Keep local alive past the call. */
	__asm__ volatile("" : : "r"(local) : "memory");
}

static char static_array[256];

static void free_static(void)
{
	tu_report_pointer(static_array + 16);
	free(tu_opaque_ptr(static_array + 16));
}

static void free_foreign_mmap(void)
{
	/* A page the allocator never saw, at a page-aligned address like its own. */
	void *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	char *p = (char *)m + 65536;
	tu_report_pointer(p);
	free(tu_opaque_ptr(p));
}

/* A sized free (C23 free_sized, found by name: glibc 2.36 has none) given one byte more than
 * the block of n bytes can hold: a size it never had.  64 B is the inline check (the size's
 * class against the descriptor's), 4 KiB the class-size table, 256 KiB (a page run) and
 * 16 MiB (a mapping) the slow path's. */
static void free_sized_too_large(size_t n)
{
	void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
	CHECK(fs != NULL);
	void *keep = malloc(n); /* a neighbour, so a slab stays in use */
	char *p = malloc(n);
	memset(p, 7, n);
	size_t usable = malloc_usable_size(p);
	tu_report_pointer(p);
	fs(tu_opaque_ptr(p), usable + 1);
	free(keep);
}

static void free_sized_64(void)
{
	free_sized_too_large(64);
}

static void free_sized_4k(void)
{
	free_sized_too_large(4096);
}

static void free_sized_256k(void)
{
	free_sized_too_large(256 * TU_KIB);
}

static void free_sized_16m(void)
{
	free_sized_too_large(16 * TU_MIB);
}

/* --- Clean failures, in-process ----------------------------------------------------------- */

static void clean_failures(void)
{
	errno = 0;
	void *p = malloc(tu_opaque(SIZE_MAX));
	CHECK(p == NULL);
	CHECK_EQ(errno, ENOMEM);
	errno = 0;
	p = calloc(tu_opaque(SIZE_MAX / 4), 8);
	CHECK(p == NULL);
	CHECK_EQ(errno, ENOMEM);
	void *sentinel = (void *)(uintptr_t)0xabcdef0;
	p = sentinel;
	CHECK_EQ(posix_memalign(&p, tu_opaque(3), 8), EINVAL);
	CHECK(p == sentinel);
	p = sentinel;
	CHECK_EQ(posix_memalign(&p, tu_opaque(0), 8), EINVAL);
	CHECK(p == sentinel);
	/* Still working afterwards. */
	p = malloc(100);
	CHECK(p != NULL);
	memset(p, 0, 100);
	free(p);
	printf("ok - impossible requests fail cleanly\n");
}

/* A request the kernel refuses to back (4x RAM with its overcommit heuristic) fails with
 * ENOMEM, and still does once a freed huge block waits in the cache: building the block
 * from cached mappings took a NORESERVE reservation made writable, which the kernel's
 * check never saw, and malloc(64 GiB) succeeded on a 23 GiB machine (then an OOM kill). */
static void beyond_memory_after_cache(void)
{
	size_t n = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE) * 4;
	void *probe = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (probe != MAP_FAILED) { /* vm.overcommit_memory=1: the kernel accepts anything */
		munmap(probe, n);
		printf("ok - # skipped: a mapping of 4x RAM is accepted here\n");
		return;
	}
	free(malloc(tu_opaque(5UL << 20)));
	errno = 0;
	void *p = malloc(tu_opaque(n));
	if (p != NULL || errno != ENOMEM) {
		failures++;
		printf("FAIL - malloc(%zu) beyond memory after a huge block was cached: %p, errno %d\n",
		       n, p, errno);
		free(p);
		return;
	}
	printf("ok - malloc of 4x RAM fails with ENOMEM with a freed huge block cached\n");
}

/* --- Malformed environment ---------------------------------------------------------------- */

/* Runs argv with our environment plus extra, stderr captured; returns the wait status. */
static int run_with_env(char *const argv[], const char *const extra[], char *err, size_t err_size)
{
	size_t n = 0, x = 0;
	while (environ[n])
		n++;
	while (extra[x])
		x++;
	char **env = calloc(n + x + 1, sizeof(char *));
	CHECK(env != NULL);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "PCPMALLOC_", 10) != 0 ||
		    strncmp(environ[i], "PCPMALLOC_TEST_", 15) == 0)
			env[k++] = environ[i];
	for (size_t i = 0; i < x; i++)
		env[k++] = (char *)extra[i];
	env[k] = NULL;

	int pfd[2];
	CHECK(pipe(pfd) == 0);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		signal(SIGALRM, SIG_DFL);
		alarm(20);
		close(pfd[0]);
		dup2(pfd[1], 2);
		close(pfd[1]);
		execve(argv[0], argv, env);
		_exit(127);
	}
	close(pfd[1]);
	size_t len = 0;
	ssize_t r;
	char scratch[256];
	while ((r = read(pfd[0], len < err_size - 1 ? err + len : scratch,
			 len < err_size - 1 ? err_size - 1 - len : sizeof(scratch))) > 0)
		if (len < err_size - 1)
			len += (size_t)r;
	err[len] = '\0';
	close(pfd[0]);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	free(env);
	return status;
}

static void check_env_warning(const char *what, char *const argv[])
{
	char err[4096];
	int status = run_with_env(argv, (const char *const[]){"PCPMALLOC_DECAY_MS=abc", NULL}, err,
				  sizeof(err));
	char st[128];
	describe_status(status, st, sizeof(st));
	int lines = 0;
	for (const char *c = err; *c; c++)
		if (*c == '\n')
			lines++;
	if (err[0] && err[strlen(err) - 1] != '\n')
		lines++;
	bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && lines == 1 &&
		  strstr(err, "PCPMALLOC_DECAY_MS") != NULL;
	if (!ok) {
		failures++;
		printf("FAIL - %s with PCPMALLOC_DECAY_MS=abc: %s, %d stderr lines (want exactly 1 "
		       "naming PCPMALLOC_DECAY_MS and exit status 0): \"%s\"\n",
		       what, st, lines, err);
	} else {
		printf("ok - %s with PCPMALLOC_DECAY_MS=abc: \"%.*s\"\n", what,
		       (int)strcspn(err, "\n"), err);
	}
}

/* PCPMALLOC_PROF_SIGNAL naming a fault signal: refused with one warning, so that a program
 * that faults dies of it (the profile handler returned and the fault came back forever). */
static void check_prof_fault_signal(const char *self)
{
	char err[4096];
	char *argv[] = {(char *)self, (char *)"--child-segv", NULL};
	int status = run_with_env(argv, (const char *const[]){"PCPMALLOC_PROF=1",
		"PCPMALLOC_PROF_SIGNAL=11", "PCPMALLOC_PROF_PREFIX=/nonexistent/p", NULL}, err,
				  sizeof(err));
	char st[128];
	describe_status(status, st, sizeof(st));
	bool ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV &&
		  strstr(err, "PCPMALLOC_PROF_SIGNAL=11") != NULL;
	if (!ok)
		failures++;
	printf("%s - a faulting program with PCPMALLOC_PROF_SIGNAL=11: %s, \"%.*s\"\n",
	       ok ? "ok" : "FAIL", st, (int)strcspn(err, "\n"), err);
}

static int child_mode_malloc(void)
{
	/* Re-executed by the environment check: allocate a little and exit 0. */
	for (int i = 0; i < 100; i++) {
		void *p = malloc((size_t)i * 40 + 1);
		if (!p)
			return 1;
		free(p);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--child-malloc") == 0)
		return child_mode_malloc();
	if (argc > 1 && strcmp(argv[1], "--child-segv") == 0) {
		free(malloc(100));
		*(volatile int *)tu_opaque_ptr((void *)8) = 1; /* the program's own fault */
		return 0;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_require_pcpmalloc("test_badinput");
	tu_watchdog(300);

	expect_abort("free of an interior pointer of a small block", free_interior_small,
		     "pcpmalloc: free(): invalid pointer 0x");
	expect_abort("free of an interior pointer of a large block", free_interior_large,
		     "pcpmalloc: free(): invalid pointer 0x");
	expect_abort("double free, block in the thread cache", double_free_tcache,
		     "pcpmalloc: free(): double free 0x");
	expect_abort("double free, block back in its slab", double_free_after_flush,
		     "pcpmalloc: free(): double free 0x");
	expect_abort("double free of a 256 KiB block", double_free_large, "pcpmalloc: free(): ");
	expect_abort("double free of a 16 MiB block", double_free_huge, "pcpmalloc: free(): ");
	expect_abort("realloc of an interior pointer", realloc_interior,
		     "pcpmalloc: realloc(): invalid pointer 0x");
	expect_abort("free_sized larger than a 64 B block", free_sized_64,
		     "pcpmalloc: free_sized(): size 65 for 0x");
	expect_abort("free_sized larger than a 4 KiB block", free_sized_4k,
		     "pcpmalloc: free_sized(): size 4097 for 0x");
	expect_abort("free_sized larger than a 256 KiB block", free_sized_256k,
		     "pcpmalloc: free_sized(): size 262145 for 0x");
	expect_abort("free_sized larger than a 16 MiB block", free_sized_16m,
		     "pcpmalloc: free_sized(): size ");
	/* not pcpmalloc's memory: glibc's free decides, as without pcpmalloc */
	expect_glibc("free of a stack address", free_stack);
	expect_glibc("free of a static array", free_static);
	expect_glibc("free of a foreign mmap'd page", free_foreign_mmap);

	clean_failures();
	beyond_memory_after_cache();

	char *true_argv[] = {(char *)"/bin/true", NULL};
	check_env_warning("/bin/true", true_argv);
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(n > 0);
	self[n] = '\0';
	char *self_argv[] = {self, (char *)"--child-malloc", NULL};
	check_env_warning("a program that mallocs", self_argv);
	check_prof_fault_signal(self);

	CHECKF(failures == 0, "%d case(s) failed, see above", failures);
	return 0;
}
