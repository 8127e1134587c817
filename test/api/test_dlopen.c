/*
 * test_dlopen.c - libpcpmalloc.so dlopen'ed by a program that did not preload it (issue 15,
 * class 7).
 *
 * The library's initial-exec TLS (the PT_TLS segment, read from its ELF program headers)
 * must be a few words: glibc keeps only a small surplus of static TLS for libraries loaded
 * after start-up, and a larger block fails dlopen with "cannot allocate memory in static TLS
 * block".  Then the dlopen itself, and the library's malloc/free/realloc used through dlsym
 * from this thread and another one (per-thread state set up on first use).
 *
 * Runs WITHOUT LD_PRELOAD.  Usage: test_dlopen LIBPCPMALLOC.so
 */
#define _GNU_SOURCE
#include <elf.h>
#include <pthread.h>

#include "testutil.h"

#define TLS_MAX 64 /* bytes: a pointer and a few words */

static void *(*p_malloc)(size_t);
static void (*p_free)(void *);
static void *(*p_realloc)(void *, size_t);

static long tls_size(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECKF(fd >= 0, "%s: %s", path, strerror(errno));
	Elf64_Ehdr eh;
	CHECK(pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh));
	CHECK(memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64);
	long tls = 0;
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		CHECK(pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (Elf64_Off)i * eh.e_phentsize)) ==
		      (ssize_t)sizeof(ph));
		if (ph.p_type == PT_TLS)
			tls = (long)ph.p_memsz;
	}
	close(fd);
	return tls;
}

static void use_library(void)
{
	for (int i = 0; i < 1000; i++) {
		size_t n = 16 + (size_t)i * 97;
		char *p = p_malloc(n);
		CHECK(p != NULL);
		memset(p, 7, n);
		p = p_realloc(p, 2 * n);
		CHECK(p != NULL && p[n - 1] == 7);
		p_free(p);
	}
}

static void *thread_fn(void *arg)
{
	(void)arg;
	use_library();
	return NULL;
}

int main(int argc, char **argv)
{
	CHECKF(argc >= 2, "usage: %s LIBPCPMALLOC.so", argv[0]);
	CHECKF(dlsym(RTLD_DEFAULT, "pcpmalloc_version") == NULL,
	       "pcpmalloc is preloaded: this test must run without LD_PRELOAD");
	tu_watchdog(60);
	long tls = tls_size(argv[1]);
	printf("test_dlopen: PT_TLS of %s: %ld bytes\n", argv[1], tls);
	fflush(stdout);
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	CHECKF(h != NULL, "dlopen: %s", dlerror());
	const char *(*version)(void) = (const char *(*)(void))dlsym(h, "pcpmalloc_version");
	p_malloc = (void *(*)(size_t))dlsym(h, "malloc");
	p_free = (void (*)(void *))dlsym(h, "free");
	p_realloc = (void *(*)(void *, size_t))dlsym(h, "realloc");
	CHECK(version && p_malloc && p_free && p_realloc);
	printf("test_dlopen: dlopen'ed pcpmalloc %s\n", version());
	use_library();
	pthread_t t;
	CHECK(pthread_create(&t, NULL, thread_fn, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECKF(tls <= TLS_MAX, "initial-exec TLS of %ld bytes (at most %d)", tls, TLS_MAX);
	printf("test_dlopen: ok\n");
	return 0;
}
