/*
 * test_oom_threads.c - mmap failure injected at every depth, from 8 threads (issue 26: the
 * failure path of every entry point, return value and errno exactly as glibc gives them).
 *
 * Linked against pcpcore_test, whose os.c has the injection hook (PCPM_FAULT_INJECT; see
 * os.h): after pcpm_fault_after more mmap/mprotect/mremap/madvise calls, every later one
 * fails with ENOMEM.  For each N from 0 up, a forked child (a fresh allocator: the start-up,
 * the early area's hand-over, the first zone growth, the first slab pages, the CPU sheaves'
 * and barns' metadata, the huge mappings - every depth in turn as N grows) sets the hook and
 * runs 8 threads that each call every entry point on every kind of block (small, paged
 * class, page run, huge mapping; malloc, calloc, realloc growing and shrinking,
 * reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc) with errno set to
 * a marker before each call:
 *  - a failure is NULL (posix_memalign: ENOMEM, its output untouched) with errno ENOMEM, and
 *    a failed realloc keeps its block and its contents;
 *  - a success leaves the marker in errno (a failed mapping the allocator got round must not
 *    leak its ENOMEM), and its block holds what was written into it until it is freed.
 * Then memory comes back (hook off): every entry point succeeds again, and once everything
 * is freed and trimmed no page and no mapping is left in use (mallinfo: no leak).  A child
 * that aborts or hangs (alarm) fails the test.  N runs 0, 1, 2, 3, 4, 6, 9, ... up to MAX_N
 * (400: 16 children), and at least 10,000 injected failures must have been counted.
 *
 * Usage: test_oom_threads [MAX_N]
 */
#define _GNU_SOURCE
#include "api.h"
#include "trim.h"
#include "alloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 8
#define ROUNDS 6
#define KEEP 16
#define MARKER 4321

struct shared {
	_Atomic long wrong, failures, calls, hits;
	char why[256];
};
static struct shared *sh;

static void wrong(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void wrong(const char *fmt, ...)
{
	if (atomic_fetch_add(&sh->wrong, 1) == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(sh->why, sizeof(sh->why), fmt, ap);
		va_end(ap);
	}
}

struct blk {
	unsigned char *p;
	size_t n;
	unsigned char tag;
};

static void fill(struct blk *b)
{
	size_t k = b->n < 64 ? b->n : 64;
	memset(b->p, b->tag, k);
	memset(b->p + b->n - k, b->tag, k);
}

static void verify(const struct blk *b, const char *what)
{
	size_t k = b->n < 64 ? b->n : 64;
	for (size_t i = 0; i < k; i++)
		if (b->p[i] != b->tag || b->p[b->n - 1 - i] != b->tag) {
			wrong("%s: block %p of %zu bytes changed", what, (void *)b->p, b->n);
			return;
		}
}

static const size_t sizes[] = {24, 700, 20000, 100000, 6u << 20};

/* The result of one call: p (NULL: failed), err (errno after it); true when it was right. */
static bool judge(const char *call, size_t n, void *p, int err)
{
	atomic_fetch_add(&sh->calls, 1);
	if (!p) {
		atomic_fetch_add(&sh->failures, 1);
		if (err != ENOMEM) {
			wrong("%s(%zu) failed with errno %d, not ENOMEM", call, n, err);
			return false;
		}
	} else if (err != MARKER) {
		wrong("%s(%zu) succeeded but changed errno to %d", call, n, err);
		return false;
	}
	return true;
}

static void *worker(void *arg)
{
	unsigned tag = (unsigned)(uintptr_t)arg;
	struct blk keep[KEEP] = {{0}};
	unsigned nk = 0;
	for (int r = 0; r < ROUNDS; r++) {
		for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			for (int op = 0; op < 9; op++) {
				size_t n = sizes[s] + (size_t)op * 8;
				void *p = NULL, *out = (void *)0x5a5a;
				const char *call = "?";
				errno = MARKER;
				switch (op) {
				case 0: call = "malloc"; p = pcpm_malloc(n); break;
				case 1: call = "calloc"; p = pcpm_calloc(1, n); break;
				case 2: call = "posix_memalign"; {
					int rc = pcpm_posix_memalign(&out, 64, n);
					int e = errno;
					if (rc && (rc != ENOMEM || out != (void *)0x5a5a))
						wrong("posix_memalign(%zu): %d, out %p", n, rc, out);
					p = rc ? NULL : out;
					errno = e;
					break;
				}
				case 3: call = "aligned_alloc"; p = pcpm_aligned_alloc(4096, n); break;
				case 4: call = "memalign"; p = pcpm_memalign(256, n); break;
				case 5: call = "valloc"; p = pcpm_valloc(n); break;
				case 6: call = "pvalloc"; p = pcpm_pvalloc(n); break;
				case 7: call = "realloc(NULL)"; p = pcpm_realloc(NULL, n); break;
				default: call = "reallocarray(NULL)"; p = pcpm_reallocarray(NULL, 1, n); break;
				}
				int err = errno;
				if (!judge(call, n, p, err) || !p)
					continue;
				if (op == 1)
					for (size_t i = 0; i < n; i += 4096)
						if (((unsigned char *)p)[i])
							wrong("calloc(%zu): not zero at %zu", n, i);
				struct blk b = {p, n, (unsigned char)(tag * 16 + (unsigned)op + 1)};
				fill(&b);
				/* grow or shrink it: a failure keeps the block as it was */
				size_t m = (op & 1) ? n * 3 : n / 2 + 1;
				errno = MARKER;
				void *q = pcpm_realloc(b.p, m);
				err = errno;
				if (judge("realloc", m, q, err) && q) {
					/* the head it kept: the first 64 bytes (or all of it) */
					struct blk head = {q, m < 64 ? m : 64, b.tag};
					if (n < 64)
						head.n = m < n ? m : n;
					verify(&head, "realloc");
					b.p = q;
					b.n = m;
					fill(&b);
				} else {
					verify(&b, "failed realloc");
				}
				if (keep[nk].p) {
					verify(&keep[nk], "kept block");
					pcpm_free(keep[nk].p);
				}
				keep[nk] = b;
				nk = (nk + 1) % KEEP;
			}
		}
	}
	for (unsigned i = 0; i < KEEP; i++)
		if (keep[i].p) {
			verify(&keep[i], "kept block");
			pcpm_free(keep[i].p);
		}
	return NULL;
}

static void run_threads(void)
{
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) != 0) {
			wrong("pthread_create failed");
			return;
		}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
}

/* The child: 0 = passed (the counts are in *sh), 3 = the hook never fired. */
static int child(long n)
{
	alarm(60);
	pcpm_fault_count = -1;
	pcpm_fault_after = n;
	run_threads();
	long hits = pcpm_fault_hits;
	atomic_fetch_add(&sh->hits, hits);
	/* memory is back: everything works and nothing leaked */
	pcpm_fault_after = -1;
	long failures = atomic_load(&sh->failures);
	run_threads();
	if (atomic_load(&sh->failures) != failures)
		wrong("%ld calls failed after memory came back", atomic_load(&sh->failures) - failures);
	pcpm_trim(0);
	struct pcpm_mallinfo mi;
	pcpm_mallinfo(&mi);
	if (mi.uordblks || mi.hblks || mi.hblkhd)
		wrong("leak: %zu bytes in use, %zu huge mappings (%zu bytes) after everything was "
		      "freed",
		      mi.uordblks, mi.hblks, mi.hblkhd);
	return hits ? 0 : 3;
}

int main(int argc, char **argv)
{
	long max_n = argc > 1 ? atol(argv[1]) : 400;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	long n, last = 0, children = 0;
	/* N = 0, 1, 2, 3, 4, 6, 9, 13, ...: every depth of the start-up one by one, then the
	 * later ones (the zone's growths, more slabs and sheaves) at growing distances */
	for (n = 0; n <= max_n; n = n < 4 ? n + 1 : n + n / 2) {
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			_exit(child(n));
		int st;
		if (waitpid(pid, &st, 0) != pid) {
			perror("waitpid");
			return 1;
		}
		children++;
		last = n;
		if (atomic_load(&sh->wrong)) {
			fprintf(stderr, "test_oom_threads: N=%ld: %ld wrong results; the first: %s\n", n,
				atomic_load(&sh->wrong), sh->why);
			return 1;
		}
		if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3)) {
			fprintf(stderr, "test_oom_threads: N=%ld: child %s %d\n", n,
				WIFSIGNALED(st) ? "killed by signal" : "exit status",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			return 1;
		}
		if (WEXITSTATUS(st) == 3)
			break; /* the threads made fewer than N calls: every depth was covered */
	}
	printf("test_oom_threads: %ld children (N = 0..%ld), %d threads each: %ld calls, %ld "
	       "failed (%ld injected mmap failures), 0 wrong, no leak\n",
	       children, last, THREADS, atomic_load(&sh->calls), atomic_load(&sh->failures),
	       atomic_load(&sh->hits));
	if (atomic_load(&sh->hits) < 10000) {
		fprintf(stderr, "test_oom_threads: only %ld injected failures\n",
			atomic_load(&sh->hits));
		return 1;
	}
	return 0;
}
