/*
 * test_fork_stdio.c - fork() while other threads use stdio (issue 15, class 1).
 *
 * Three threads read a file of long lines with getline() (each line a fresh buffer that
 * getline grows with realloc to 300 KiB: page runs from the zone), opening and closing the
 * file again and again; one thread calls fflush(NULL) in a loop; the main thread forks (the
 * child does a malloc and _exit(0)).  glibc's fork takes its stdio list lock after the
 * pthread_atfork prepare handlers: an allocator whose prepare handler holds its locks meanwhile
 * deadlocks against a fflush(NULL) thread (stdio list lock held, waiting for a FILE lock) and a
 * getline thread (FILE lock held, waiting in realloc for the allocator).  glibc's own malloc
 * takes its locks inside fork after the stdio lock, and so must pcpmalloc.
 *
 * The whole case runs in a child under a 20 s deadline: a hang is a failure, not a stuck run.
 *
 * Usage: test_fork_stdio [short|long]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "testutil.h"

#define READERS 3
#define DEADLINE_S 20

static char path[] = "/tmp/pcpm_fork_stdio_XXXXXX";
static atomic_bool stop;
static atomic_ulong lines_read, flushes;
static double run_s = 2.0;

static void *reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		FILE *f = fopen(path, "r");
		CHECK(f != NULL);
		for (;;) {
			char *line = NULL;
			size_t cap = 0;
			ssize_t n = getline(&line, &cap, f);
			free(line);
			if (n < 0 || atomic_load(&stop))
				break;
			atomic_fetch_add(&lines_read, 1);
		}
		fclose(f);
	}
	return NULL;
}

static void *flusher(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		fflush(NULL);
		atomic_fetch_add(&flushes, 1);
	}
	return NULL;
}

static void forking_case(void)
{
	pthread_t r[READERS], fl;
	for (int i = 0; i < READERS; i++)
		CHECK(pthread_create(&r[i], NULL, reader, NULL) == 0);
	CHECK(pthread_create(&fl, NULL, flusher, NULL) == 0);
	double end = tu_now() + run_s;
	int forks = 0;
	while (tu_now() < end || forks < 20) {
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			void *p = malloc(100000);
			_exit(p ? 0 : 1);
		}
		int st;
		CHECK(waitpid(pid, &st, 0) == pid);
		CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
		forks++;
	}
	atomic_store(&stop, true);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	pthread_join(fl, NULL);
	printf("test_fork_stdio: %d forks, %lu lines read, %lu fflush(NULL)\n", forks,
	       atomic_load(&lines_read), atomic_load(&flushes));
	CHECK(atomic_load(&lines_read) > 0 && atomic_load(&flushes) > 0);
}

int main(int argc, char **argv)
{
	tu_require_pcpmalloc("test_fork_stdio");
	if (tu_long_mode(argc, argv))
		run_s = 20.0;
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	FILE *f = fdopen(fd, "w");
	CHECK(f != NULL);
	uint64_t rng = tu_seed_from_env();
	/* 40 lines of 1 B .. 300 KiB: getline grows its buffer through every size range */
	for (int i = 0; i < 40; i++) {
		size_t len = tu_rand_range(&rng, 1, 300 * 1024);
		for (size_t k = 0; k < len; k++)
			fputc('a' + (int)(k % 26), f);
		fputc('\n', f);
	}
	CHECK(fclose(f) == 0);
	int st = tu_run_deadline(forking_case, DEADLINE_S);
	unlink(path);
	CHECK(tu_status_ok("fork while threads use stdio", st));
	printf("test_fork_stdio: ok\n");
	return 0;
}
