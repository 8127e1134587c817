/*
 * test_numa.c - one zone per NUMA node, on a fake 2-node layout set up with pcpm_numa_setup
 * (what topology discovery calls): a CPU of node 1 refills from zone 1, a freed page goes back
 * to its own zone through the freeing CPU's pcp of that zone (remote pageset), a remote
 * pageset expires after 3 periods (kernel-pcp.md §5.3) while a local one does not, an
 * exhausted zone falls back along the zonelist (numa_miss / numa_foreign), and arenas get
 * mbind'ed: both fake nodes are mapped to the kernel's node 0, which every machine has, so the
 * real mbind path runs here and get_mempolicy must show the policy on the zones' memory.
 */
#define _GNU_SOURCE
#include "unit.h"
#include "config.h"
#include "pcp.h"
#include "topology.h"

#include <errno.h>
#include <string.h>
#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct zone *const z0 = &pcpm_zones[0], *const z1 = &pcpm_zones[1];

/* Every CPU slot on node nid (a slot may change node; zones are only ever added). */
static void all_cpus_on(int nid)
{
	static int cpu_node[4096];
	int os_node[2] = { 0, 0 };
	CHECK(pcpm_nr_cpus <= 4096);
	for (int i = 0; i < pcpm_nr_cpus; i++)
		cpu_node[i] = nid;
	CHECK_EQ(pcpm_numa_setup(2, cpu_node, os_node, NUMA_BIND_PREFERRED), 0);
}

/* Every free block of z lies in one of z's arenas: its head's arena byte names an arena of
 * z's node, and the head is that arena's descriptor of its address. */
static void check_free_lists(struct zone *z, int node)
{
	size_t pages = 0;
	for (unsigned o = 0; o <= MAX_PAGE_ORDER; o++)
		for (int d = 0; d < 2; d++)
			for (struct list_head *e = z->free_area[o].free_list[d].next;
			     e != &z->free_area[o].free_list[d]; e = e->next) {
				struct page *h = (struct page *)e;
				struct arena *a = arena_of_page(h);
				CHECK(a->node == node);
				CHECK((size_t)(h - a->desc) < (a->committed >> PAGE_SHIFT));
				CHECK(pcpm_page_of(page_address(h)) == h);
				CHECK_EQ(h->order, o);
				pages += 1UL << o;
			}
	CHECK_EQ(pages, z->free_pages);
}

static int mempolicy_of(void *p)
{
	int mode = -1;
	unsigned long mask[16];
	CHECK(syscall(SYS_get_mempolicy, &mode, mask, 8 * sizeof(mask), p, MPOL_F_ADDR) == 0);
	return mode;
}

int main(void)
{
	unit_pin_cpu0();

	pcpm_config_init();
	pcpm_cfg.decay_ms = 3600000; /* periods pass only when the test says so */
	pcpm_cfg.free_high = 0;
	pcpm_topology_init();
	pcpm_zone_init(&pcpm_zone);
	pcpm_pcp_init();
	unsigned cpu = pcp_cpu();

	/* Before discovery: one zone, every CPU on node 0. */
	CHECK_EQ(atomic_load(&pcpm_nr_zones), 1);
	CHECK_EQ(pcp_cpu_node(cpu), 0);
	CHECK_EQ(pcpm_numa_setup(MAX_NUMNODES + 1, NULL, NULL, -1), -1);

	/* The CPU learns it is on node 1: its refill comes from zone 1, zone 0 is untouched. */
	all_cpus_on(1);
	CHECK_EQ(atomic_load(&pcpm_nr_zones), 2);
	CHECK_EQ(pcp_cpu_node(cpu), 1);
	struct page *a = pcp_alloc(0);
	CHECK(a && page_zone(a) == z1);
	CHECK_EQ(zone_pcp(z1, cpu)->refills, 1);
	CHECK_EQ(zone_pcp(z0, cpu)->refills, 0);
	CHECK_EQ(z0->managed_pages, 0);
	CHECK(z1->managed_pages > 0);
	struct page *big = pcp_alloc(5); /* above the pcp orders: straight from the zone */
	CHECK(big && page_zone(big) == z1);
	/* zone 1's arena is bound (to the kernel's node 0: the only node every machine has) */
	CHECK_EQ(z1->grower.mbind_failed, 0);
	CHECK_EQ(mempolicy_of(page_address(a)), MPOL_PREFERRED);


	/* Now on node 0: allocations come from zone 0, and frees of zone-1 pages go to this
	 * CPU's pcp of zone 1 (a remote pageset), never into zone 0. */
	all_cpus_on(0);
	struct page *b = pcp_alloc(0);
	CHECK(b && page_zone(b) == z0);
	CHECK_EQ(mempolicy_of(page_address(b)), MPOL_PREFERRED);
	/* Runs in zone 0's arena, the second one (zone 1 grew first): a run's tail (3 pages of
	 * an order-2 block) and what an extension in place (3 -> 5 pages) leaves of the block it
	 * takes go back from pages that are no block's head, so they carry no arena byte: the
	 * blocks must still land in their own arena (they went to arena 0's descriptors: realloc
	 * crashed on 2-node machines). */
	check_free_lists(z0, 0);
	size_t used0 = z0->managed_pages - z0->free_pages; /* (the run may grow the zone) */
	struct page *run = zone_alloc_run(z0, 3, 0);
	CHECK(run && page_zone(run) == z0 && arena_of_page(run) != &pcpm_arena0);
	CHECK_EQ(z0->managed_pages - z0->free_pages, used0 + 3);
	check_free_lists(z0, 0);
	CHECK(zone_extend_run(z0, run, 3, 5));
	CHECK_EQ(z0->managed_pages - z0->free_pages, used0 + 5);
	check_free_lists(z0, 0);
	memset(page_address(run), 1, 5 * PAGE_SIZE);
	zone_free_run(z0, run, 5);
	CHECK_EQ(z0->managed_pages - z0->free_pages, used0);
	check_free_lists(z0, 0);
	int c0 = zone_pcp(z0, cpu)->count, c1 = zone_pcp(z1, cpu)->count;
	pcp_free(a, 0);
	CHECK_EQ(zone_pcp(z1, cpu)->count, c1 + 1);
	CHECK_EQ(zone_pcp(z0, cpu)->count, c0);
	pcp_free(b, 0);
	CHECK_EQ(zone_pcp(z0, cpu)->count, c0 + 1);
	pcp_free(big, 5);
	/* and the other way round: a node-0 page freed by a CPU of node 1 goes to that CPU's
	 * pcp of zone 0 */
	struct page *b0 = pcp_alloc(0);
	CHECK(b0 && page_zone(b0) == z0);
	all_cpus_on(1);
	c0 = zone_pcp(z0, cpu)->count;
	c1 = zone_pcp(z1, cpu)->count;
	pcp_free(b0, 0);
	CHECK_EQ(zone_pcp(z0, cpu)->count, c0 + 1);
	CHECK_EQ(zone_pcp(z1, cpu)->count, c1);
	all_cpus_on(0);
	c1 = zone_pcp(z1, cpu)->count;
	CHECK(c1 > 0 && c1 <= zone_pcp(z1, cpu)->batch);

	/* Expiry (§5.3): the remote pcp drains min(count, batch) in the 3rd period without
	 * use; the local one keeps its pages.  Periods are simulated by the time passed in. */
	uint64_t t = zone_pcp(z1, cpu)->last_decay_ms;
	c0 = zone_pcp(z0, cpu)->count;
	for (int k = 1; k <= 2; k++) {
		pcp_decay_all(t + (uint64_t)k * 3600000);
		CHECK_EQ(zone_pcp(z1, cpu)->count, c1);
	}
	pcp_decay_all(t + 3 * 3600000ull);
	CHECK_EQ(zone_pcp(z1, cpu)->count, 0);
	CHECK_EQ(zone_pcp(z0, cpu)->count, c0);
	/* every page of zone 1 is back in zone 1 */
	CHECK_EQ(z1->free_pages, z1->managed_pages);

	/* Fallback: zone 0 may not grow; once its blocks are gone the next requests of this
	 * node-0 CPU are served by zone 1, through the pcp for small orders. */
	pcp_drain_all();
	CHECK_EQ(z0->free_pages, z0->managed_pages);
	z0->max_pages = z0->managed_pages;
	static struct page *held[4096];
	int n = 0;
	for (;;) {
		struct page *pg = pcp_alloc(MAX_PAGE_ORDER);
		CHECK(pg && n < 4096);
		held[n++] = pg;
		if (page_zone(pg) != z0)
			break;
	}
	CHECK_EQ((size_t)(n - 1) << MAX_PAGE_ORDER, z0->managed_pages);
	CHECK(page_zone(held[n - 1]) == z1);
	CHECK_EQ(atomic_load(&z1->numa_miss), 1);
	CHECK_EQ(atomic_load(&z0->numa_foreign), 1);
	uint64_t r1 = zone_pcp(z1, cpu)->refills;
	struct page *s = pcp_alloc(0);
	CHECK(s && page_zone(s) == z1);
	CHECK_EQ(zone_pcp(z1, cpu)->refills, r1 + 1);
	CHECK_EQ(atomic_load(&z1->numa_miss), 2);
	/* and each block goes home */
	pcp_free(s, 0);
	while (n)
		pcp_free(held[--n], MAX_PAGE_ORDER);
	pcp_drain_all();
	CHECK_EQ(z0->free_pages, z0->managed_pages);
	CHECK_EQ(z1->free_pages, z1->managed_pages);

	/* The mbind primitive itself: a node out of range is refused before the kernel. */
	errno = 0;
	CHECK_EQ(pcpm_os_bind_node(page_address(held[0]), PAGE_SIZE, 1024, false), -1);
	CHECK_EQ(errno, EINVAL);
	printf("test_numa: ok\n");
	return 0;
}
