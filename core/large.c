/*
 * large.c - page-run blocks (see large.h).  Whole blocks, as alloc_pages(): a freed block
 * merges back whole, so the next request of that order reuses it while it is resident;
 * trimming each block to the page instead leaves tails that other sizes take, and the
 * buddies never meet again.  Pages past the request cost address space only until the
 * program touches them.  Calls the pcp, zone and huge layers.
 */
#include "large.h"
#include "zone_purge.h"
#include "os.h"

void *large_alloc(size_t size, size_t align, bool *run)
{
	*run = false;
	if (unlikely(pcpm_nested()))
		return huge_alloc_nested(ALIGN_UP(size, PAGE_SIZE), align);
	if (size > HUGE_THRESHOLD || align > HUGE_THRESHOLD)
		return huge_alloc(ALIGN_UP(size, PAGE_SIZE), align);
	size_t np = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
	unsigned order = (unsigned)ilog2_ceil(np);
	unsigned align_order = align > PAGE_SIZE ? (unsigned)ilog2_ceil(align >> PAGE_SHIFT) : 0;
	struct page *pg;
	for (int attempt = 0;; attempt++) {
		unsigned o = MAX(order, align_order);
		pg = pcp_alloc(o); /* orders above 3 go straight to the zone */
		np = 1UL << o;
		if (pg || attempt)
			break;
		/* __alloc_pages_direct_reclaim's rule: drain every pcp, then retry once */
		pcp_drain_all();
	}
	if (!pg)
		return NULL;
	*run = true;
	pg->npages = (uint32_t)np;
	pg->state = PG_LARGE;
	return page_address(pg);
}

/* A run of 2^k pages that starts on a 2^k boundary is a buddy block: it goes back as one
 * (through the pcp for k <= 3).  Other runs (realloc resized them) go back page-run-wise;
 * a run extended in place can have a power-of-two length without that alignment. */
static void large_free_pages(struct page *pg, size_t np)
{
	if (!(np & (np - 1)) && !(page_pfn(pg) & (np - 1))) {
		pcp_free(pg, (unsigned)ilog2_ceil(np));
		return;
	}
	zone_free_run(page_zone(pg), pg, np);
	zone_free_done(page_zone(pg));
}

void large_free(struct page *pg)
{
	size_t np = pg->npages;
	pg->state = PG_NONE;
	large_free_pages(pg, np);
}

void large_free_nested(struct page *pg)
{
	pg->state = PG_NONE;
	zone_free_run_nested(page_zone(pg), pg);
}

bool large_resize(struct page *pg, size_t nnp)
{
	size_t np = pg->npages;
	if (nnp > np) {
		if (!zone_extend_run(page_zone(pg), pg, np, nnp))
			return false;
		pg->npages = (uint32_t)nnp;
	} else if (nnp <= np / 2) { /* a tail worth giving back goes to the zone */
		pg->npages = (uint32_t)nnp;
		struct page *tail = pg + nnp;
		tail->flags = pg->flags;
		tail->arena = pg->arena;
		zone_free_run(page_zone(pg), tail, np - nnp);
		zone_free_done(page_zone(pg));
	}
	return true;
}
