/*
 * test_oom.c - out of memory: the Nth virtual-memory call of the allocator fails.
 *
 * Linked against pcpcore_test, whose os.c has the injection hook (PCPM_FAULT_INJECT; see
 * os.h): after pcpm_fault_after more mmap/mprotect/mremap/madvise calls, the next
 * pcpm_fault_count fail (-1: all, "memory is gone"; 1: one transient failure).
 *
 * For each N from 0 until the program makes fewer than N calls, a forked child (a fresh
 * allocator, so initialisation and the first arena growth are covered too) sets the hook,
 * runs the operation program made of the checked-in seed corpus - every API: malloc,
 * calloc, realloc (huge ones through mremap), reallocarray, posix_memalign, aligned_alloc,
 * memalign, valloc, pvalloc, free, free_sized, malloc_usable_size, malloc_trim (madvise) -
 * under the shadow model of fuzz_ops.c with NULL + ENOMEM allowed for any size; EINVAL,
 * alignment, contents, zeroed calloc and overlap are checked as always, and a failed
 * realloc must keep its block.  Then memory comes back (hook off): the same program must
 * succeed in full, and once everything is freed and trimmed no page and no mapping may be
 * left (no leak).  A child that aborts or deadlocks (alarm) fails the test.
 *
 * Usage: test_oom CORPUS_DIR [MAX_N]
 */
#define _GNU_SOURCE
#include "fuzz_ops.h"
#include "api.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint8_t prog[1 << 16];
static size_t prog_len;

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static void load_seeds(const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, by_name);
	if (n < 0) {
		perror(dir);
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		if (!strncmp(names[i]->d_name, "seed-", 5)) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
			FILE *f = fopen(path, "rb");
			if (!f) {
				perror(path);
				exit(1);
			}
			prog_len += fread(prog + prog_len, 1, sizeof(prog) - prog_len, f);
			fclose(f);
		}
		free(names[i]);
	}
	free(names);
	if (!prog_len) {
		fprintf(stderr, "test_oom: no seed-* inputs in %s\n", dir);
		exit(1);
	}
}

/* The child: 0 = passed, 3 = the hook never fired (N beyond the program's calls). */
static int child(long n, long count)
{
	static struct fz_ctx ctx;
	alarm(60);
	pcpm_fault_count = count;
	pcpm_fault_after = n;
	ctx.oom_ok = 1;
	ctx.allow_trim = 1;
	fz_run(&ctx, prog, prog_len);
	pcpm_trim(0);
	long hits = pcpm_fault_hits;
	/* memory is back */
	pcpm_fault_after = -1;
	ctx.oom_ok = 0;
	fz_run(&ctx, prog, prog_len);
	fz_check_empty("after the out-of-memory run");
	return hits ? 0 : 3;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_oom CORPUS_DIR [MAX_N]\n");
		return 2;
	}
	load_seeds(argv[1]);
	long max_n = argc > 2 ? atol(argv[2]) : 5000;
	static const long counts[] = {-1, 1};
	for (unsigned m = 0; m < 2; m++) {
		long n;
		for (n = 0; n <= max_n; n++) {
			fflush(NULL);
			pid_t pid = fork();
			if (pid < 0) {
				perror("fork");
				return 1;
			}
			if (pid == 0)
				_exit(child(n, counts[m]));
			int st;
			if (waitpid(pid, &st, 0) != pid) {
				perror("waitpid");
				return 1;
			}
			if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
				break;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr,
					"test_oom: FAIL: with VM call %ld failing (%s), the child %s %d\n",
					n, counts[m] < 0 ? "and all after it" : "once",
					WIFSIGNALED(st) ? "died of signal" : "exited with",
					WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
				return 1;
			}
		}
		if (n > max_n) {
			fprintf(stderr, "test_oom: the program still made VM calls after %ld\n", max_n);
			return 1;
		}
		printf("test_oom: VM call N failing %s, N = 0..%ld: every API returned NULL/ENOMEM "
		       "or EINVAL as documented, memory came back, nothing leaked\n",
		       counts[m] < 0 ? "and all after it" : "once", n - 1);
		if (n < 10) {
			fprintf(stderr, "test_oom: only %ld VM calls: the program exercised too little\n", n);
			return 1;
		}
	}
	return 0;
}
