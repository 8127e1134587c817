/*
 * test_ulimit.c - out of memory for real: run under `ulimit -v` (meson starts it through
 * bash with the limit set, LD_PRELOAD=libpcpmalloc.so), so the kernel refuses mmap and
 * mprotect once the address space is used up.
 *
 * Round 1 allocates blocks from 64 MiB down to 64 bytes until each size fails, and checks
 * that the failure is NULL + ENOMEM.  With memory exhausted, every API fails as documented
 * (malloc, calloc, realloc - which keeps its block -, reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc: NULL/ENOMEM; bad alignments still EINVAL), and
 * every held block still holds its pattern.  Everything is freed and trimmed; allocations
 * succeed again (memory is back); round 2 must get at least 90% of round 1's bytes (nothing
 * leaked).  Each round starts with address_space_back (below).  Usage: test_ulimit [short|long]
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "testutil.h"

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#define ALIGN64K(x) ((x) & ~(64 * TU_KIB - 1))

struct blk {
	unsigned char *p;
	size_t n;
	uint64_t seed;
};
#define MAX_BLOCKS (1 << 20)
static struct blk *held;
static size_t nheld;
static uint64_t serial;

/* The touched part of a block: its first and last 64 bytes (word by word) and one word
 * every 64 KiB between; the word at offset off holds tu_word(seed, off).  Blocks are
 * multiples of 64 bytes.  check: verify instead of fill. */
static void touch(const struct blk *b, int check)
{
	size_t tail = b->n > 128 ? b->n - 64 : 64;
	for (size_t off = 0; off < b->n;
	     off = off < 64 || off >= tail ? off + 8 : MIN(ALIGN64K(off) + 64 * TU_KIB, tail)) {
		uint64_t w = tu_word(b->seed, off);
		if (!check)
			memcpy(b->p + off, &w, 8);
		else
			CHECKF(!memcmp(b->p + off, &w, 8), "block %p (%zu bytes) corrupted at %zu",
			       (void *)b->p, b->n, off);
	}
}
static void fill(struct blk *b)
{
	touch(b, 0);
}

static void verify(const struct blk *b)
{
	touch(b, 1);
}

static size_t exhaust(void)
{
	static const size_t sizes[] = {64 * TU_MIB, 8 * TU_MIB, TU_MIB, 128 * TU_KIB,
				       16 * TU_KIB, TU_KIB, 64};
	size_t total = 0;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (;;) {
			CHECKF(nheld < MAX_BLOCKS, "%zu blocks and memory not exhausted", nheld);
			errno = 0;
			unsigned char *p = malloc(tu_opaque(sizes[s]));
			if (!p) {
				CHECKF(errno == ENOMEM, "malloc(%zu) failed with errno %d", sizes[s],
				       errno);
				break;
			}
			struct blk *b = &held[nheld++];
			b->p = p;
			b->n = sizes[s];
			b->seed = tu_seed(p, ++serial);
			fill(b);
			total += sizes[s];
		}
	}
	return total;
}

#define EXPECT_ENOMEM(call)                                                                 \
	do {                                                                                \
		errno = 0;                                                                  \
		void *r_ = (call);                                                          \
		CHECKF(r_ == NULL && errno == ENOMEM, "%s: %p, errno %d", #call, r_, errno); \
	} while (0)

static void apis_when_exhausted(void)
{
	size_t big = tu_opaque(64 * TU_MIB);
	EXPECT_ENOMEM(malloc(big));
	EXPECT_ENOMEM(calloc(1, big));
	EXPECT_ENOMEM(calloc(big / 16, 16));
	EXPECT_ENOMEM(aligned_alloc(4096, big));
	EXPECT_ENOMEM(memalign(TU_MIB, big));
	EXPECT_ENOMEM(valloc(big));
	EXPECT_ENOMEM(pvalloc(big));
	struct blk *b = &held[0];
	EXPECT_ENOMEM(realloc(b->p, big + b->n));
	EXPECT_ENOMEM(reallocarray(b->p, big / 8 + b->n, 8));
	verify(b); /* a failed realloc keeps the block */
	void *q = (void *)0x1234;
	errno = 77;
	CHECK_EQ(posix_memalign(&q, 4096, big), ENOMEM);
	/* glibc leaves ENOMEM in errno as well as returning it (issue 26 item 5) */
	CHECK(q == (void *)0x1234 && errno == ENOMEM);
	/* bad alignments are still EINVAL, not ENOMEM */
	CHECK_EQ(posix_memalign(&q, 24, 16), EINVAL);
	errno = 0;
	CHECK(aligned_alloc(tu_opaque(24), 16) == NULL && errno == EINVAL);
}

static void free_all(void)
{
	for (size_t i = 0; i < nheld; i++) {
		verify(&held[i]);
		free(held[i].p);
	}
	nheld = 0;
	malloc_trim(0);
}

static void memory_is_back(void)
{
	for (size_t n = 64; n <= 32 * TU_MIB; n *= 4) {
		unsigned char *p = malloc(n);
		CHECKF(p, "malloc(%zu) failed after everything was freed", n);
		struct blk b = {p, n, tu_seed(p, ++serial)};
		fill(&b);
		verify(&b);
		free(p);
		unsigned char *z = calloc(1, n);
		CHECKF(z, "calloc(%zu) failed after everything was freed", n);
		CHECK(tu_first_nonzero(z, MIN(n, 4 * TU_MIB)) == SIZE_MAX);
		free(z);
	}
}

/*
 * A burst that uses the address space up, freed without malloc_trim: a big block must fit
 * again at once, as it does on glibc (its heap shrinks on free).  Free pages still
 * reserved by an arena count against ulimit -v; before pcpmalloc unmapped the free ends of
 * its arenas (zone_shrink_arenas), malloc(8 MiB) failed here, and so did an mmap of the
 * program's own.  bs: the burst's block size.
 */
static void address_space_back(size_t bs, size_t limit)
{
	size_t n = 0;
	while (n < MAX_BLOCKS && (held[n].p = malloc(bs)) != NULL) {
		held[n].n = bs;
		held[n].seed = tu_seed(held[n].p, ++serial);
		fill(&held[n]);
		n++;
	}
	CHECKF(n * bs > limit / 2, "burst of %zu-byte blocks: only %zu MiB", bs, n * bs >> 20);
	for (size_t i = 0; i < n; i++) {
		verify(&held[i]);
		free(held[i].p);
	}
	size_t big = limit / 2;
	/* another library's mapping (a thread stack, a file) first: no allocator call between
	 * the frees and it, as glibc's trim on free allows */
	void *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECKF(m != MAP_FAILED, "mmap(%zu MiB) failed after a %zu MiB burst of %zu-byte blocks "
				"was freed (limit %zu MiB)", big >> 20, n * bs >> 20, bs, limit >> 20);
	munmap(m, big);
	unsigned char *p = malloc(big);
	CHECKF(p, "malloc(%zu MiB) failed after a %zu MiB burst of %zu-byte blocks was freed "
		  "(limit %zu MiB)", big >> 20, n * bs >> 20, bs, limit >> 20);
	struct blk b = {p, big, tu_seed(p, ++serial)};
	fill(&b);
	verify(&b);
	free(p);
}

int main(int argc, char **argv)
{
	tu_require_pcpmalloc("test_ulimit");
	tu_watchdog(240);
	int rounds = tu_long_mode(argc, argv) ? 10 : 2;
	struct rlimit rl;
	CHECK(getrlimit(RLIMIT_AS, &rl) == 0);
	CHECKF(rl.rlim_cur != RLIM_INFINITY, "run me under ulimit -v (meson does)");
	held = mmap(NULL, MAX_BLOCKS * sizeof(*held), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(held != MAP_FAILED);
	size_t first = 0;
	for (int r = 0; r < rounds; r++) {
		address_space_back(64 * TU_KIB, rl.rlim_cur);
		address_space_back(1000 / 64 * 64, rl.rlim_cur);
		size_t total = exhaust();
		apis_when_exhausted();
		size_t n = nheld;
		free_all();
		memory_is_back();
		printf("round %d: %zu MiB in %zu blocks before ENOMEM (limit %llu MiB)\n", r + 1,
		       total >> 20, n, (unsigned long long)rl.rlim_cur >> 20);
		if (r == 0)
			first = total;
		else
			CHECKF(total >= first / 10 * 9, "round %d got %zu bytes, round 1 %zu: leak?",
			       r + 1, total, first);
	}
	return 0;
}
