/*
 * verbose_target.c - a small program for test_verbose.sh: allocates and frees blocks of every
 * kind (slab objects, a page run, a huge mapping), then, with the argument "huge-fail",
 * asks for 2 GiB (meant to run under ulimit -v, where the mapping fails: NULL + ENOMEM).
 * Prints what it saw on stdout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	printf("blocks ok\n");
	if (argc > 1 && strcmp(argv[1], "huge-fail") == 0) {
		errno = 0;
		void *p = malloc((size_t)2 << 30);
		printf("2 GiB: %s, errno %s\n", p ? "allocated" : "NULL", errno == ENOMEM ? "ENOMEM" : "other");
		free(p);
	}
	return 0;
}
