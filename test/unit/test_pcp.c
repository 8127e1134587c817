/*
 * test_pcp.c - the per-CPU pageset formulas against values worked out by hand from
 * kernel-pcp.md, and its page accounting.  The thread is pinned so it always meets the
 * same pcp.
 */
#define _GNU_SOURCE
#include "unit.h"
#include "config.h"
#include "pcp.h"
#include "topology.h"


static int list_pages(struct per_cpu_pages *pcp)
{
	int n = 0;
	for (int o = 0; o < NR_PCP_LISTS; o++)
		for (struct list_head *e = pcp->lists[o].next; e != &pcp->lists[o]; e = e->next) {
			CHECK_EQ(((struct page *)e)->state, PG_PCP);
			CHECK_EQ(((struct page *)e)->order, o);
			n += 1 << o;
		}
	return n;
}

int main(void)
{
	unit_pin_cpu0();

	pcpm_config_init();
	pcpm_cfg.high_max = 4096;   /* a known ceiling for the arithmetic below */
	pcpm_cfg.decay_ms = 3600000; /* no decay during the test */
	pcpm_topology_init();
	pcpm_zone_init(&pcpm_zone);
	pcpm_pcp_init();
	struct per_cpu_pages *pcp = &pcpm_pcp[pcp_cpu()];
	CHECK(pcp_cpu() == pcp_cpu());

	/* zone_batchsize() on the 1 GiB floor (262144 pages): min(262144 >> 12, 256 KiB / 4 KiB)
	 * = 64; 64 + 64/2 = 96; rounddown_pow_of_two(96) - 1 = 63. */
	CHECK_EQ(pcp->batch, 63);
	CHECK_EQ(pcp->high_min, 4 * 63); /* high_min = 4 * batch = 252 */
	CHECK_EQ(pcp->high_max, 4096);

	/*
	 * nr_pcp_alloc with alloc_factor: each refill while only allocating doubles, as in
	 * kernel-pcp.md §4.2: 63, 126, 252, 504, 1008, then batch << 5 = 2016 (cap 5).
	 * high grows by each refill: 252 -> 315 -> 441 -> 693 -> 1197 -> 2205 -> 4096.
	 */
	static struct page *held[20000];
	struct page *x;
	int nheld = 0;
	int expect[] = { 63, 126, 252, 504, 1008, 2016 };
	int expect_high[] = { 315, 441, 693, 1197, 2205, 4096 };
	for (int r = 0; r < 6; r++) {
		uint64_t before = pcp->refill_pages;
		held[nheld++] = pcp_alloc(0); /* list empty: refill */
		CHECK_EQ(pcp->refill_pages - before, expect[r]);
		CHECK_EQ(pcp->high, expect_high[r]);
		CHECK_EQ(pcp->count, expect[r] - 1);
		CHECK_EQ(list_pages(pcp), pcp->count);
		while (pcp->count)
			held[nheld++] = pcp_alloc(0);
	}
	CHECK_EQ(pcp->alloc_factor, 5);
	/* one free halves alloc_factor (free_frozen_page_commit) */
	pcp_free(held[--nheld], 0);
	CHECK_EQ(pcp->alloc_factor, 2);
	CHECK_EQ(pcp->count, 1);

	/* Freeing everything: count never stays at or above high, every page is accounted. */
	uint64_t pg_before = pcp->pgfree_pcp;
	while (nheld) {
		pcp_free(held[--nheld], 0);
		CHECK(pcp->count < pcp->high);
		CHECK_EQ(list_pages(pcp), pcp->count);
	}
	CHECK_EQ(pcp->pgfree_pcp - pg_before, 3969 - 1);
	/* 3969 pages fit under high (4096): all stay cached, no drain */
	CHECK_EQ(pcp->count, 3969);
	CHECK_EQ(pcp->drains, 0);
	/* With a lower ceiling the next free drains clamp(free_count, batch, high - batch):
	 * free_count was capped at batch << 5 = 2016, the alloc halves it to 1008, the free adds
	 * 1: 1009 pages, freed in chunks of batch: 16 x 63 + 1 = 17 free_pcppages_bulk calls. */
	pcp->high_max = 2000;
	x = pcp_alloc(0);
	pcp_free(x, 0);
	CHECK_EQ(pcp->drains, 17);
	CHECK_EQ(pcp->drain_pages, 1009);
	CHECK_EQ(pcp->count, 3969 - 1009);
	pcp->high_max = 4096;

	/* free_count: consecutive frees add pages, capped at batch << 5; an alloc halves it. */
	int fc = pcp->free_count;
	CHECK(fc <= 63 << 5);
	x = pcp_alloc(0);
	CHECK_EQ(pcp->free_count, fc / 2);
	pcp_free(x, 0);

	/*
	 * free_high: order-1..3 frees in a row drain the pcp once free_count reaches
	 * batch + high_min / 2 = 63 + 126 = 189 pages, unless PCPF_FREE_HIGH_BATCH is set and
	 * count < batch.  Force the flag off to test the plain rule.
	 */
	pcp_drain_all();
	CHECK_EQ(pcp->count, 0);
	pcp->flags &= ~PCPF_FREE_HIGH_BATCH;
	static struct page *o2[400];
	for (int i = 0; i < 400; i++)
		o2[i] = pcp_alloc(2);
	pcp_drain_all();
	pcp->free_count = 0;
	uint64_t fh = pcp->free_high_drains;
	int i = 0;
	/* 4 pages per free: the free that sees free_count >= 189 with the previous free also
	 * high-order is number ceil(189 / 4) + 1 = 49 (free_count is raised after the test) */
	int h = 0;
	for (; i < 400 && pcp->free_high_drains == fh; i++) {
		h = pcp->high;
		pcp_free(o2[i], 2);
	}
	CHECK_EQ(i, 49);
	CHECK_EQ(pcp->count, 0); /* drained: min(count, batch << 5) pages */
	/* high dropped by batch << 5 (floored at high_min) */
	h = h > pcp->high_max ? pcp->high_max : h;
	CHECK_EQ(pcp->high, h - 2016 > pcp->high_min ? h - 2016 : pcp->high_min);
	while (i < 400)
		pcp_free(o2[i++], 2);

	/* with PCPF_FREE_HIGH_BATCH, at least batch pages stay before a free_high drain */
	pcp_drain_all();
	pcp->flags |= PCPF_FREE_HIGH_BATCH;
	for (int k = 0; k < 400; k++)
		o2[k] = pcp_alloc(2);
	pcp_drain_all();
	pcp->free_count = 200;
	pcp->flags |= PCPF_PREV_FREE_HIGH_ORDER;
	fh = pcp->free_high_drains;
	for (i = 0; i < 400 && pcp->free_high_drains == fh; i++)
		pcp_free(o2[i], 2);
	CHECK_EQ(i, 16); /* 16 * 4 = 64 >= batch (63) pages before the drain fires */
	while (i < 400)
		pcp_free(o2[i++], 2);

	/* decay_pcp_high: high falls by high >> 3 per period, never below high_min */
	pcp_drain_all();
	pcp->high = 4000;
	pcpm_cfg.decay_ms = 1;
	pcp->last_decay_ms = 0;
	pcp_decay_all(pcpm_now_ms() + 10);
	CHECK_EQ(pcp->high, 4000 - 500);

	/* slabs of orders 4-5 in bulk: six order-4 blocks in one zone lock hold (the zone has a
	 * free 4 MiB block after these two lines), and back in one more */
	pcpm_cfg.dirty_min_mb = 1024; /* no purge on the way: exact lock counts */
	struct page *blk = pcp_alloc(MAX_PAGE_ORDER);
	CHECK(blk);
	pcp_free(blk, MAX_PAGE_ORDER);
	struct page *bulk[6];
	uint64_t acq = pcpm_zone.ls.acquired;
	CHECK_EQ(pcp_alloc_bulk(4, 6, bulk), 6);
	CHECK_EQ(pcpm_zone.ls.acquired, acq + 1);
	for (int k = 0; k < 6; k++)
		CHECK(bulk[k]->state == PG_NONE && (page_pfn(bulk[k]) & 15) == 0);
	pcp_free_bulk(4, 6, bulk);
	CHECK_EQ(pcpm_zone.ls.acquired, acq + 2);
	printf("pcp: batch %d high_min %d high_max %d, %llu drains, %llu free_high drains\n",
	       pcp->batch, pcp->high_min, pcp->high_max, (unsigned long long)pcp->drains,
	       (unsigned long long)pcp->free_high_drains);
	return 0;
}
