/*
 * test_zone_far.c - the zone's far guards (secure mode, PCPMALLOC_SECURE_FAR_GUARD): a
 * 4 MiB block split for blocks of 1 MiB or less keeps its first and third MiB, the others
 * become guard pages.  Checks that every such block lies in those stretches, that the byte
 * 1 MiB past its end (and 1 MiB before its start in a third MiB) faults while the block
 * itself is writable, that blocks of 2 and 4 MiB still come whole from unguarded blocks, and
 * that the freed small blocks merge back to 1 MiB and no further.
 */
#include "unit.h"
#include "config.h"
#include "zone.h"

#include <setjmp.h>
#include <signal.h>
#include <string.h>

static sigjmp_buf jb;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

/* Does a one-byte write at q fault? (q's old byte is written back: no change) */
static bool faults(volatile char *q)
{
	if (sigsetjmp(jb, 1))
		return true;
	*q = *q;
	return false;
}

#define NBLK 24

int main(void)
{
	pcpm_config_init();
	pcpm_cfg.secure = 1;
	pcpm_cfg.secure_far_guard = 1;
	struct zone *z = &pcpm_zone;
	pcpm_zone_init(z);
	CHECK(z->far_guard);
	struct sigaction sa = { .sa_handler = on_segv };
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
	CHECK(sigaction(SIGBUS, &sa, NULL) == 0);

	const size_t mib = 1UL << 20;
	struct page *blk[NBLK];
	for (int i = 0; i < NBLK; i++) {
		/* blocks of 1 MiB and of 64 KiB: both must sit inside a data stretch */
		unsigned o = i & 1 ? ZONE_FAR_GUARD_ORDER : 4;
		blk[i] = zone_alloc_pages(z, o);
		CHECK(blk[i]);
		char *b = page_address(blk[i]);
		size_t len = PAGE_SIZE << o;
		size_t at = (uintptr_t)b & ((4 * mib) - 1); /* arenas are 4 MiB aligned */
		CHECK(at + len <= mib || (at >= 2 * mib && at + len <= 3 * mib));
		CHECK(!faults(b));
		CHECK(!faults(b + len - 1));
		CHECK(faults(b + len - 1 + mib)); /* the far overflow of issue 24 */
		if (at >= 2 * mib)
			CHECK(faults(b - mib));
	}
	/* blocks of 2 and 4 MiB: whole, from blocks no guard was laid in */
	for (unsigned o = ZONE_FAR_GUARD_ORDER + 1; o <= MAX_PAGE_ORDER; o++) {
		struct page *big = zone_alloc_pages(z, o);
		CHECK(big);
		char *b = page_address(big);
		for (size_t off = 0; off < (PAGE_SIZE << o); off += mib / 2)
			CHECK(!faults(b + off));
		zone_free_pages(z, big, o);
	}
	/* a small block never takes the free half beside a 2 MiB one (no guard there) */
	struct page *half = zone_alloc_pages(z, ZONE_FAR_GUARD_ORDER + 1);
	struct page *small = zone_alloc_pages(z, 0);
	CHECK(half && small);
	CHECK((uintptr_t)page_address(half) / (4 * mib) != (uintptr_t)page_address(small) / (4 * mib));
	CHECK(faults(page_address(small) + mib));
	zone_free_pages(z, small, 0);
	zone_free_pages(z, half, ZONE_FAR_GUARD_ORDER + 1);
	/* and the 4 MiB blocks freed whole stay whole */
	size_t whole = z->free_area[MAX_PAGE_ORDER].nr_free;
	CHECK(whole >= 1);
	for (int i = 0; i < NBLK; i++)
		zone_free_pages(z, blk[i], i & 1 ? ZONE_FAR_GUARD_ORDER : 4);
	/* the guarded blocks merged back into 1 MiB blocks, none larger; the whole ones stay */
	CHECK_EQ(z->free_pages, z->managed_pages);
	CHECK_EQ(z->free_area[MAX_PAGE_ORDER].nr_free, whole);
	CHECK_EQ((z->free_area[ZONE_FAR_GUARD_ORDER].nr_free << ZONE_FAR_GUARD_ORDER) +
			 (whole << MAX_PAGE_ORDER),
		 z->managed_pages);
	for (unsigned o = ZONE_FAR_GUARD_ORDER + 1; o < MAX_PAGE_ORDER; o++)
		CHECK_EQ(z->free_area[o].nr_free, 0);
	printf("test_zone_far: ok (%zu MiB managed)\n", z->managed_pages >> 8);
	return 0;
}
