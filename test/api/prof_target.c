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
 *
 * The functions are exported (-rdynamic) and not inlined, so google-pprof and the leak
 * report (dladdr) name them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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
	fprintf(stderr, "usage: prof_target ratio DUMP | noleak | fork DIR | threads DUMP | signal | "
			"baddump PATH\n");
	return 2;
}
