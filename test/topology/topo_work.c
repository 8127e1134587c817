/* topo_work.c - allocator work for the topology tests: "small" does a few allocations
 * (a short-lived process), "busy" moves 32 MiB at a time through the pcps for 150 ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
	int busy = argc > 1 && strcmp(argv[1], "busy") == 0;
	void *keep[64] = { 0 };
	if (!busy) {
		for (int i = 0; i < 64; i++)
			if (!(keep[i] = malloc(100 + i)))
				return 1;
		for (int i = 0; i < 64; i++)
			free(keep[i]);
		return 0;
	}
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	static void *big[1024];
	for (long round = 0;; round++) {
		/* 32 MiB in 32 KiB page runs (order 3: 7 blocks per refill), held, then freed */
		for (int i = 0; i < 1024; i++) {
			big[i] = malloc(32768);
			if (!big[i])
				return 1;
			memset(big[i], (int)(round + i), 64);
		}
		/* every block still holds its own bytes: no two runs overlapped */
		for (int i = 0; i < 1024; i++) {
			if (((unsigned char *)big[i])[63] != (unsigned char)(round + i)) {
				fprintf(stderr, "topo_work: block %d corrupted\n", i);
				abort();
			}
			free(big[i]);
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > 150)
			break;
	}
	return 0;
}
