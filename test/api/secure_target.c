/*
 * secure_target.c - for test_setuid.sh: linked against libpcpmalloc.so (no LD_PRELOAD, which
 * the loader ignores for set-user-ID programs).  Allocates and frees blocks of every kind and
 * prints "secure N pcpmalloc M": N = getauxval(AT_SECURE), M = 1 when pcpmalloc serves malloc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

int main(void)
{
	size_t sizes[] = {16, 1000, 100000, 8 << 20};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *p = malloc(sizes[i]);
		if (!p)
			return 1;
		memset(p, 1, sizes[i]);
		free(p);
	}
	printf("secure %lu pcpmalloc %d\n", getauxval(AT_SECURE),
	       dlsym(RTLD_DEFAULT, "pcpmalloc_version") != NULL);
	return 0;
}
