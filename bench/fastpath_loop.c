/*
 * fastpath_loop.c - N malloc+free pairs of one size, for counting instructions per pair
 * with callgrind (bench/fastpath runs it twice with different N and takes the difference,
 * so start-up and teardown cancel out).  Usage: fastpath_loop SIZE N
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s SIZE N\n", argv[0]);
		return 2;
	}
	size_t size = strtoul(argv[1], NULL, 0);
	long n = strtol(argv[2], NULL, 0);
	void *volatile sink;
	/* warm: the first pair fills the thread cache */
	sink = malloc(size);
	free(sink);
	for (long i = 0; i < n; i++) {
		void *p = malloc(size);
		sink = p;
		free(p);
	}
	(void)sink;
	return 0;
}
