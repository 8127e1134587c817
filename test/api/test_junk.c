/*
 * test_junk.c - PCPMALLOC_JUNK=1 (meson sets it): new blocks read 0xa5, freed ones 0x5a past
 * their first 16 bytes (slab objects keep the free-list link and the free mark there; larger
 * blocks all of it), calloc's blocks zero, realloc's grown part 0xa5, at sizes from 1 B to
 * 8 MiB (slab objects, page runs, huge mappings).  Fails in the default mode (no fill).
 */
#include "testutil.h"

static void check_fill(const unsigned char *p, size_t from, size_t to, unsigned char want,
		       const char *what, size_t n)
{
	for (size_t i = from; i < to; i++)
		CHECKF(p[i] == want, "%s of %zu bytes: byte %zu is %#x, want %#x", what, n, i, p[i],
		       want);
}

int main(void)
{
	tu_require_pcpmalloc("test_junk");
	for (size_t n = 1; n <= 8 * TU_MIB; n = n * 3 + 5) {
		unsigned char *p = tu_opaque_ptr(malloc(n));
		CHECK(p != NULL);
		check_fill(p, 0, n, 0xa5, "new block", n);
		memset(p, 1, n);
		free(p);
		/* the freed block is still mapped (slab, page run, cached mapping) */
		if (n > 16 && n <= 4 * TU_MIB)
			check_fill(p, 16, n, 0x5a, "freed block", n);
		unsigned char *z = calloc(1, n);
		check_fill(z, 0, n, 0, "calloc block", n);
		unsigned char *q = malloc(n);
		memset(q, 2, n);
		q = realloc(q, 2 * n + 100);
		check_fill(q, 0, n, 2, "realloc's copy", n);
		check_fill(q, n, 2 * n + 100, 0xa5, "realloc's grown part", n);
		free(q);
		free(z);
	}
	void *a = aligned_alloc(4096, 100);
	check_fill(a, 0, 100, 0xa5, "aligned block", 100);
	free(a);
	printf("junk fill as documented\n");
	return 0;
}
