/*
 * test_api.c - conformance of every exported allocation function, with glibc's semantics as
 * the reference (glibc 2.36 on Debian 12), run under LD_PRELOAD=libpcpmalloc.so.
 *
 * Where the brief for pcpmalloc asks for more than glibc 2.36 does, the stricter behaviour is
 * tested and marked here:
 *   - aligned_alloc with an alignment that is not a power of two fails with EINVAL (C17 DR 460,
 *     glibc >= 2.38); glibc 2.36 silently rounds it up.
 *   - pvalloc(0) returns a whole page (the documented behaviour); glibc 2.36 returns a minimum
 *     chunk because of its page-rounding bug.
 * Each case is a function; main() runs them in order and prints one line per case.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "testutil.h"

/* C23 sized frees: glibc 2.36 does not declare them; pcpmalloc must export them. */
void free_sized(void *ptr, size_t size);
void free_aligned_sized(void *ptr, size_t alignment, size_t size);

static size_t page_size;

/* Sizes on both sides of the boundaries an allocator like pcpmalloc has: size classes, slab
 * orders 0..3 (4..32 KiB), the largest slab object, pcp orders, MAX_PAGE_ORDER (4 MiB) and
 * the direct-mmap threshold above it. */
static const size_t large_sizes[] = {
	65537,         100000,        128 * TU_KIB - 1, 128 * TU_KIB,     128 * TU_KIB + 1,
	256 * TU_KIB,  TU_MIB - 1,    TU_MIB,           TU_MIB + 1,       2 * TU_MIB - 1,
	2 * TU_MIB,    2 * TU_MIB + 1, 4 * TU_MIB - 1,  4 * TU_MIB,       4 * TU_MIB + 1,
	8 * TU_MIB,    8 * TU_MIB + 4095, 16 * TU_MIB,  33 * TU_MIB + 7,  64 * TU_MIB,
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Checks p is a usable block of at least size bytes: 16-aligned, usable size >= size, all
 * usable bytes writable and readable back. */
static void check_block(void *p, size_t size, uint64_t serial)
{
	CHECKF(p != NULL, "size %zu", size);
	CHECK_ALIGNED(p, 16);
	size_t usable = malloc_usable_size(p);
	CHECKF(usable >= size, "usable %zu < size %zu", usable, size);
	uint64_t seed = tu_seed(p, serial);
	tu_fill(p, usable, seed);
	size_t bad = tu_verify(p, usable, seed);
	CHECKF(bad == SIZE_MAX, "size %zu: byte %zu differs right after fill", size, bad);
}

static void test_malloc_zero(void)
{
	enum { N = 256 };
	void *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = malloc(tu_opaque(0));
		CHECKF(p[i] != NULL, "malloc(0) #%d returned NULL", i);
		CHECK_ALIGNED(p[i], 16);
		for (int j = 0; j < i; j++)
			CHECKF(p[i] != p[j], "malloc(0) returned %p twice (#%d and #%d)", p[i], j, i);
	}
	for (int i = 0; i < N; i++)
		free(p[i]);
}

static void test_malloc_sizes_small(void)
{
	/* A ring of live blocks so results come from different slabs, not always the block just
	 * freed. */
	enum { RING = 64 };
	void *ring[RING] = {0};
	size_t ring_size[RING] = {0};
	uint64_t ring_seed[RING] = {0};
	uint64_t serial = 0;
	size_t step = 1;
	for (size_t size = 1; size <= 64 * TU_KIB; size += step) {
		if (size >= 8192)
			step = 61; /* a prime: hits every residue of the size classes */
		size_t slot = serial % RING;
		if (ring[slot]) {
			size_t u = malloc_usable_size(ring[slot]);
			size_t bad = tu_verify(ring[slot], u, ring_seed[slot]);
			CHECKF(bad == SIZE_MAX, "block of size %zu corrupted at byte %zu",
			       ring_size[slot], bad);
			free(ring[slot]);
		}
		void *p = malloc(size);
		check_block(p, size, serial);
		ring[slot] = p;
		ring_size[slot] = size;
		ring_seed[slot] = tu_seed(p, serial);
		serial++;
	}
	/* Powers of two and their neighbours up to 64 KiB. */
	for (size_t pw = 1; pw <= 64 * TU_KIB; pw <<= 1) {
		for (size_t d = 0; d < 3; d++) {
			size_t size = pw - 1 + d;
			if (size == 0)
				continue;
			void *p = malloc(size);
			check_block(p, size, serial++);
			free(p);
		}
	}
	for (size_t i = 0; i < RING; i++) {
		if (ring[i]) {
			size_t bad = tu_verify(ring[i], malloc_usable_size(ring[i]), ring_seed[i]);
			CHECKF(bad == SIZE_MAX, "block of size %zu corrupted at byte %zu",
			       ring_size[i], bad);
			free(ring[i]);
		}
	}
}

static void test_malloc_sizes_large(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(large_sizes); i++) {
		size_t size = large_sizes[i];
		void *p = malloc(size);
		check_block(p, size, i);
		/* Two live at once must not overlap. */
		void *q = malloc(size);
		check_block(q, size, i + 1000);
		size_t bad = tu_verify(p, malloc_usable_size(p), tu_seed(p, i));
		CHECKF(bad == SIZE_MAX, "size %zu: first block changed at byte %zu by the second",
		       size, bad);
		free(q);
		free(p);
	}
}

/* Many blocks of mixed sizes live at the same time keep their contents. */
static void test_no_overlap(void)
{
	enum { N = 3000 };
	static void *p[N];
	static size_t sz[N];
	uint64_t rng = 0x1234567;
	for (int i = 0; i < N; i++) {
		size_t r = tu_rand(&rng) % 100;
		sz[i] = r < 80 ? tu_rand_range(&rng, 1, 512)
			: r < 98 ? tu_rand_range(&rng, 513, 32 * TU_KIB)
				 : tu_rand_range(&rng, 32 * TU_KIB, 600 * TU_KIB);
		p[i] = malloc(sz[i]);
		CHECK(p[i] != NULL);
		tu_fill(p[i], sz[i], tu_seed(p[i], (uint64_t)i));
	}
	for (int i = 0; i < N; i++) {
		size_t bad = tu_verify(p[i], sz[i], tu_seed(p[i], (uint64_t)i));
		CHECKF(bad == SIZE_MAX, "block %d (%zu bytes at %p) overwritten at byte %zu", i,
		       sz[i], p[i], bad);
	}
	for (int i = 0; i < N; i += 2)
		free(p[i]);
	for (int i = 1; i < N; i += 2) {
		size_t bad = tu_verify(p[i], sz[i], tu_seed(p[i], (uint64_t)i));
		CHECKF(bad == SIZE_MAX, "block %d (%zu bytes) changed by freeing its neighbours at "
					"byte %zu",
		       i, sz[i], bad);
		free(p[i]);
	}
}

static void test_malloc_impossible(void)
{
	const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 15, (size_t)PTRDIFF_MAX + 1,
				(size_t)PTRDIFF_MAX, SIZE_MAX / 2 + 4096};
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		errno = 0;
		void *p = malloc(tu_opaque(sizes[i]));
		CHECKF(p == NULL, "malloc(%#zx) = %p", sizes[i], p);
		CHECKF(errno == ENOMEM, "malloc(%#zx): errno %d", sizes[i], errno);
	}
	/* The heap still works. */
	void *p = malloc(100);
	check_block(p, 100, 1);
	free(p);
}

static void test_free_null_and_errno(void)
{
	free(NULL);
	free(tu_opaque_ptr(NULL));
	/* glibc >= 2.33 (and POSIX 2024) keep errno across free(). */
	const size_t sizes[] = {16, 1000, 64 * TU_KIB, TU_MIB, 16 * TU_MIB};
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		void *p = malloc(sizes[i]);
		CHECK(p != NULL);
		memset(p, 1, sizes[i]);
		errno = 4242;
		free(p);
		CHECKF(errno == 4242, "free() of a %zu-byte block changed errno to %d", sizes[i],
		       errno);
	}
	errno = 77;
	free(NULL);
	CHECK_EQ(errno, 77);
}

/* A successful call leaves errno alone, also where a system call failed on the way (a huge
 * block that cannot grow in place: mremap fails with ENOMEM, or EFAULT for a mapping
 * gathered from several, and the block moves). */
static void test_success_keeps_errno(void)
{
	const size_t sizes[] = {100, 20 * TU_KIB, 300 * TU_KIB, 5 * TU_MIB, 70 * TU_MIB};
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
			size_t n = sizes[i];
			errno = 4242;
			char *p = malloc(n);
			CHECK(p != NULL);
			memset(p, 1, n);
			/* something right after the block: it cannot grow in place */
			size_t end = ((uintptr_t)p + n + page_size - 1) & ~(page_size - 1);
			void *wall = mmap((void *)end, page_size, PROT_NONE,
					  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			errno = 4242; /* (EEXIST when something is there already) */
			char *q = realloc(p, 2 * n);
			CHECK(q != NULL);
			CHECK(q[n - 1] == 1);
			CHECKF(errno == 4242, "realloc(%zu-byte block, %zu) changed errno to %d", n,
			       2 * n, errno);
			q = realloc(q, n / 2 + 1);
			CHECK(q != NULL);
			CHECKF(errno == 4242, "realloc(%zu-byte block, %zu) changed errno to %d",
			       2 * n, n / 2 + 1, errno);
			free(q);
			if (wall != MAP_FAILED)
				munmap(wall, page_size);
			void *c = calloc(1, n), *m = memalign(4096, n);
			CHECK(c != NULL && m != NULL);
			CHECK(malloc_usable_size(m) >= n);
			free(c);
			free(m);
			CHECKF(errno == 4242, "calloc/memalign/free of %zu bytes changed errno to %d",
			       n, errno);
		}
	}
}

static void test_calloc(void)
{
	const size_t sizes[] = {1,       8,          16,         24,         100,
				512,     1000,       4096,       4097,       10000,
				32768,   65536,      100000,     TU_MIB,     3 * TU_MIB + 5,
				8 * TU_MIB};
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];
		/* Dirty memory of this size, free it, then calloc must still hand out zeroes.
		 * Several rounds so that the calloc reuses the dirtied block (thread cache, pcp
		 * list or zone). */
		for (int round = 0; round < 4; round++) {
			void *d = malloc(n);
			CHECK(d != NULL);
			memset(d, 0xff, malloc_usable_size(d));
			free(d);
			unsigned char *c = calloc(1, n);
			CHECKF(c != NULL, "calloc(1, %zu)", n);
			CHECK_ALIGNED(c, 16);
			size_t nz = tu_first_nonzero(c, n);
			CHECKF(nz == SIZE_MAX, "calloc(1, %zu) (round %d, reused %s) byte %zu = %#x", n,
			       round, (void *)c == d ? "yes" : "no", nz, nz == SIZE_MAX ? 0 : c[nz]);
			CHECK(malloc_usable_size(c) >= n);
			memset(c, 0xee, n);
			free(c);
		}
	}
	/* nmemb * size, both sides nontrivial. */
	unsigned *a = calloc(1000, sizeof(unsigned));
	CHECK(a != NULL);
	for (int i = 0; i < 1000; i++)
		CHECKF(a[i] == 0, "element %d = %u", i, a[i]);
	free(a);

	/* Large calloc of 10 MiB, after 10 MiB of dirty memory was freed. */
	size_t big = 10 * TU_MIB;
	for (int round = 0; round < 3; round++) {
		void *d = malloc(big);
		CHECK(d != NULL);
		memset(d, 0xa5, big);
		free(d);
		unsigned char *c = calloc(big / 1024, 1024);
		CHECK(c != NULL);
		size_t nz = tu_first_nonzero(c, big);
		CHECKF(nz == SIZE_MAX, "calloc(10 MiB) round %d byte %zu = %#x", round, nz,
		       nz == SIZE_MAX ? 0 : c[nz]);
		free(c);
	}

	/* Huge blocks (own mappings, possibly kept in a reuse cache) of one size dirtied and
	 * freed, then calloc'ed at other sizes, smaller and larger; also blocks that grew by
	 * realloc before they were freed. */
	const size_t dirty_sizes[] = {20 * TU_MIB, 5 * TU_MIB, 9 * TU_MIB + 12345, 31 * TU_MIB};
	const size_t calloc_sizes[] = {5 * TU_MIB, 6 * TU_MIB + 1, 19 * TU_MIB, 31 * TU_MIB,
				       4 * TU_MIB + 4096};
	for (size_t i = 0; i < ARRAY_SIZE(dirty_sizes); i++) {
		for (size_t k = 0; k < ARRAY_SIZE(calloc_sizes); k++) {
			unsigned char *d = malloc(dirty_sizes[i] / 2);
			CHECK(d != NULL);
			memset(d, 0x99, dirty_sizes[i] / 2);
			d = realloc(d, dirty_sizes[i]);
			CHECK(d != NULL);
			memset(d, 0x9a, dirty_sizes[i]);
			free(d);
			unsigned char *c = calloc(1, calloc_sizes[k]);
			CHECK(c != NULL);
			size_t nz = tu_first_nonzero(c, calloc_sizes[k]);
			CHECKF(nz == SIZE_MAX,
			       "calloc(1, %zu) after a dirty %zu-byte block was freed: byte %zu = %#x",
			       calloc_sizes[k], dirty_sizes[i], nz, nz == SIZE_MAX ? 0 : c[nz]);
			free(c);
		}
	}

	/* Many small callocs of the same size after many small dirty frees (thread cache and
	 * slab reuse). */
	enum { M = 2000 };
	static void *blk[M];
	for (int i = 0; i < M; i++) {
		blk[i] = malloc(48);
		CHECK(blk[i] != NULL);
		memset(blk[i], 0x5a, 48);
	}
	for (int i = 0; i < M; i++)
		free(blk[i]);
	for (int i = 0; i < M; i++) {
		blk[i] = calloc(6, 8);
		CHECK(blk[i] != NULL);
		size_t nz = tu_first_nonzero(blk[i], 48);
		CHECKF(nz == SIZE_MAX, "calloc(6, 8) #%d byte %zu nonzero", i, nz);
	}
	for (int i = 0; i < M; i++)
		free(blk[i]);

	/* Zero-sized calloc: a unique pointer, as malloc(0). */
	void *z1 = calloc(0, 16), *z2 = calloc(16, 0), *z3 = calloc(tu_opaque(0), tu_opaque(0));
	CHECK(z1 != NULL && z2 != NULL && z3 != NULL);
	CHECK(z1 != z2 && z2 != z3 && z1 != z3);
	free(z1);
	free(z2);
	free(z3);

	/* Overflow of nmemb * size: NULL, ENOMEM. */
	struct {
		size_t nmemb, size;
	} ov[] = {
		{SIZE_MAX / 2 + 1, 2},
		{2, SIZE_MAX / 2 + 1},
		{(size_t)1 << 32, (size_t)1 << 32},
		{SIZE_MAX, SIZE_MAX},
		{(SIZE_MAX / 3) + 1, 3},
		{1, SIZE_MAX},          /* no overflow, just impossible */
		{(size_t)PTRDIFF_MAX, 1},
	};
	for (size_t i = 0; i < ARRAY_SIZE(ov); i++) {
		errno = 0;
		void *p = calloc(tu_opaque(ov[i].nmemb), tu_opaque(ov[i].size));
		CHECKF(p == NULL, "calloc(%#zx, %#zx) = %p", ov[i].nmemb, ov[i].size, p);
		CHECKF(errno == ENOMEM, "calloc(%#zx, %#zx): errno %d", ov[i].nmemb, ov[i].size,
		       errno);
	}
}

/*
 * calloc must zero memory that was written and freed even when it comes back by an indirect
 * route: dirty a large area, free it, then allocate page runs whose page count is not a power
 * of two (the allocator splits larger blocks and gives the unused tails back) and calloc
 * blocks of several page sizes from what is left.
 */
static void test_calloc_after_split(void)
{
	enum { BIG = 64, RUNS = 48, CALLOCS = 48 };
	const size_t run_pages[] = {17, 9, 33, 65, 129, 300};
	const size_t sizes[] = {20 * TU_KIB, 17 * TU_KIB, 40 * TU_KIB, 100 * TU_KIB, 300 * TU_KIB,
				TU_MIB - 5000};
	static void *big[BIG], *runs[RUNS], *c[CALLOCS];
	for (size_t r = 0; r < ARRAY_SIZE(run_pages); r++) {
		for (size_t s = 0; s < ARRAY_SIZE(sizes); s++) {
			for (int i = 0; i < BIG; i++) {
				big[i] = malloc(TU_MIB);
				CHECK(big[i] != NULL);
				memset(big[i], 0xff, TU_MIB);
			}
			for (int i = 0; i < BIG; i++)
				free(big[i]);
			size_t n = run_pages[r] * page_size;
			for (int i = 0; i < RUNS; i++) {
				runs[i] = malloc(n);
				CHECK(runs[i] != NULL);
				memset(runs[i], 0xee, n);
			}
			for (int i = 0; i < CALLOCS; i++) {
				unsigned char *p = calloc(1, sizes[s]);
				CHECKF(p != NULL, "calloc(1, %zu)", sizes[s]);
				size_t nz = tu_first_nonzero(p, sizes[s]);
				CHECKF(nz == SIZE_MAX,
				       "calloc(1, %zu) #%d = %p after runs of %zu pages: byte %zu = "
				       "%#x",
				       sizes[s], i, (void *)p, run_pages[r], nz,
				       nz == SIZE_MAX ? 0 : p[nz]);
				c[i] = p;
			}
			for (int i = 0; i < CALLOCS; i++)
				free(c[i]);
			for (int i = 0; i < RUNS; i++)
				free(runs[i]);
		}
	}
}

/* The sizes a realloc chain crosses: small, slab orders, large, huge (direct mmap). */
static const size_t realloc_sizes[] = {16,          1024,        16 * TU_KIB, 64 * TU_KIB,
				       TU_MIB,      8 * TU_MIB,  64 * TU_MIB};

static void test_realloc(void)
{
	/* realloc(NULL, n) is malloc(n). */
	void *p = realloc(NULL, 200);
	check_block(p, 200, 1);
	free(p);
	p = realloc(NULL, 0);
	CHECK(p != NULL);
	free(p);

	/* Every pair (from, to): the first min(from, to) bytes survive. */
	uint64_t serial = 0;
	for (size_t i = 0; i < ARRAY_SIZE(realloc_sizes); i++) {
		for (size_t j = 0; j < ARRAY_SIZE(realloc_sizes); j++) {
			size_t from = realloc_sizes[i], to = realloc_sizes[j];
			unsigned char *a = malloc(from);
			CHECK(a != NULL);
			uint64_t seed = tu_seed(a, serial++);
			tu_fill(a, from, seed);
			unsigned char *b = realloc(a, to);
			CHECKF(b != NULL, "realloc %zu -> %zu", from, to);
			CHECK_ALIGNED(b, 16);
			CHECKF(malloc_usable_size(b) >= to, "realloc %zu -> %zu: usable %zu", from,
			       to, malloc_usable_size(b));
			size_t keep = from < to ? from : to;
			size_t bad = tu_verify(b, keep, seed);
			CHECKF(bad == SIZE_MAX, "realloc %zu -> %zu lost byte %zu (moved: %s)", from, to,
			       bad, a == b ? "no" : "yes");
			/* The whole new size is writable. */
			memset(b, 0x3c, to);
			free(b);
		}
	}

	/* One block grown step by step through all sizes and shrunk back, with odd sizes. */
	unsigned char *c = malloc(1);
	CHECK(c != NULL);
	size_t have = 1;
	uint64_t seed = tu_seed(c, 99);
	tu_fill(c, have, seed);
	for (size_t i = 0; i < ARRAY_SIZE(realloc_sizes); i++) {
		size_t to = realloc_sizes[i] + 3;
		c = realloc(c, to);
		CHECK(c != NULL);
		size_t bad = tu_verify(c, have, seed);
		CHECKF(bad == SIZE_MAX, "growing to %zu lost byte %zu", to, bad);
		tu_fill(c, to, seed);
		have = to;
	}
	for (size_t i = ARRAY_SIZE(realloc_sizes); i-- > 0;) {
		size_t to = realloc_sizes[i] - 5;
		c = realloc(c, to);
		CHECK(c != NULL);
		size_t bad = tu_verify(c, to, seed);
		CHECKF(bad == SIZE_MAX, "shrinking to %zu lost byte %zu", to, bad);
		have = to;
	}
	free(c);

	/* Growing by small steps (the in-place path, if any). */
	c = malloc(8);
	CHECK(c != NULL);
	seed = tu_seed(c, 7);
	tu_fill(c, 8, seed);
	for (size_t n = 8; n < 300 * TU_KIB; n = n + n / 8 + 1) {
		size_t next = n + n / 8 + 1;
		c = realloc(c, next);
		CHECK(c != NULL);
		size_t bad = tu_verify(c, n, seed);
		CHECKF(bad == SIZE_MAX, "step %zu -> %zu lost byte %zu", n, next, bad);
		tu_fill(c, next, seed);
	}
	free(c);

	/* realloc(p, 0) with p != NULL frees p and returns NULL in glibc. */
	const size_t zsizes[] = {16, 5000, 200 * TU_KIB, 8 * TU_MIB};
	for (size_t i = 0; i < ARRAY_SIZE(zsizes); i++) {
		void *z = malloc(zsizes[i]);
		CHECK(z != NULL);
		memset(z, 1, zsizes[i]);
		void *r = realloc(z, tu_opaque(0));
		CHECKF(r == NULL, "realloc(%zu-byte block, 0) = %p, glibc returns NULL", zsizes[i],
		       r);
	}

	/* Impossible sizes: NULL, ENOMEM, the original block untouched and still owned. */
	const size_t orig_sizes[] = {16, 3000, 100 * TU_KIB, 6 * TU_MIB};
	const size_t huge[] = {SIZE_MAX, SIZE_MAX - 4096, (size_t)PTRDIFF_MAX + 1};
	for (size_t i = 0; i < ARRAY_SIZE(orig_sizes); i++) {
		for (size_t k = 0; k < ARRAY_SIZE(huge); k++) {
			size_t n = orig_sizes[i];
			unsigned char *o = malloc(n);
			CHECK(o != NULL);
			seed = tu_seed(o, k);
			tu_fill(o, n, seed);
			errno = 0;
			void *r = realloc(o, tu_opaque(huge[k]));
			CHECKF(r == NULL, "realloc(%zu-byte block, %#zx) = %p", n, huge[k], r);
			CHECKF(errno == ENOMEM, "realloc(%zu-byte block, %#zx): errno %d", n, huge[k],
			       errno);
			size_t bad = tu_verify(o, n, seed);
			CHECKF(bad == SIZE_MAX, "failed realloc damaged the original at byte %zu", bad);
			/* Still a live block: it can grow normally and be freed. */
			o = realloc(o, n * 2);
			CHECK(o != NULL);
			bad = tu_verify(o, n, seed);
			CHECKF(bad == SIZE_MAX, "realloc after failed realloc lost byte %zu", bad);
			free(o);
		}
	}
}

static void test_reallocarray(void)
{
	int *a = reallocarray(NULL, 10, sizeof(int));
	CHECK(a != NULL);
	for (int i = 0; i < 10; i++)
		a[i] = i * 7;
	a = reallocarray(a, 100000, sizeof(int));
	CHECK(a != NULL);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(a[i], i * 7);
	for (int i = 0; i < 100000; i++)
		a[i] = i;
	a = reallocarray(a, 5, sizeof(int));
	CHECK(a != NULL);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(a[i], i);

	struct {
		size_t nmemb, size;
	} ov[] = {
		{SIZE_MAX / 2, 3},
		{(size_t)1 << 33, (size_t)1 << 33},
		{SIZE_MAX, 2},
		{1, SIZE_MAX},
	};
	for (size_t i = 0; i < ARRAY_SIZE(ov); i++) {
		errno = 0;
		void *r = reallocarray(a, tu_opaque(ov[i].nmemb), tu_opaque(ov[i].size));
		CHECKF(r == NULL, "reallocarray(p, %#zx, %#zx) = %p", ov[i].nmemb, ov[i].size, r);
		CHECKF(errno == ENOMEM, "reallocarray(p, %#zx, %#zx): errno %d", ov[i].nmemb,
		       ov[i].size, errno);
		for (int k = 0; k < 5; k++)
			CHECKF(a[k] == k, "original damaged: a[%d] = %d", k, a[k]);
	}
	free(a);

	errno = 0;
	void *r = reallocarray(NULL, tu_opaque(SIZE_MAX / 4), 8);
	CHECK(r == NULL);
	CHECK_EQ(errno, ENOMEM);
}

static const size_t memalign_sizes[] = {0,    1,     8,     15,          16,
					100,  4095,  4096,  4097,        65536,
					65537, 200000, TU_MIB, 3 * TU_MIB + 1};

static void test_posix_memalign(void)
{
	uint64_t serial = 0;
	for (size_t al = sizeof(void *); al <= 4 * TU_MIB; al <<= 1) {
		for (size_t i = 0; i < ARRAY_SIZE(memalign_sizes); i++) {
			size_t size = memalign_sizes[i];
			void *p = (void *)(uintptr_t)0xdeadbeef;
			int rc = posix_memalign(&p, al, size);
			CHECKF(rc == 0, "posix_memalign(al %zu, size %zu) = %d", al, size, rc);
			if (size == 0) {
				/* glibc returns a unique pointer; NULL would also be allowed. */
				CHECK(p != (void *)(uintptr_t)0xdeadbeef);
				if (p)
					CHECK_ALIGNED(p, al);
				free(p);
				continue;
			}
			CHECKF(p != NULL, "al %zu size %zu", al, size);
			CHECK_ALIGNED(p, al);
			check_block(p, size, serial++);
			/* An aligned block is an ordinary block: realloc keeps its contents. */
			if ((serial & 3) == 0) {
				uint64_t seed = tu_seed(p, 5000 + serial);
				tu_fill(p, size, seed);
				void *q = realloc(p, size * 2 + 10);
				CHECKF(q != NULL, "realloc of a %zu-aligned block", al);
				size_t bad = tu_verify(q, size, seed);
				CHECKF(bad == SIZE_MAX,
				       "realloc of a %zu-aligned %zu-byte block lost byte %zu", al, size,
				       bad);
				p = q;
			}
			free(p);
		}
	}
	/* Alignments above the largest buddy block (4 MiB): the huge path must align too. */
	const size_t big_al[] = {8 * TU_MIB, 16 * TU_MIB, 64 * TU_MIB};
	const size_t big_al_sizes[] = {1, 100000, 5 * TU_MIB};
	for (size_t i = 0; i < ARRAY_SIZE(big_al); i++) {
		for (size_t k = 0; k < ARRAY_SIZE(big_al_sizes); k++) {
			void *p = NULL;
			int rc = posix_memalign(&p, big_al[i], big_al_sizes[k]);
			CHECKF(rc == 0, "posix_memalign(%zu, %zu) = %d", big_al[i], big_al_sizes[k],
			       rc);
			CHECK_ALIGNED(p, big_al[i]);
			check_block(p, big_al_sizes[k], serial++);
			void *q = aligned_alloc(big_al[i], big_al_sizes[k]);
			CHECKF(q != NULL, "aligned_alloc(%zu, %zu)", big_al[i], big_al_sizes[k]);
			CHECK_ALIGNED(q, big_al[i]);
			check_block(q, big_al_sizes[k], serial++);
			/* Both live: the first is intact. */
			size_t bad = tu_verify(p, malloc_usable_size(p), tu_seed(p, serial - 2));
			CHECKF(bad == SIZE_MAX, "%zu-aligned block overwritten at byte %zu", big_al[i],
			       bad);
			free(q);
			free(p);
		}
	}

	/* Several aligned blocks live together (an aligned block must not be carved so that a
	 * neighbour is overwritten). */
	enum { N = 64 };
	void *live[N];
	for (int i = 0; i < N; i++) {
		size_t al = (size_t)64 << (i % 8);
		CHECK_EQ(posix_memalign(&live[i], al, 100 + (size_t)i * 300), 0);
		CHECK_ALIGNED(live[i], al);
		tu_fill(live[i], 100 + (size_t)i * 300, tu_seed(live[i], (uint64_t)i));
	}
	for (int i = 0; i < N; i++) {
		size_t bad = tu_verify(live[i], 100 + (size_t)i * 300, tu_seed(live[i], (uint64_t)i));
		CHECKF(bad == SIZE_MAX, "aligned block %d overwritten at byte %zu", i, bad);
		free(live[i]);
	}

	/* Bad alignments: EINVAL, *memptr untouched. */
	const size_t bad_al[] = {0, 1, 2, 3, sizeof(void *) / 2, 24, 48, 100, 4097,
				 SIZE_MAX, SIZE_MAX / 2};
	for (size_t i = 0; i < ARRAY_SIZE(bad_al); i++) {
		void *sentinel = (void *)(uintptr_t)0x5eed5eed;
		void *p = sentinel;
		int rc = posix_memalign(&p, tu_opaque(bad_al[i]), 64);
		CHECKF(rc == EINVAL, "posix_memalign(al %zu) = %d, want EINVAL", bad_al[i], rc);
		CHECKF(p == sentinel, "posix_memalign(al %zu) wrote %p on failure", bad_al[i], p);
	}
	/* Impossible size: ENOMEM, *memptr untouched. */
	const size_t huge[] = {SIZE_MAX, SIZE_MAX - 100, (size_t)PTRDIFF_MAX + 1};
	for (size_t i = 0; i < ARRAY_SIZE(huge); i++) {
		void *sentinel = (void *)(uintptr_t)0xfeedf00d;
		void *p = sentinel;
		int rc = posix_memalign(&p, 64, tu_opaque(huge[i]));
		CHECKF(rc == ENOMEM, "posix_memalign(64, %#zx) = %d, want ENOMEM", huge[i], rc);
		CHECK(p == sentinel);
	}
}

static void test_aligned_alloc(void)
{
	uint64_t serial = 0;
	for (size_t al = 1; al <= 4 * TU_MIB; al <<= 1) {
		/* C17: the size need not be a multiple of the alignment. */
		const size_t sizes[] = {1, al, al + 1, 3 * al, 1000, 100000};
		for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
			errno = 0;
			void *p = aligned_alloc(tu_opaque(al), tu_opaque(sizes[i]));
			CHECKF(p != NULL, "aligned_alloc(%zu, %zu) errno %d", al, sizes[i], errno);
			CHECK_ALIGNED(p, al);
			check_block(p, sizes[i], serial++);
			free(p);
		}
	}
	/* Not a power of two (or zero): NULL and EINVAL.  Stricter than glibc 2.36, which rounds
	 * up; this is glibc >= 2.38 and C17 (DR 460). */
	const size_t bad_al[] = {0, 3, 24, 100, 4097, SIZE_MAX};
	for (size_t i = 0; i < ARRAY_SIZE(bad_al); i++) {
		errno = 0;
		void *p = aligned_alloc(tu_opaque(bad_al[i]), 64);
		CHECKF(p == NULL, "aligned_alloc(%zu, 64) = %p, want NULL", bad_al[i], p);
		CHECKF(errno == EINVAL, "aligned_alloc(%zu, 64): errno %d, want EINVAL", bad_al[i],
		       errno);
	}
	errno = 0;
	void *p = aligned_alloc(64, tu_opaque(SIZE_MAX - 64));
	CHECK(p == NULL);
	CHECK_EQ(errno, ENOMEM);
}

static void test_memalign(void)
{
	uint64_t serial = 0;
	for (size_t al = 1; al <= 4 * TU_MIB; al <<= 1) {
		for (size_t i = 0; i < ARRAY_SIZE(memalign_sizes); i++) {
			size_t size = memalign_sizes[i];
			void *p = memalign(tu_opaque(al), size);
			CHECKF(p != NULL, "memalign(%zu, %zu)", al, size);
			CHECK_ALIGNED(p, al);
			CHECK_ALIGNED(p, 16);
			check_block(p, size, serial++);
			free(p);
		}
	}
	/* glibc rounds an alignment that is not a power of two up to the next one. */
	const struct {
		size_t al, rounded;
	} r[] = {{3, 4}, {24, 32}, {48, 64}, {100, 128}, {3000, 4096}, {5000, 8192},
		 {(1 << 20) + 1, 2 << 20}};
	for (size_t i = 0; i < ARRAY_SIZE(r); i++) {
		/* Repeat: a single success could be a lucky address. */
		void *keep[16];
		for (int k = 0; k < 16; k++) {
			void *p = memalign(tu_opaque(r[i].al), 40 + (size_t)k * 8);
			CHECKF(p != NULL, "memalign(%zu)", r[i].al);
			CHECKF(((uintptr_t)p & (r[i].rounded - 1)) == 0,
			       "memalign(%zu) = %p, not aligned to %zu", r[i].al, p, r[i].rounded);
			check_block(p, 40 + (size_t)k * 8, serial++);
			keep[k] = p;
		}
		for (int k = 0; k < 16; k++)
			free(keep[k]);
	}
	/* Alignment 0 behaves as malloc in glibc. */
	void *p = memalign(tu_opaque(0), 100);
	check_block(p, 100, serial++);
	free(p);
	/* An alignment above SIZE_MAX / 2 + 1 cannot be rounded up: EINVAL. */
	errno = 0;
	p = memalign(tu_opaque(SIZE_MAX / 2 + 2), 100);
	CHECK(p == NULL);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	p = memalign(64, tu_opaque(SIZE_MAX - 1000));
	CHECK(p == NULL);
	CHECK_EQ(errno, ENOMEM);
}

static void test_valloc_pvalloc(void)
{
	const size_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 10000, 65536, TU_MIB + 1};
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		size_t size = sizes[i];
		void *p = valloc(size);
		CHECKF(p != NULL, "valloc(%zu)", size);
		CHECK_ALIGNED(p, page_size);
		check_block(p, size, i);
		free(p);

		size_t rounded = (size + page_size - 1) & ~(page_size - 1);
		if (rounded == 0)
			rounded = page_size; /* pvalloc(0) returns one page */
		p = pvalloc(size);
		CHECKF(p != NULL, "pvalloc(%zu)", size);
		CHECK_ALIGNED(p, page_size);
		size_t usable = malloc_usable_size(p);
		CHECKF(usable >= rounded, "pvalloc(%zu): usable %zu < %zu", size, usable, rounded);
		memset(p, 0x77, rounded);
		check_block(p, rounded, i + 100);
		free(p);
	}
	errno = 0;
	void *p = valloc(tu_opaque(SIZE_MAX - 10));
	CHECK(p == NULL);
	CHECK_EQ(errno, ENOMEM);
	errno = 0;
	p = pvalloc(tu_opaque(SIZE_MAX - 10));
	CHECK(p == NULL);
	CHECK_EQ(errno, ENOMEM);
}

static void test_usable_size(void)
{
	CHECK_EQ(malloc_usable_size(NULL), 0);
	for (size_t size = 1; size < 200 * TU_KIB; size = size * 3 / 2 + 1) {
		unsigned char *p = malloc(size);
		CHECK(p != NULL);
		size_t u = malloc_usable_size(p);
		CHECKF(u >= size, "size %zu usable %zu", size, u);
		/* Not absurd either: at most double plus a page (loose, catches garbage). */
		CHECKF(u <= 2 * size + 2 * page_size, "size %zu usable %zu", size, u);
		memset(p, 0xc3, u);
		/* Writing the slack did not disturb the allocator: the size is unchanged and a
		 * neighbour allocation still works. */
		CHECK_EQ(malloc_usable_size(p), u);
		void *q = malloc(size);
		CHECK(q != NULL);
		for (size_t i = 0; i < u; i++)
			if (p[i] != 0xc3)
				CHECKF(0, "byte %zu of the usable area of a %zu-byte block changed by a "
					  "malloc",
				       i, size);
		free(q);
		free(p);
	}
}

static void test_malloc_trim(void)
{
	enum { N = 20000 };
	static void *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = malloc(16 + (size_t)(i % 64) * 48);
		CHECK(p[i] != NULL);
		memset(p[i], 0x11, 16);
	}
	void *big = malloc(32 * TU_MIB);
	CHECK(big != NULL);
	memset(big, 0x22, 32 * TU_MIB);
	free(big);
	/* Keep every 50th block live across the trim. */
	for (int i = 0; i < N; i++)
		if (i % 50)
			free(p[i]);
	int rc = malloc_trim(0);
	CHECKF(rc == 0 || rc == 1, "malloc_trim(0) = %d", rc);
	rc = malloc_trim(tu_opaque(1 << 20));
	CHECKF(rc == 0 || rc == 1, "malloc_trim(1 MiB) = %d", rc);
	for (int i = 0; i < N; i += 50) {
		unsigned char *b = p[i];
		for (int k = 0; k < 16; k++)
			CHECKF(b[k] == 0x11, "block %d byte %d changed by malloc_trim", i, k);
		free(b);
	}
	/* The heap works after the trim. */
	for (int i = 0; i < 1000; i++) {
		void *q = malloc((size_t)i * 100 + 1);
		check_block(q, (size_t)i * 100 + 1, (uint64_t)i);
		free(q);
	}
	void *q = malloc(32 * TU_MIB);
	check_block(q, 32 * TU_MIB, 1);
	free(q);
}

static void test_mallinfo(void)
{
	void *blocks[10];
	for (int i = 0; i < 10; i++) {
		blocks[i] = malloc(TU_MIB);
		CHECK(blocks[i] != NULL);
		memset(blocks[i], 1, TU_MIB);
	}
	void *small[1000];
	for (int i = 0; i < 1000; i++) {
		small[i] = malloc(100);
		CHECK(small[i] != NULL);
	}
	struct mallinfo2 m2 = mallinfo2();
	size_t sum = m2.arena + m2.hblkhd + m2.uordblks;
	CHECKF(sum > 0, "mallinfo2: arena %zu hblkhd %zu uordblks %zu with 10 MiB live", m2.arena,
	       m2.hblkhd, m2.uordblks);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	struct mallinfo m1 = mallinfo();
#pragma GCC diagnostic pop
	long long sum1 = (long long)m1.arena + m1.hblkhd + m1.uordblks;
	CHECKF(sum1 != 0, "mallinfo: arena %d hblkhd %d uordblks %d with 10 MiB live", m1.arena,
	       m1.hblkhd, m1.uordblks);
	for (int i = 0; i < 10; i++)
		free(blocks[i]);
	for (int i = 0; i < 1000; i++)
		free(small[i]);
	m2 = mallinfo2();
	(void)m2;
}

/* Runs fn with stderr redirected to a temporary file; returns the bytes written there. */
static size_t stderr_bytes_of(void (*fn)(void), char *first, size_t first_len)
{
	char path[] = "/tmp/pcpmalloc-test-api-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	fflush(stderr);
	int saved = dup(2);
	CHECK(saved >= 0);
	CHECK(dup2(fd, 2) == 2);
	fn();
	fflush(stderr);
	CHECK(dup2(saved, 2) == 2);
	close(saved);
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	if (first_len) {
		ssize_t n = pread(fd, first, first_len - 1, 0);
		first[n > 0 ? n : 0] = '\0';
	}
	close(fd);
	return (size_t)st.st_size;
}

static void call_malloc_stats(void)
{
	malloc_stats();
}

static void test_malloc_stats(void)
{
	void *p = malloc(12345);
	CHECK(p != NULL);
	char first[200];
	size_t n = stderr_bytes_of(call_malloc_stats, first, sizeof(first));
	CHECKF(n > 0, "%s", "malloc_stats() printed nothing on stderr");
	printf("  malloc_stats: %zu bytes, starting \"%.60s\"\n", n, first);
	free(p);
}

static void test_free_sized(void)
{
	void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
	void (*fas)(void *, size_t, size_t) =
		(void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
	if (!fs && tu_glibc_allowed()) {
		printf("  free_sized: not in glibc 2.36, skipped (debug mode)\n");
		return;
	}
	CHECKF(fs != NULL, "%s", "free_sized is not exported");
	CHECKF(fas != NULL, "%s", "free_aligned_sized is not exported");
	/* Make sure the symbols are pcpmalloc's, not some other library's. */
	Dl_info info;
	CHECK(dladdr((void *)fs, &info) != 0 && info.dli_fname);
	CHECKF(strstr(info.dli_fname, "pcpmalloc") != NULL, "free_sized comes from %s",
	       info.dli_fname);

	fs(NULL, 0);
	fs(NULL, 100);
	fas(NULL, 64, 0);
	for (int round = 0; round < 3; round++) {
		for (size_t size = 1; size < 10 * TU_MIB; size = size * 2 + 7) {
			void *p = malloc(size);
			check_block(p, size, size);
			fs(p, size);
			p = calloc(1, size);
			CHECK(p != NULL);
			fs(p, size);
			for (size_t al = 16; al <= TU_MIB; al <<= 3) {
				size_t asize = (size + al - 1) & ~(al - 1);
				void *q = aligned_alloc(al, asize);
				CHECKF(q != NULL, "aligned_alloc(%zu, %zu)", al, asize);
				CHECK_ALIGNED(q, al);
				check_block(q, asize, al);
				fas(q, al, asize);
			}
		}
	}
	/* The size requested is accepted where the block is larger (the default mode checks
	 * only that the size fits the block, secure mode that it is the one requested): a
	 * realloc that shrank in place, an aligned request in a larger class, and every size
	 * of one class. */
	static const size_t shrink[][2] = {{1000, 600},
					   {100000, 70000},
					   {8 * TU_MIB, 5 * TU_MIB}};
	for (size_t i = 0; i < sizeof(shrink) / sizeof(shrink[0]); i++) {
		void *p = malloc(shrink[i][0]);
		CHECK(p != NULL);
		void *q = realloc(p, shrink[i][1]);
		CHECK(q != NULL);
		fs(q, shrink[i][1]);
	}
	void *a = aligned_alloc(4096, 16);
	CHECK(a != NULL);
	fas(a, 4096, 16);
	for (size_t size = 1; size <= 1024; size++) {
		void *p = malloc(size);
		size_t usable = malloc_usable_size(p);
		fs(p, size);
		for (size_t n = size; n <= usable; n += 7) {
			p = malloc(n);
			CHECK(p != NULL);
			fs(p, n);
		}
	}
	/* The heap is consistent afterwards. */
	for (size_t size = 1; size < 100000; size = size * 3 + 1) {
		void *p = malloc(size);
		check_block(p, size, 1);
		free(p);
	}
}

/* Freed mappings above 4 MiB are cached; a larger request grows the cached one in place of a
 * fresh mapping (mremap): a cache hit, every byte usable, and calloc's bytes zero. */
static void test_huge_cache_grow(void)
{
	if (!tu_pcp.stat) {
		printf("  huge cache: not running on pcpmalloc, skipped (debug mode)\n");
		return;
	}
	/* test_api_secure too: secure mode moves a freed mapping's pages away (its old range
	 * stays PROT_NONE) and caches them there */
	const size_t small = tu_opaque(6u << 20), big = tu_opaque(20u << 20);
	for (int use_calloc = 0; use_calloc < 2; use_calloc++) {
		malloc_trim(0); /* empties the cache: ours is the only entry below */
		unsigned char *p = malloc(small);
		CHECK(p != NULL);
		memset(p, 0x5a, small);
		free(p);
		long long h0 = tu_pcp.stat("huge_cache_hits");
		unsigned char *q = use_calloc ? calloc(1, big) : malloc(big);
		CHECK(q != NULL);
		CHECKF(tu_pcp.stat("huge_cache_hits") == h0 + 1, "%s(%zu) after free(%zu-byte block): no cache hit",
		       use_calloc ? "calloc" : "malloc", big, small);
		CHECK(malloc_usable_size(q) >= big);
		if (use_calloc)
			for (size_t i = 0; i < big; i += 512)
				CHECKF(q[i] == 0, "calloc(%zu) from a grown mapping: byte %zu is %#x", big, i, q[i]);
		memset(q, 0x33, big);
		CHECK(q[big - 1] == 0x33);
		free(q);
	}
}

/* Lines of /proc/self/maps (mappings); -1 when unreadable. */
static long maps_count(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	long n = 0;
	for (int c; (c = fgetc(f)) != EOF;)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Secure mode: every freed huge mapping leaves its old range reserved PROT_NONE (the faults
 * themselves are test_harden's cases), but the quarantine keeps only the last 32 of them
 * within 1 GiB: after 200 frees of 6-15 MiB mappings (each freed range quarantined, the
 * pages moved and cached), the process has at most about that many more mappings and that
 * much more address space (here 42 mappings and 417 MiB more; an unbounded quarantine: 210
 * mappings more). */
static void test_huge_quarantine_bounded(void)
{
	const char *sec = getenv("PCPMALLOC_SECURE");
	if (!(sec && *sec == '1')) {
		printf("  huge quarantine: secure mode only, skipped\n");
		return;
	}
	malloc_trim(0);
	long m0 = maps_count();
	long long v0 = tu_vm_bytes();
	for (int i = 0; i < 200; i++) {
		size_t n = tu_opaque((size_t)(6 + i % 10) << 20);
		unsigned char *p = malloc(n);
		CHECK(p != NULL);
		p[0] = (unsigned char)i;
		p[n - 1] = (unsigned char)i;
		CHECK(p[0] == (unsigned char)i);
		free(p);
	}
	long m1 = maps_count();
	long long v1 = tu_vm_bytes();
	if (m0 < 0 || v0 < 0 || m1 < 0 || v1 < 0) {
		printf("  huge quarantine: /proc not readable, bounds not checked\n");
		return;
	}
	/* 32 quarantined ranges + 16 cached mappings (a gathered one may be two VMAs or more),
	 * and slack for the rest of the process */
	CHECKF(m1 - m0 <= 32 + 2 * 16 + 16,
	       "200 huge frees: %ld mappings more (quarantine unbounded?)", m1 - m0);
	/* 1 GiB of quarantine + the cache's 256 MiB + slack */
	CHECKF(v1 - v0 <= (1LL << 30) + (256LL << 20) + (64LL << 20),
	       "200 huge frees: %lld MiB more address space (quarantine unbounded?)",
	       (v1 - v0) >> 20);
	malloc_trim(0);
}

/* Mappings no request fits alone are gathered into one block with mremap: a cache hit whose
 * pages are the freed ones (moved, not fresh: they still hold the old bytes), every byte
 * usable, calloc's bytes zero, and realloc of such a block (several VMAs, which mremap
 * refuses to move as one) grows and shrinks it with its contents. */
static void test_huge_cache_gather(void)
{
	if (!tu_pcp.stat) {
		printf("  huge cache gather: not running on pcpmalloc, skipped (debug mode)\n");
		return;
	}
	/* secure mode gathers too, but the last page of each freed mapping was its guard page
	 * (it reads as zero after the move): the hit is checked, not the bytes; memcheck mode
	 * quarantines freed blocks: it only checks the blocks */
	const char *sec = getenv("PCPMALLOC_SECURE"), *vg = getenv("PCPMALLOC_VALGRIND");
	bool cached = !(vg && *vg == '1'), plain = cached && !(sec && *sec == '1');
	const size_t piece = tu_opaque(12u << 20), big = tu_opaque(20u << 20);
	for (int use_calloc = 0; use_calloc < 2; use_calloc++) {
		malloc_trim(0); /* empties the cache: a and c below are its only entries */
		unsigned char *a = malloc(piece), *b = malloc(piece), *c = malloc(piece);
		CHECK(a && b && c);
		memset(a, 0x11, piece);
		memset(b, 0x22, piece);
		memset(c, 0x44, piece);
		free(a);
		free(c); /* b stays: neither freed mapping holds 20 MiB */
		long long h0 = tu_pcp.stat("huge_cache_hits");
		unsigned char *q = use_calloc ? calloc(1, big) : malloc(big);
		CHECK(q != NULL);
		CHECK(malloc_usable_size(q) >= big);
		if (cached)
			CHECKF(tu_pcp.stat("huge_cache_hits") == h0 + 1,
			       "%s(%zu) with two freed %zu-byte mappings cached: no cache hit",
			       use_calloc ? "calloc" : "malloc", big, piece);
		if (plain) {
			if (!use_calloc)
				for (size_t i = 0; i < big; i += 4096)
					CHECKF(q[i] == 0x11 || q[i] == 0x44,
					       "malloc(%zu) gathered from freed mappings: page at %zu "
					       "reads %#x, not a moved page", big, i, q[i]);
		}
		if (use_calloc)
			for (size_t i = 0; i < big; i += 512)
				CHECKF(q[i] == 0, "calloc(%zu) from gathered mappings: byte %zu is %#x", big, i, q[i]);
		for (size_t i = 0; i < big; i += 4096)
			q[i] = (unsigned char)(i >> 12);
		q[big - 1] = 0x77;
		for (size_t i = 0; i < piece; i += 4096)
			CHECKF(b[i] == 0x22, "live block beside the gathered ones: byte %zu is %#x", i, b[i]);
		unsigned char *r = realloc(q, 2 * big);
		CHECK(r != NULL);
		for (size_t i = 0; i < big - 1; i += 4096)
			CHECKF(r[i] == (unsigned char)(i >> 12), "realloc grow of a gathered block: byte %zu is %#x", i, r[i]);
		CHECK(r[big - 1] == 0x77);
		memset(r + big, 0x55, big);
		unsigned char *s = realloc(r, big / 2 + 4096 * 3 + 1);
		CHECK(s != NULL);
		for (size_t i = 0; i < big / 2; i += 4096)
			CHECKF(s[i] == (unsigned char)(i >> 12), "realloc shrink: byte %zu is %#x", i, s[i]);
		free(s);
		free(b);
	}
}

/* realloc that shrinks a huge block (or grows it inside its last page) keeps it where it is,
 * in every mode: no copy of the block (secure mode copied the whole mapping for a 1-byte
 * shrink: 256 MiB took 0.7 s and doubled the resident memory); its bytes stay, and in secure
 * mode a write past the new end is still caught (test_harden). */
static void test_huge_realloc_shrink_in_place(void)
{
	const char *vg = getenv("PCPMALLOC_VALGRIND");
	if (vg && *vg == '1')
		return; /* memcheck mode moves every realloc (the old block's reads and writes fault) */
	const size_t n = tu_opaque(64u << 20);
	unsigned char *p = malloc(n);
	CHECK(p != NULL);
	for (size_t i = 0; i < n; i += 4096)
		p[i] = (unsigned char)(i >> 12);
	p[n - 1] = 0x5a;
	const size_t steps[] = {n - 1, n - 100000, n / 2 + 10, n / 2 + 20};
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		size_t m = steps[k];
		unsigned char *q = realloc(p, m);
		CHECKF(q == p, "realloc(%p, %zu) of a %zu-byte block moved it to %p", (void *)p, m, n, (void *)q);
		p = q;
		for (size_t i = 0; i < m; i += 4096)
			CHECKF(p[i] == (unsigned char)(i >> 12), "realloc(%zu): byte %zu is %#x", m, i, p[i]);
		p[m - 1] = 0x11; /* every byte up to the new end is the program's */
	}
	free(p);
}

/* A block gathered from a cached mapping too small for it has the moved pages first and
 * fresh ones after them: calloc clears the moved ones only, so a big sparse calloc after a
 * free of a smaller block costs no memset of its fresh pages and leaves them untouched (a
 * whole-block clear made calloc(1 GiB) take 5 s and 1 GiB resident). */
static void test_huge_calloc_fresh_tail(void)
{
	if (!tu_pcp.stat) {
		printf("  huge calloc fresh tail: not running on pcpmalloc, skipped (debug mode)\n");
		return;
	}
	const char *vg = getenv("PCPMALLOC_VALGRIND");
	if (vg && *vg == '1')
		return; /* memcheck mode quarantines freed blocks: nothing is gathered */
	const size_t piece = tu_opaque(8u << 20), big = tu_opaque(256u << 20);
	malloc_trim(0); /* empties the cache: a is its only entry */
	unsigned char *a = malloc(piece);
	CHECK(a != NULL);
	memset(a, 0x33, piece);
	free(a);
	long long h0 = tu_pcp.stat("huge_cache_hits"), rss0 = tu_rss_bytes();
	unsigned char *q = calloc(1, big);
	CHECK(q != NULL);
	long long grew = tu_rss_bytes() - rss0;
	CHECKF(tu_pcp.stat("huge_cache_hits") == h0 + 1, "calloc(%zu) after a %zu-byte free: no cache hit",
	       big, piece);
	CHECKF(grew < (long long)(64u << 20), "calloc(%zu) gathered from a %zu-byte mapping: resident "
	       "memory grew by %lld KiB (its fresh pages were cleared)", big, piece, grew >> 10);
	for (size_t i = 0; i < 2 * piece; i += 256)
		CHECKF(q[i] == 0, "calloc(%zu) gathered: byte %zu is %#x", big, i, q[i]);
	for (size_t i = 2 * piece; i < big; i += 4096)
		CHECKF(q[i] == 0, "calloc(%zu) gathered: byte %zu is %#x", big, i, q[i]);
	free(q);
}

static void test_pcpmalloc_stats(void)
{
	if (!tu_pcp.stat) {
		printf("  pcpmalloc_stat: not running on pcpmalloc, skipped (debug mode)\n");
		return;
	}
	const char *names[] = {"malloc_calls",  "free_calls",        "pgalloc_pcp",
			       "pgalloc_zone",  "pgfree_pcp",        "pgfree_zone",
			       "zone_lock",     "zone_lock_contended", "pcp_lock_contended",
			       "mapped_bytes",  "resident_bytes",    "zone_lock_hold_max_ns",
			       "zone_lock_long_holds", "zone_grow_waits", "huge_lock"};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		long long v = tu_pcp.stat(names[i]);
		CHECKF(v >= 0, "pcpmalloc_stat(\"%s\") = %lld", names[i], v);
	}
	CHECK_EQ(tu_pcp.stat("no_such_counter_xyz"), -1);
	CHECK_EQ(tu_pcp.stat(""), -1);

	enum { N = 1000 };
	static void *p[N];
	long long m0 = tu_pcp.stat("malloc_calls"), f0 = tu_pcp.stat("free_calls");
	for (int i = 0; i < N; i++) {
		p[i] = malloc(32 + (size_t)(i % 10) * 16);
		CHECK(p[i] != NULL);
	}
	long long m1 = tu_pcp.stat("malloc_calls");
	CHECKF(m1 - m0 >= N, "malloc_calls grew by %lld after %d mallocs (%lld -> %lld)", m1 - m0,
	       N, m0, m1);
	for (int i = 0; i < N; i++)
		free(p[i]);
	long long f1 = tu_pcp.stat("free_calls");
	CHECKF(f1 - f0 >= N, "free_calls grew by %lld after %d frees", f1 - f0, N);
	/* and not twice: secure mode's frees were counted by the free and by the stack push
	 * of the slot its quarantine ring gave back, memcheck mode's (PCPMALLOC_VALGRIND=1) by
	 * the free and by the release from its quarantine (free_calls twice the frees) */
	CHECKF(m1 - m0 <= N + 16 && f1 - f0 <= N + 16,
	       "malloc_calls grew by %lld, free_calls by %lld after %d mallocs and frees", m1 - m0,
	       f1 - f0, N);

	void *big = malloc(20 * TU_MIB);
	CHECK(big != NULL);
	memset(big, 1, 20 * TU_MIB);
	long long mapped = tu_pcp.stat("mapped_bytes");
	CHECKF(mapped >= (long long)(20 * TU_MIB), "mapped_bytes %lld with 20 MiB live", mapped);
	free(big);

	/* stats_json: snprintf-like. */
	size_t need = tu_pcp.stats_json(NULL, 0);
	CHECKF(need > 2, "stats_json needs %zu bytes", need);
	char *buf = malloc(need + 1);
	CHECK(buf != NULL);
	memset(buf, 'x', need + 1);
	size_t got = tu_pcp.stats_json(buf, need + 1);
	/* Counters move between the two calls (the malloc above); the length may change a bit. */
	CHECKF(got + 64 >= need && got <= need + 64, "need %zu then %zu", need, got);
	size_t len = strlen(buf);
	CHECKF(len <= need, "strlen %zu > %zu", len, need);
	CHECKF(buf[0] == '{', "json starts with '%c'", buf[0]);
	if (got <= need) {
		CHECKF(buf[len - 1] == '}' || buf[len - 1] == '\n', "json ends with '%c'",
		       buf[len - 1]);
	}
	CHECK(strstr(buf, "\"malloc_calls\"") != NULL);
	CHECK(strstr(buf, "\"mapped_bytes\"") != NULL);
	free(buf);
	char small[16];
	memset(small, 'x', sizeof(small));
	size_t full = tu_pcp.stats_json(small, sizeof(small));
	CHECKF(full > sizeof(small), "full length %zu", full);
	CHECKF(small[sizeof(small) - 1] == '\0', "%s", "truncated output not NUL-terminated");
	CHECK_EQ(strlen(small), sizeof(small) - 1);
	CHECK(small[0] == '{');
}

struct test_case {
	const char *name;
	void (*fn)(void);
};

/*
 * glibc's __libc_* entry points, which some programs call directly: a block from one of them
 * freed with free() (and the reverse) is one allocator's (aborted as an invalid pointer
 * before pcpmalloc exported them).
 */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static void test_libc_entry_points(void)
{
	const size_t sizes[] = {1, 100, 5000, 100000, 5 * TU_MIB};
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];
		unsigned char *p = __libc_malloc(n);
		CHECK(p != NULL);
		CHECK(malloc_usable_size(p) >= n);
		memset(p, 1, n);
		free(p);
		p = malloc(n);
		CHECK(p != NULL);
		__libc_free(p);
		p = __libc_calloc(1, n);
		CHECK(p != NULL && tu_first_nonzero(p, n) == SIZE_MAX);
		p = realloc(p, n * 2);
		CHECK(p != NULL);
		p = __libc_realloc(p, n / 2 + 1);
		CHECK(p != NULL);
		free(p);
		p = __libc_memalign(256, n);
		CHECK(p != NULL && ((uintptr_t)p & 255) == 0);
		free(p);
		p = __libc_valloc(n);
		CHECK(p != NULL && ((uintptr_t)p & (page_size - 1)) == 0);
		__libc_free(p);
		p = __libc_pvalloc(n);
		CHECK(p != NULL && malloc_usable_size(p) >= ((n + page_size - 1) & ~(page_size - 1)));
		free(p);
	}
	__libc_free(NULL);
}

/*
 * The paged slab classes (20, 24, 28 KiB; core/slab.h) and the sizes around their bounds:
 * objects of a slab are reused, so calloc must clear one that held data, realloc across the
 * classes keeps the contents, the aligned forms align, and nothing overlaps.
 */
static void test_paged_classes(void)
{
	static const size_t sizes[] = {16383, 16384, 16385, 20479, 20480, 20481, 24575, 24576,
				       24577, 28671, 28672, 28673, 32767, 32768, 32769};
	enum { N = sizeof(sizes) / sizeof(sizes[0]), K = 8 };
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < N; i++) {
			size_t n = tu_opaque(sizes[i]);
			unsigned char *v[K];
			for (int k = 0; k < K; k++) { /* dirty the objects, then free them */
				v[k] = malloc(n);
				CHECKF(v[k] && !((uintptr_t)v[k] & 15), "malloc(%zu)", n);
				CHECK(malloc_usable_size(v[k]) >= n);
				memset(v[k], 0xa5, malloc_usable_size(v[k]));
			}
			for (int k = 0; k < K; k++)
				free(v[k]);
			for (int k = 0; k < K; k++) { /* the same objects again: zeroed */
				v[k] = calloc(1, n);
				CHECK(v[k] != NULL);
				for (size_t j = 0; j < n; j++)
					CHECKF(v[k][j] == 0, "calloc(1, %zu): byte %zu is %#x", n, j, v[k][j]);
				for (size_t j = 0; j < n; j++)
					v[k][j] = (unsigned char)(j * 13 + k);
			}
			for (int k = 0; k < K; k++) { /* across the classes, up and down */
				size_t m = sizes[(i + 1 + (size_t)k * 3) % N];
				unsigned char *q = realloc(v[k], tu_opaque(m));
				CHECK(q != NULL);
				CHECK(malloc_usable_size(q) >= m);
				for (size_t j = 0; j < (n < m ? n : m); j++)
					CHECKF(q[j] == (unsigned char)(j * 13 + k), "realloc %zu -> %zu: byte %zu", n, m, j);
				v[k] = q;
			}
			for (int k = 0; k < K; k++)
				for (int l = k + 1; l < K; l++) /* (usable ranges never overlap) */
					CHECK(v[k] + malloc_usable_size(v[k]) <= v[l] ||
					      v[l] + malloc_usable_size(v[l]) <= v[k]);
			for (int k = 0; k < K; k++)
				free(v[k]);
			for (size_t a = 16; a <= 64 * TU_KIB; a *= 4) {
				void *p = NULL;
				CHECK(posix_memalign(&p, a, n) == 0);
				CHECKF(!((uintptr_t)p & (a - 1)), "posix_memalign(%zu, %zu): %p", a, n, p);
				memset(p, 1, n);
				free(p);
			}
		}
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_require_pcpmalloc("test_api");
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	const struct test_case cases[] = {
		{"malloc(0)", test_malloc_zero},
		{"malloc small sizes", test_malloc_sizes_small},
		{"malloc large sizes", test_malloc_sizes_large},
		{"no overlap", test_no_overlap},
		{"malloc impossible sizes", test_malloc_impossible},
		{"free(NULL) and errno", test_free_null_and_errno},
		{"successful calls keep errno", test_success_keeps_errno},
		{"calloc", test_calloc},
		{"calloc after page runs were split", test_calloc_after_split},
		{"realloc", test_realloc},
		{"reallocarray", test_reallocarray},
		{"posix_memalign", test_posix_memalign},
		{"aligned_alloc", test_aligned_alloc},
		{"memalign", test_memalign},
		{"valloc/pvalloc", test_valloc_pvalloc},
		{"malloc_usable_size", test_usable_size},
		{"malloc_trim", test_malloc_trim},
		{"mallinfo", test_mallinfo},
		{"malloc_stats", test_malloc_stats},
		{"free_sized", test_free_sized},
		{"pcpmalloc stats", test_pcpmalloc_stats},
		{"huge cache grows a cached mapping", test_huge_cache_grow},
		{"glibc's __libc_* entry points", test_libc_entry_points},
		{"huge cache gathers freed mappings", test_huge_cache_gather},
		{"huge calloc clears only the moved pages of a gathered block", test_huge_calloc_fresh_tail},
		{"huge realloc shrinks in place", test_huge_realloc_shrink_in_place},
		{"huge quarantine is bounded (secure mode)", test_huge_quarantine_bounded},
		{"paged slab classes (16-32 KiB)", test_paged_classes},
	};
	const char *only = getenv("PCPMALLOC_TEST_ONLY");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		if (only && !strstr(cases[i].name, only))
			continue;
		double t0 = tu_now();
		cases[i].fn();
		printf("ok %zu - %s (%.2f s)\n", i + 1, cases[i].name, tu_now() - t0);
	}
	return 0;
}
