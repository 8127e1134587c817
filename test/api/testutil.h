/*
 * testutil.h - helpers shared by the API tests in test/api/.
 *
 * Every API test runs under LD_PRELOAD=libpcpmalloc.so and must prove it: tu_require_pcpmalloc()
 * looks pcpmalloc_version() up with dlsym(RTLD_DEFAULT) and fails the test when it is absent.
 * PCPMALLOC_TEST_ALLOW_GLIBC=1 turns that failure into a warning; it exists only to debug the
 * tests themselves against glibc and is never set by meson.
 *
 * CHECK() and friends print file:line and the failing expression, then _exit(1): a failing
 * test may have other threads running, and exit() would run atexit handlers and flush stdio
 * under their feet.
 *
 * Usable from C (gnu11) and C++.
 */
#ifndef PCPMALLOC_TESTUTIL_H
#define PCPMALLOC_TESTUTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TU_KIB ((size_t)1 << 10)
#define TU_MIB ((size_t)1 << 20)

/* Advances *n by the return value of snprintf, clamped to the room left in a buffer of size len. */
static inline void tu_advance(size_t *n, int m, size_t len)
{
	if (m > 0)
		*n = *n + (size_t)m < len ? *n + (size_t)m : len - 1;
}

/* Prints "file:line: CHECK failed: expr (details)" with write(2) and exits 1. */
__attribute__((noreturn)) static inline void tu_vfail(const char *file, int line, const char *expr,
						      const char *fmt, va_list ap)
{
	char msg[1024];
	size_t n = 0;
	/* Room is kept for the closing ")\n". */
	const size_t len = sizeof(msg) - 3;
	tu_advance(&n, snprintf(msg, len, "%s:%d: CHECK failed: %s", file, line, expr), len);
	if (fmt) {
		tu_advance(&n, snprintf(msg + n, len - n, " ("), len);
		tu_advance(&n, vsnprintf(msg + n, len - n, fmt, ap), len);
		msg[n++] = ')';
	}
	msg[n++] = '\n';
	/* write(2), not stdio: no lock another thread could hold, no allocation. */
	ssize_t unused = write(2, msg, n);
	(void)unused;
	_exit(1);
}

__attribute__((noreturn, format(printf, 4, 5))) static inline void
tu_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tu_vfail(file, line, expr, fmt, ap);
}

__attribute__((noreturn)) static inline void tu_fail0(const char *file, int line, const char *expr)
{
	va_list ap;
	memset(&ap, 0, sizeof(ap));
	tu_vfail(file, line, expr, NULL, ap);
}

/* CHECK(expr): fails the test when expr is false. */
#define CHECK(expr)                                                                       \
	do {                                                                              \
		if (!(expr))                                                              \
			tu_fail0(__FILE__, __LINE__, #expr);                              \
	} while (0)

/* CHECKF(expr, fmt, ...): the same, with values printed after the expression. */
#define CHECKF(expr, ...)                                                                 \
	do {                                                                              \
		if (!(expr))                                                              \
			tu_fail(__FILE__, __LINE__, #expr, __VA_ARGS__);                  \
	} while (0)

/* CHECK_EQ(a, b): integer equality, both values printed on failure. */
#define CHECK_EQ(a, b)                                                                    \
	do {                                                                              \
		intmax_t tu_a_ = (intmax_t)(a), tu_b_ = (intmax_t)(b);                   \
		if (tu_a_ != tu_b_)                                                       \
			tu_fail(__FILE__, __LINE__, #a " == " #b, "%jd != %jd", tu_a_,    \
				tu_b_);                                                   \
	} while (0)

/* CHECK_ALIGNED(p, a): p is a multiple of a (a power of two). */
#define CHECK_ALIGNED(p, a)                                                               \
	do {                                                                              \
		uintptr_t tu_p_ = (uintptr_t)(p);                                         \
		size_t tu_al_ = (size_t)(a);                                              \
		if (tu_p_ & (tu_al_ - 1))                                                 \
			tu_fail(__FILE__, __LINE__, #p " aligned to " #a,                 \
				"%p is not %zu-aligned", (void *)tu_p_, tu_al_);         \
	} while (0)

/* Hides a constant from the optimiser, so that malloc(SIZE_MAX) and friends really run. */
static inline size_t tu_opaque(size_t v)
{
	volatile size_t x = v;
	return x;
}

static inline void *tu_opaque_ptr(void *p)
{
	void *volatile x = p;
	return x;
}

static inline double tu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Field `field` of /proc/self/statm (0: program size = VmSize, 1: resident), in bytes; -1 on
 * error. */
static inline long long tu_statm_bytes(int field)
{
	char buf[256];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	unsigned long long v[2];
	if (sscanf(buf, "%llu %llu", &v[0], &v[1]) != 2)
		return -1;
	return (long long)v[field] * sysconf(_SC_PAGESIZE);
}

/* Resident set size (bytes); -1 on error. */
static inline long long tu_rss_bytes(void)
{
	return tu_statm_bytes(1);
}

/* Address space mapped (VmSize, bytes); -1 on error. */
static inline long long tu_vm_bytes(void)
{
	return tu_statm_bytes(0);
}

static void tu_watchdog_fired(int sig)
{
	static const char msg[] = "watchdog: the test did not finish in time (deadlock?)\n";
	(void)sig;
	ssize_t unused = write(2, msg, sizeof(msg) - 1);
	(void)unused;
	_exit(3);
}

/* Fails the test (exit 3, with a message) if it still runs after the given seconds. */
static inline void tu_watchdog(unsigned seconds)
{
	signal(SIGALRM, tu_watchdog_fired);
	alarm(seconds);
}

/* Named cases: argv[1] naming one case runs it alone; anything else (meson's "short" or
 * "long", nothing) runs them all, in order.  The array ends with a NULL name. */
struct tu_case {
	const char *name;
	void (*fn)(void);
};

static inline void tu_run_cases(int argc, char **argv, const struct tu_case *cases)
{
	const char *which = argc > 1 ? argv[1] : "";
	bool one = false;
	for (const struct tu_case *c = cases; c->name; c++)
		one |= !strcmp(which, c->name);
	for (const struct tu_case *c = cases; c->name; c++)
		if (!one || !strcmp(which, c->name))
			c->fn();
}

/* --- Content patterns ---------------------------------------------------------------------
 * Byte i of a block filled with seed s is byte (i % 8) of the 64-bit word s ^ ((i / 8) * K),
 * little-endian: any prefix of a filled block can be checked at another address (realloc). */

static inline uint64_t tu_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* A per-block seed from its address and a serial number. */
static inline uint64_t tu_seed(const void *p, uint64_t serial)
{
	return tu_mix64((uint64_t)(uintptr_t)p ^ (serial * 0x9e3779b97f4a7c15ULL) ^ 0x5bd1e995ULL);
}

static inline uint64_t tu_word(uint64_t seed, size_t k)
{
	return seed ^ ((uint64_t)k * 0x9e3779b97f4a7c15ULL);
}

static inline void tu_fill(void *p, size_t n, uint64_t seed)
{
	unsigned char *b = (unsigned char *)p;
	size_t k, words = n / 8;
	for (k = 0; k < words; k++) {
		uint64_t w = tu_word(seed, k);
		memcpy(b + 8 * k, &w, 8);
	}
	if (n % 8) {
		uint64_t w = tu_word(seed, words);
		memcpy(b + 8 * words, &w, n % 8);
	}
}

/* Offset of the first byte of p[0..n) that differs from the pattern, or SIZE_MAX. */
static inline size_t tu_verify(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *b = (const unsigned char *)p;
	size_t k, words = n / 8;
	for (k = 0; k < words; k++) {
		uint64_t w = tu_word(seed, k), got;
		memcpy(&got, b + 8 * k, 8);
		if (got != w) {
			size_t i = 0;
			while (((got >> (8 * i)) & 0xff) == ((w >> (8 * i)) & 0xff))
				i++;
			return 8 * k + i;
		}
	}
	if (n % 8) {
		uint64_t w = tu_word(seed, words);
		size_t i;
		for (i = 0; i < n % 8; i++)
			if (b[8 * words + i] != (unsigned char)(w >> (8 * i)))
				return 8 * words + i;
	}
	return SIZE_MAX;
}

/* Offset of the first nonzero byte of p[0..n), or SIZE_MAX. */
static inline size_t tu_first_nonzero(const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *)p;
	size_t i = 0;
	for (; i < n && ((uintptr_t)(b + i) & 7); i++)
		if (b[i])
			return i;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		if (w)
			break;
	}
	for (; i < n; i++)
		if (b[i])
			return i;
	return SIZE_MAX;
}

/* --- Random numbers: xorshift64*, one state per thread ----------------------------------- */

static inline uint64_t tu_rand(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* Uniform in [lo, hi]. */
static inline size_t tu_rand_range(uint64_t *state, size_t lo, size_t hi)
{
	return lo + (size_t)(tu_rand(state) % (uint64_t)(hi - lo + 1));
}

/* --- Death tests: a case runs in a forked child ------------------------------------------
 * tu_run_child() forks; the child gets no core file, a 20 s alarm, its stderr on one pipe and
 * tu_report_fd on another, then runs fn.  A case calls tu_report_pointer() with the pointer it
 * is about to misuse, so that the parent can match it against the "pcpmalloc: " line.  The
 * parent reads both pipes to EOF and waits for the child's status. */

static int tu_report_fd = -1;

/* Tells the parent (on tu_report_fd) which pointer the child misuses next. */
static inline void tu_report_pointer(const void *p)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%p\n", p);
	ssize_t w = write(tu_report_fd, buf, (size_t)n);
	(void)w;
}

struct tu_child_result {
	int status;     /* from waitpid */
	char err[8192]; /* stderr of the child, NUL-terminated */
	size_t err_len;
	char ptr[64]; /* what tu_report_pointer wrote */
};

/* Reads both pipes to EOF (a child that hangs is killed by its alarm); fails the test if the
 * child stays silent for 30 s. */
static inline void tu_child_drain(int err_fd, int ptr_fd, struct tu_child_result *r)
{
	struct pollfd pf[2];
	pf[0].fd = err_fd;
	pf[1].fd = ptr_fd;
	pf[0].events = pf[1].events = POLLIN;
	size_t ptr_len = 0;
	int open_fds = 2;
	while (open_fds > 0) {
		int rc = poll(pf, 2, 30000);
		CHECKF(rc > 0, "%s", rc == 0 ? "child silent for 30 s" : strerror(errno));
		for (int i = 0; i < 2; i++) {
			if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char *dst = i == 0 ? r->err + r->err_len : r->ptr + ptr_len;
			size_t room = i == 0 ? sizeof(r->err) - 1 - r->err_len
					     : sizeof(r->ptr) - 1 - ptr_len;
			char scratch[256];
			ssize_t n = read(pf[i].fd, room ? dst : scratch, room ? room : sizeof(scratch));
			if (n <= 0) {
				close(pf[i].fd);
				pf[i].fd = -1;
				open_fds--;
				continue;
			}
			if (room) {
				if (i == 0)
					r->err_len += (size_t)n;
				else
					ptr_len += (size_t)n;
			}
		}
	}
	r->err[r->err_len] = '\0';
	r->ptr[ptr_len] = '\0';
}

/*
 * Runs fn in a forked child and fills *r.  When fn returns, the child writes returned_msg (if
 * not NULL) to its stderr and exits with returned_status.
 */
static inline void tu_run_child(void (*fn)(void), struct tu_child_result *r, int returned_status,
				const char *returned_msg)
{
	int err_pipe[2], ptr_pipe[2];
	CHECK(pipe(err_pipe) == 0 && pipe(ptr_pipe) == 0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* No core files for the expected aborts; no hang either. */
		struct rlimit no_core = {0, 0};
		setrlimit(RLIMIT_CORE, &no_core);
		signal(SIGALRM, SIG_DFL);
		alarm(20);
		close(err_pipe[0]);
		close(ptr_pipe[0]);
		dup2(err_pipe[1], 2);
		close(err_pipe[1]);
		tu_report_fd = ptr_pipe[1];
		fn();
		if (returned_msg) {
			ssize_t w = write(2, returned_msg, strlen(returned_msg));
			(void)w;
		}
		_exit(returned_status);
	}
	close(err_pipe[1]);
	close(ptr_pipe[1]);
	memset(r, 0, sizeof(*r));
	tu_child_drain(err_pipe[0], ptr_pipe[0], r);
	CHECK(waitpid(pid, &r->status, 0) == pid);
}

/* Counts the lines of text that start with prefix; returns the first in *first (or NULL). */
static inline int tu_lines_starting(const char *text, const char *prefix, const char **first)
{
	int n = 0;
	*first = NULL;
	for (const char *line = text; line && *line;) {
		if (strncmp(line, prefix, strlen(prefix)) == 0) {
			if (!*first)
				*first = line;
			n++;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return n;
}

/* --- A case with a deadline ----------------------------------------------------------------
 * tu_run_deadline() runs fn in a forked child under alarm(seconds) (SIGALRM at its default
 * action: a hang kills the child) and returns its waitpid status; fn returning is exit 0.
 * tu_status_ok() says whether such a status is a clean exit 0 and prints why not. */
static inline int tu_run_deadline(void (*fn)(void), unsigned seconds)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		signal(SIGALRM, SIG_DFL);
		alarm(seconds);
		fn();
		fflush(stdout);
		_exit(0);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	return status;
}

static inline int tu_status_ok(const char *what, int status)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 1;
	if (WIFSIGNALED(status))
		fprintf(stderr, "%s: killed by signal %d%s\n", what, WTERMSIG(status),
			WTERMSIG(status) == SIGALRM ? " (deadline: a hang)" : "");
	else
		fprintf(stderr, "%s: exit status %d\n", what, WEXITSTATUS(status));
	return 0;
}

/* Threads of this process: the entries of /proc/self/task (read with getdents64, no
 * allocation); -1 on error. */
static inline int tu_nr_tasks(void)
{
	char buf[4096];
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int n = 0;
	for (;;) {
		long got = syscall(SYS_getdents64, fd, buf, sizeof(buf));
		if (got <= 0) {
			if (got < 0)
				n = -1;
			break;
		}
		for (long off = 0; off < got;) {
			/* struct linux_dirent64: d_ino, d_off, d_reclen (at 16), d_type, d_name (19) */
			unsigned short reclen;
			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			if (buf[off + 19] != '.')
				n++;
			off += reclen;
		}
	}
	close(fd);
	return n;
}

/* --- Proof that pcpmalloc is the allocator ------------------------------------------------ */

struct tu_pcpmalloc {
	const char *(*version)(void);
	size_t (*stats_json)(char *buf, size_t len);
	long long (*stat)(const char *name);
};

static struct tu_pcpmalloc tu_pcp;

static inline int tu_glibc_allowed(void)
{
	const char *e = getenv("PCPMALLOC_TEST_ALLOW_GLIBC");
	return e && strcmp(e, "1") == 0;
}

/*
 * Fails the test unless pcpmalloc's public functions are found in the process (it was
 * preloaded); fills tu_pcp.  Prints the version on stdout under the test name.
 */
static inline void tu_require_pcpmalloc(const char *test)
{
	tu_pcp.version = (const char *(*)(void))dlsym(RTLD_DEFAULT, "pcpmalloc_version");
	tu_pcp.stats_json = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "pcpmalloc_stats_json");
	tu_pcp.stat = (long long (*)(const char *))dlsym(RTLD_DEFAULT, "pcpmalloc_stat");
	if (!tu_pcp.version && tu_glibc_allowed()) {
		fprintf(stderr, "%s: WARNING: pcpmalloc not loaded, running on the system malloc "
				"(PCPMALLOC_TEST_ALLOW_GLIBC=1)\n",
			test);
		return;
	}
	CHECKF(tu_pcp.version != NULL, "pcpmalloc_version not found: run with "
				       "LD_PRELOAD=libpcpmalloc.so; LD_PRELOAD=%s",
	       getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "(unset)");
	CHECK(tu_pcp.stats_json != NULL);
	CHECK(tu_pcp.stat != NULL);
	const char *v = tu_pcp.version();
	CHECK(v != NULL && v[0] != '\0');
	printf("%s: running on pcpmalloc %s\n", test, v);
	fflush(stdout);
}

/* One pcpmalloc counter; -1 when running on glibc (debug mode only) or the name is unknown. */
static inline long long tu_stat(const char *name)
{
	return tu_pcp.stat ? tu_pcp.stat(name) : -1;
}

/* malloc and free calls so far (the lock-per-1000-calls figures' denominator). */
static inline long long tu_calls(void)
{
	return tu_stat("malloc_calls") + tu_stat("free_calls");
}

/* argv[1] == "long" or PCPMALLOC_TEST_LONG=1 selects the long mode. */
static inline int tu_long_mode(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "long") == 0)
		return 1;
	if (argc > 1 && strcmp(argv[1], "short") == 0)
		return 0;
	const char *e = getenv("PCPMALLOC_TEST_LONG");
	return e && strcmp(e, "1") == 0;
}

/* Seed for a test's random numbers: PCPMALLOC_TEST_SEED if set, else from the clock. */
static inline uint64_t tu_seed_from_env(void)
{
	const char *e = getenv("PCPMALLOC_TEST_SEED");
	if (e && *e)
		return strtoull(e, NULL, 0) | 1;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return tu_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid()) | 1;
}

#ifdef __cplusplus
}
#endif
#endif
