/*
 * init_shim.c - a preloaded tool's wrappers around libc functions that pcpmalloc called while
 * it initialised (test_init_reentry, test_init_race); since issue 26 it calls none of them
 * through these names (system calls, glibc's own __ names), so the wrappers count 0 calls.  Loaded before libpcpmalloc.so in LD_PRELOAD, so its
 * definitions win; each wrapper does what tracing tools do: allocates a 4 KiB record buffer,
 * looks its own optional hook up with dlsym (missing: dlsym allocates the error string),
 * finds the real function with dlsym(RTLD_NEXT) and calls it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int init_shim_calls;
int init_shim_failed; /* wrapped calls whose malloc returned NULL */
/* the record escapes, so the compiler keeps the malloc/free pair */
void *volatile init_shim_last_record;

static void *tool_prologue(const char *name)
{
	char *rec = malloc(4096);
	if (!rec)
		init_shim_failed++;
	if (rec) {
		memset(rec, 0, 64);
		strncpy(rec, name, 63);
	}
	(void)dlsym(RTLD_DEFAULT, "init_shim_optional_hook_that_does_not_exist");
	void *real = dlsym(RTLD_NEXT, name);
	init_shim_last_record = rec;
	free(rec);
	__atomic_fetch_add(&init_shim_calls, 1, __ATOMIC_RELAXED);
	return real;
}

/* calls of the sched_getaffinity wrapper: pcpmalloc makes the system call itself (issue 26:
 * under its init lock a wrapper's dlsym waited for the loader's lock), so none come from it */
int init_shim_affinity_calls;

int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *set)
{
	__atomic_fetch_add(&init_shim_affinity_calls, 1, __ATOMIC_RELAXED);
	int (*real)(pid_t, size_t, cpu_set_t *) =
		(int (*)(pid_t, size_t, cpu_set_t *))tool_prologue("sched_getaffinity");
	return real(pid, size, set);
}

/* ... nor of its clock_gettime wrapper: pcpmalloc reads the clock through the vDSO (its lock
 * waits read it, and one waiting for the init lock must not wait in dlsym) */
int init_shim_clock_calls;

int clock_gettime(clockid_t clock, struct timespec *ts)
{
	__atomic_fetch_add(&init_shim_clock_calls, 1, __ATOMIC_RELAXED);
	int (*real)(clockid_t, struct timespec *) =
		(int (*)(clockid_t, struct timespec *))tool_prologue("clock_gettime");
	return real(clock, ts);
}

/* ... nor of its mmap wrapper: pcpmalloc maps its memory with the system call (its start-up
 * maps under the init lock) */
int init_shim_mmap_calls;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	__atomic_fetch_add(&init_shim_mmap_calls, 1, __ATOMIC_RELAXED);
	void *(*real)(void *, size_t, int, int, int, off_t) =
		(void *(*)(void *, size_t, int, int, int, off_t))tool_prologue("mmap");
	return real(addr, len, prot, flags, fd, off);
}

/* sysconf and pthread_key_create: pcpmalloc calls glibc's own __sysconf and
 * __pthread_key_create, which these do not replace */
long sysconf(int name)
{
	long (*real)(int) = (long (*)(int))tool_prologue("sysconf");
	return real(name);
}

int pthread_key_create(pthread_key_t *key, void (*destructor)(void *))
{
	int (*real)(pthread_key_t *, void (*)(void *)) =
		(int (*)(pthread_key_t *, void (*)(void *)))tool_prologue("pthread_key_create");
	return real(key, destructor);
}
