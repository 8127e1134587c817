/*
 * test_zone_far.c - the zone's far guards (secure mode, PCPMALLOC_SECURE_FAR_GUARD): of
 * every 4 MiB block grown only the first and third MiB reach the buddy, the others are
 * guard pages.  Checks that every block handed out lies in those stretches, that the byte
 * 1 MiB past its end (and 1 MiB before its start) faults while the block itself is
 * writable, that no block above 1 MiB is formed (zone_alloc_pages and zone_alloc_run give
 * NULL, without growing for ever), and that the freed blocks merge back to 1 MiB and no
 * further.
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
	/* never formed, and asking does not grow the zone */
	size_t managed = z->managed_pages;
	CHECK(zone_alloc_pages(z, ZONE_FAR_GUARD_ORDER + 1) == NULL);
	CHECK(zone_alloc_pages(z, MAX_PAGE_ORDER) == NULL);
	CHECK(zone_alloc_run(z, (2 * mib) >> PAGE_SHIFT, 0) == NULL);
	CHECK_EQ(z->managed_pages, managed);

	for (int i = 0; i < NBLK; i++)
		zone_free_pages(z, blk[i], i & 1 ? ZONE_FAR_GUARD_ORDER : 4);
	/* everything merged back into 1 MiB blocks, none larger */
	CHECK_EQ(z->free_pages, z->managed_pages);
	CHECK_EQ(z->free_area[ZONE_FAR_GUARD_ORDER].nr_free << ZONE_FAR_GUARD_ORDER, z->managed_pages);
	for (unsigned o = ZONE_FAR_GUARD_ORDER + 1; o < NR_PAGE_ORDERS; o++)
		CHECK_EQ(z->free_area[o].nr_free, 0);
	printf("test_zone_far: ok (%zu MiB managed)\n", z->managed_pages >> 8);
	return 0;
}
