/*
 * test_init_reentry.c - pcpmalloc's initialisation re-entered by the thread that runs it
 * (issue 15, class 4).
 *
 * init_shim.so, preloaded before libpcpmalloc.so, wraps sched_getaffinity, clock_gettime,
 * mmap, sysconf and pthread_key_create - libc functions pcpmalloc called while it
 * initialised - and each wrapper mallocs 4 KiB and calls dlsym (which mallocs an error
 * string).  Those calls came back into malloc on the thread that held the initialisation,
 * which served them from the early area rather than wait for itself; since issue 26 the
 * allocator reaches none of them (system calls, the vDSO clock, glibc's __sysconf and
 * __pthread_key_create), and the test checks that the wrappers count no call.
 *
 * The driver (run without LD_PRELOAD) starts this program again with
 * LD_PRELOAD="init_shim.so libpcpmalloc.so" under alarm(10) (kept across execve): once with
 * the allocator started by the first large malloc, once by the library's constructor
 * (a PCPMALLOC_* variable set).  A hang or a crash is a failure.
 *
 * Usage: test_init_reentry SHIM.so LIBPCPMALLOC.so      (driver)
 *        test_init_reentry --child                    (the program under the shim)
 */
#define _GNU_SOURCE
#include <stdbool.h>

#include "testutil.h"

extern char **environ;

static int child_main(void)
{
	void *big = malloc(100000); /* starts the allocator (too large for the early area) */
	CHECK(big != NULL);
	memset(big, 1, 100000);
	for (int i = 0; i < 1000; i++)
		free(malloc(16 + (size_t)i * 8));
	free(big);
	tu_require_pcpmalloc("test_init_reentry (child)");
	/* the allocator calls none of the program's wrappers (issue 26: a wrapper's dlsym under
	 * the init lock could deadlock against the loader's lock); before, they were called and
	 * their allocations re-entered the initialisation, which served them */
	int *calls = (int *)dlsym(RTLD_DEFAULT, "init_shim_calls");
	CHECKF(calls && *calls == 0, "the allocator called the program's wrappers %d times",
	       calls ? *calls : -1);
	int *failed = (int *)dlsym(RTLD_DEFAULT, "init_shim_failed");
	CHECKF(failed && *failed == 0, "%d of the wrappers' mallocs returned NULL", *failed);
	int *affinity = (int *)dlsym(RTLD_DEFAULT, "init_shim_affinity_calls");
	CHECKF(affinity && *affinity == 0,
	       "the allocator called the program's sched_getaffinity %d times (not the system call)",
	       affinity ? *affinity : -1);
	int *clock = (int *)dlsym(RTLD_DEFAULT, "init_shim_clock_calls");
	CHECKF(clock && *clock == 0, "the allocator called the program's clock_gettime %d times",
	       clock ? *clock : -1);
	int *mmaps = (int *)dlsym(RTLD_DEFAULT, "init_shim_mmap_calls");
	CHECKF(mmaps && *mmaps == 0, "the allocator called the program's mmap %d times",
	       mmaps ? *mmaps : -1);
	printf("test_init_reentry: no wrapped call made by the allocator\n");
	return 0;
}

static bool run(const char *self, const char *shim, const char *lib, const char *extra)
{
	char preload[4096];
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s %s", shim, lib);
	char *env[64];
	int n = 0;
	env[n++] = preload;
	if (extra)
		env[n++] = (char *)extra;
	for (char **e = environ; *e && n < 62; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "PCPMALLOC_", 10))
			env[n++] = *e;
	env[n] = NULL;
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		alarm(10); /* survives execve: SIGALRM (default action) ends a hang */
		char *argv[] = {(char *)self, (char *)"--child", NULL};
		execve(self, argv, env);
		_exit(127);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	char what[256];
	snprintf(what, sizeof(what), "init re-entered from preloaded wrappers (%s)",
		 extra ? extra : "allocator started by malloc");
	return tu_status_ok(what, st);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--child") == 0)
		return child_main();
	CHECKF(argc == 3, "usage: %s SHIM.so LIBPCPMALLOC.so", argv[0]);
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(n > 0);
	self[n] = '\0';
	bool ok = run(self, argv[1], argv[2], NULL);
	ok &= run(self, argv[1], argv[2], "PCPMALLOC_STATS=0");
	CHECK(ok);
	printf("test_init_reentry: ok\n");
	return 0;
}
