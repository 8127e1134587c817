/*
 * test_mallinfo.c - mallinfo()/mallinfo2() count bytes of live blocks (issue 15, class 9).
 *
 * 1. Ten calloc(1, 100) blocks raise uordblks by 1,000 bytes at least (a slab object counts
 *    by its class size: 112 here, so well under 64 KiB); mallinfo() (int fields) agrees with
 *    mallinfo2().
 * 2. A freed 64 MiB block that sits in the huge-mapping cache is free memory: hblks and
 *    hblkhd are back where they were before it was allocated.
 *
 * Usage: test_mallinfo [short|long]
 */
#define _GNU_SOURCE
#include <malloc.h>

#include "testutil.h"

#define N 10

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	tu_require_pcpmalloc("test_mallinfo");
	free(malloc(100000)); /* the allocator proper runs (past the early area) */
	free(calloc(1, 100)); /* and the class's slab is there: pages alone would not move */
	struct mallinfo2 m0 = mallinfo2();
	void *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = calloc(1, 100);
		CHECK(p[i] != NULL);
	}
	struct mallinfo2 m1 = mallinfo2();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	struct mallinfo i1 = mallinfo();
#pragma GCC diagnostic pop
	long long grew = (long long)m1.uordblks - (long long)m0.uordblks;
	printf("test_mallinfo: %d x calloc(1, 100): uordblks %zu -> %zu\n", N, m0.uordblks,
	       m1.uordblks);
	CHECKF(grew >= N * 100 && grew < 64 * 1024, "uordblks grew by %lld bytes", grew);
	CHECK_EQ((size_t)(unsigned)i1.uordblks, m1.uordblks & 0xffffffffu);
	for (int i = 0; i < N; i++)
		free(p[i]);

	struct mallinfo2 h0 = mallinfo2();
	char *big = malloc(64 * TU_MIB);
	CHECK(big != NULL);
	big[0] = 1;
	struct mallinfo2 h1 = mallinfo2();
	CHECKF(h1.hblkhd >= h0.hblkhd + 64 * TU_MIB, "hblkhd %zu -> %zu", h0.hblkhd, h1.hblkhd);
	CHECK_EQ(h1.hblks, h0.hblks + 1);
	free(big);
	struct mallinfo2 h2 = mallinfo2();
	printf("test_mallinfo: 64 MiB block: hblkhd %zu -> %zu -> %zu after free\n", h0.hblkhd,
	       h1.hblkhd, h2.hblkhd);
	CHECK_EQ(h2.hblkhd, h0.hblkhd);
	CHECK_EQ(h2.hblks, h0.hblks);
	printf("test_mallinfo: ok\n");
	return 0;
}
