/*
 * verbose_target.c - a small program for test_verbose.sh: allocates and frees blocks of every
 * kind (slab objects, a page run, a huge mapping), then, with the argument "huge-fail",
 * asks for 2 GiB (meant to run under ulimit -v, where the mapping fails: NULL + ENOMEM).
 * Prints what it saw on stdout.
 *
 * Built a second time as secure_target (-DSECURE_TARGET) for test_setuid.sh: linked against
 * libpcpmalloc.so (no LD_PRELOAD, which the loader ignores for set-user-ID programs), it prints
 * "secure N pcpmalloc M" instead: N = getauxval(AT_SECURE), M = 1 when pcpmalloc serves malloc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

int main(int argc, char **argv)
{
	size_t sizes[] = {16, 1000, 100000, 8 << 20};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *p = malloc(sizes[i]);
		if (!p)
			return 1;
		memset(p, 1, sizes[i]);
		free(p);
	}
#ifdef SECURE_TARGET
	printf("secure %lu pcpmalloc %d\n", getauxval(AT_SECURE),
	       dlsym(RTLD_DEFAULT, "pcpmalloc_version") != NULL);
	return 0;
#endif
	printf("blocks ok\n");
	if (argc > 1 && strcmp(argv[1], "huge-fail") == 0) {
		errno = 0;
		void *p = malloc((size_t)2 << 30);
		printf("2 GiB: %s, errno %s\n", p ? "allocated" : "NULL", errno == ENOMEM ? "ENOMEM" : "other");
		free(p);
	}
	return 0;
}
