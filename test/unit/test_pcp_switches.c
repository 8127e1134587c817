/*
 * test_pcp_switches.c - each PCPMALLOC_* switch of the pcp heuristics changes exactly the
 * rule it names (kernel-pcp.md §4-§5), on a pcp with known inputs.  Each scenario sets the
 * switch in pcpm_cfg, re-creates the pcps (pcpm_pcp_init, as at start-up) and drives one CPU.
 */
#define _GNU_SOURCE
#include "unit.h"
#include "config.h"
#include "pcp.h"
#include "topology.h"


static struct per_cpu_pages *fresh_pcp(void)
{
	if (pcpm_pcp)
		pcp_drain_all();
	pcpm_pcp_init();
	return &pcpm_pcp[pcp_cpu()];
}

static void defaults(void)
{
	pcpm_config_init();
	pcpm_cfg.high_max = 4096;
	pcpm_cfg.decay_ms = 3600000;
}

/* Refill sizes of consecutive order-0 refills with no free in between. */
static void refills(struct per_cpu_pages *pcp, int n, int *out)
{
	static struct page *held[8192];
	int nh = 0;
	for (int r = 0; r < n; r++) {
		uint64_t before = pcp->refill_pages;
		held[nh++] = pcp_alloc(0);
		out[r] = (int)(pcp->refill_pages - before);
		while (pcp->count)
			held[nh++] = pcp_alloc(0);
	}
	while (nh)
		pcp_free(held[--nh], 0);
}

/* How many order-2 frees in a row until free_high fires (0: it never did in 300). */
static int frees_until_free_high(struct per_cpu_pages *pcp)
{
	static struct page *b[300];
	for (int i = 0; i < 300; i++)
		b[i] = pcp_alloc(2);
	pcp_drain_all();
	pcp->free_count = 0;
	pcp->flags &= ~PCPF_PREV_FREE_HIGH_ORDER;
	uint64_t fh = pcp->free_high_drains;
	int hit = 0;
	for (int i = 0; i < 300; i++) {
		pcp_free(b[i], 2);
		if (!hit && pcp->free_high_drains != fh)
			hit = i + 1;
	}
	return hit;
}

int main(void)
{
	unit_pin_cpu0();
	defaults();
	pcpm_topology_init();
	pcpm_zone_init(&pcpm_zone);
	struct per_cpu_pages *pcp;
	int r[6];

	/* PCPMALLOC_ALLOC_SCALE=1 (default): 63, 126, 252, 504 (kernel-pcp.md §4.2) */
	pcp = fresh_pcp();
	refills(pcp, 4, r);
	CHECK_EQ(r[0], 63);
	CHECK_EQ(r[1], 126);
	CHECK_EQ(r[2], 252);
	CHECK_EQ(r[3], 504);
	/* PCPMALLOC_ALLOC_SCALE=0: every refill is one batch */
	pcpm_cfg.alloc_scale = 0;
	pcp = fresh_pcp();
	refills(pcp, 4, r);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(r[i], 63);
	CHECK_EQ(pcp->alloc_factor, 0);
	/* PCPMALLOC_BATCH_SCALE_MAX=2: alloc_factor stops at 2: 63, 126, 252, 252 */
	defaults();
	pcpm_cfg.batch_scale_max = 2;
	pcp = fresh_pcp();
	refills(pcp, 5, r);
	CHECK_EQ(r[2], 252);
	CHECK_EQ(r[3], 252);
	CHECK_EQ(r[4], 252);

	/* PCPMALLOC_BATCH=31: zone_batchsize overridden; high_min follows (4 * batch) */
	defaults();
	pcpm_cfg.batch = 31;
	pcp = fresh_pcp();
	CHECK_EQ(pcp->batch, 31);
	CHECK_EQ(pcp->high_min, 124);

	/*
	 * free_high thresholds, PCPF_FREE_HIGH_BATCH off.  Order-2 frees add 4 pages to
	 * free_count after the test, and the first free of a run cannot fire (no previous
	 * high-order free): the k-th free fires when 4 * (k - 1) >= T.
	 * default T = batch + high_min / 2 = 63 + 126 = 189 -> k = 49
	 * PCPMALLOC_FREE_HIGH_THRESH=63 (the 6.7 rule, free_count >= batch) -> k = 17
	 */
	defaults();
	pcpm_cfg.free_high_batch = 0;
	pcp = fresh_pcp();
	CHECK(!(pcp->flags & PCPF_FREE_HIGH_BATCH));
	CHECK_EQ(frees_until_free_high(pcp), 49);
	pcpm_cfg.free_high_thresh = 63;
	pcp = fresh_pcp();
	CHECK_EQ(frees_until_free_high(pcp), 17);
	/* PCPMALLOC_FREE_HIGH=0: never */
	defaults();
	pcpm_cfg.free_high = 0;
	pcpm_cfg.free_high_batch = 0;
	pcp = fresh_pcp();
	CHECK_EQ(frees_until_free_high(pcp), 0);
	CHECK_EQ(pcp->free_high_drains, 0);
	/* PCPMALLOC_FREE_HIGH_BATCH=1 forces the flag; =0 clears it whatever the slice */
	defaults();
	pcpm_cfg.free_high_batch = 1;
	pcp = fresh_pcp();
	CHECK(pcp->flags & PCPF_FREE_HIGH_BATCH);
	pcpm_cfg.free_high_batch = 0;
	pcp = fresh_pcp();
	CHECK(!(pcp->flags & PCPF_FREE_HIGH_BATCH));
	/* auto: set iff slice pages > 3 * batch (PCPMALLOC_SLICE_FACTOR) */
	defaults();
	pcpm_cfg.slice_factor = 64;
	pcp = fresh_pcp();
	const struct pcpm_cpu_cache *cc = pcpm_cpu_cache(0);
	CHECK_EQ(!!(pcp->flags & PCPF_FREE_HIGH_BATCH), (cc->slice_bytes >> 12) > 64 * 63);

	/*
	 * decay_pcp_high, both modes.  high 4000, count 1000, high_min 252:
	 * mainline: high - high >> 3 = 4000 - 500 = 3500.
	 * count_min (RFC): high - min(count_min, high / 5) = 4000 - min(300, 800) = 3700,
	 * and count_min restarts at count.
	 */
	defaults();
	pcp = fresh_pcp();
	static struct page *k[1000];
	for (int i = 0; i < 1000; i++)
		k[i] = pcp_alloc(0);
	for (int i = 0; i < 1000; i++)
		pcp_free(k[i], 0);
	CHECK(pcp->count >= 1000);
	int count = pcp->count;
	pcp->high = 4000;
	pcpm_cfg.decay_ms = 1;
	pcp->last_decay_ms = 0;
	pcp_decay_all(pcpm_now_ms() + 10);
	CHECK_EQ(pcp->high, 3500);
	CHECK_EQ(pcp->count, count); /* below high: nothing drained */
	pcpm_cfg.decay_mode = DECAY_COUNT_MIN;
	pcp->high = 4000;
	pcp->count_min = 300;
	pcp->last_decay_ms = 0;
	pcp_decay_all(pcpm_now_ms() + 20);
	CHECK_EQ(pcp->high, 3700);
	CHECK_EQ(pcp->count_min, pcp->count);
	/* decay never drains more than batch << 5 below count per period: high 300, count
	 * 3000 -> high = max(3000 - 2016, 300 - 37, 252) = 984, and count - high is drained */
	pcpm_cfg.decay_mode = DECAY_MAINLINE;
	static struct page *m[3000];
	for (int i = 0; i < 3000; i++)
		m[i] = pcp_alloc(0);
	pcp_drain_all();
	pcp->high = 4096;
	for (int i = 0; i < 3000; i++)
		pcp_free(m[i], 0);
	CHECK(pcp->count >= 3000);
	count = pcp->count;
	pcp->high = 300;
	pcp->last_decay_ms = 0;
	pcp_decay_all(pcpm_now_ms() + 30);
	CHECK_EQ(pcp->high, count - 2016);
	CHECK_EQ(pcp->count, pcp->high);
	printf("pcp switches: ok\n");
	return 0;
}
