/*
 * pcp.c - per-CPU pagesets (see pcp.h and kernel-pcp.md §2-§5, §9).
 * The formulas follow the newest mainline source; each seed heuristic has its switch in
 * config.h (free_high, PCPF_FREE_HIGH_BATCH, alloc_factor, count_min decay).
 * Calls the zone (rmqueue_bulk, free_pcppages_bulk), the arena's descriptors and topology's
 * sizes (pulled by generation); called by slab, large and the periodic work.
 */
#define _GNU_SOURCE
#include "pcp.h"
#include "config.h"
#include "zone_purge.h"
#include "topology.h"
#include "sizing.h"
#include "os.h"

#include <sched.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

struct per_cpu_pages *pcpm_pcp PCPM_HOT;
_Atomic uint8_t *pcpm_cpu_node PCPM_HOT;

/* glibc >= 2.35 registers an rseq area per thread; cpu_id sits at offset 4 of it. */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
static ptrdiff_t rseq_cpu_off PCPM_HOT;
static bool use_rseq PCPM_HOT;

static inline char *thread_pointer(void)
{
	char *tp;
#if defined(__x86_64__)
	__asm__("mov %%fs:0, %0" : "=r"(tp));
#else
	tp = __builtin_thread_pointer();
#endif
	return tp;
}

unsigned pcp_cpu(void)
{
	unsigned n = (unsigned)pcpm_nr_cpus;
	if (likely(use_rseq)) {
		int c = *(volatile int *)(thread_pointer() + rseq_cpu_off);
		if (likely(c >= 0))
			return (unsigned)c < n ? (unsigned)c : (unsigned)c % n;
	}
	if (pcpm_cfg.cpu_source != CPU_TID) {
		int c = sched_getcpu();
		if (c >= 0)
			return (unsigned)c % n;
	}
	static __thread unsigned tid_slot;
	if (!tid_slot)
		tid_slot = (unsigned)syscall(SYS_gettid) * 2654435761u | 1;
	return (tid_slot >> 8) % n;
}

/* The sizes of one CPU's pcp: topology/sizing.c's formula on its cache share (kernel-pcp.md
 * "pcpmalloc's choices"), with the PCPMALLOC_* overrides.  The batch formula sees at least
 * 1 GiB (the floor of §12.4) so that a young, small heap does not end up with batch == 1:
 * min(262144 >> 12, 64) = 64 -> 63 pages.  (§12.4 says 256 MiB, but that gives 15.) */
static void size_cpu(struct zone *z, int cpu, struct pcpm_size_out *out)
{
	const struct pcpm_cpu_cache *cc = pcpm_cpu_cache(cpu);
	struct pcpm_size_in in = {
		.l2_share_bytes = cc->l2_share_bytes,
		.slice_bytes = pcpm_cfg.cache_slice != AUTO ? (size_t)pcpm_cfg.cache_slice : cc->slice_bytes,
		.heap_pages = z->managed_pages,
		.split = cc->node_cpus,
		.policy = pcpm_cfg.high_policy,
		.batch = pcpm_cfg.batch,
		.high_min = pcpm_cfg.high_min,
		.high_max = pcpm_cfg.high_max,
		.free_high_batch = pcpm_cfg.free_high_batch,
		.slice_factor = pcpm_cfg.slice_factor,
	};
	pcpm_size_pcp(&in, out);
}

static void set_sizes(struct per_cpu_pages *pcp, const struct pcpm_size_out *sz)
{
	pcp->batch = sz->batch;
	pcp->high_min = sz->high_min;
	pcp->high_max = sz->high_max;
	if (sz->free_high_batch)
		pcp->flags |= PCPF_FREE_HIGH_BATCH;
	else
		pcp->flags &= ~PCPF_FREE_HIGH_BATCH;
}

/* setup_zone_pageset(): a zone's pcps, one per CPU slot; NULL when out of memory. */
static struct per_cpu_pages *zone_pageset_alloc(struct zone *z)
{
	size_t n = (size_t)pcpm_nr_cpus;
	/* metadata is 64-byte aligned; the pagesets want their own 256 bytes each (no false
	 * sharing with a neighbour's adjacent-line prefetch), so align the array up */
	char *raw = pcpm_meta_alloc(n * sizeof(struct per_cpu_pages) + 255);
	if (!raw)
		return NULL;
	struct per_cpu_pages *set = (struct per_cpu_pages *)ALIGN_UP((uintptr_t)raw, 256);
	uint64_t now = pcpm_now_ms();
	for (size_t i = 0; i < n; i++) {
		struct per_cpu_pages *pcp = &set[i];
		struct pcpm_size_out sz;
		size_cpu(z, (int)i, &sz);
		set_sizes(pcp, &sz);
		pcp->high = pcp->high_min;
		pcp->last_decay_ms = now;
		for (int o = 0; o < NR_PCP_LISTS; o++)
			list_init(&pcp->lists[o]);
	}
	return set;
}

bool pcpm_pcp_init(void)
{
	size_t n = (size_t)pcpm_nr_cpus;
	pcpm_pcp = zone_pageset_alloc(&pcpm_zone);
	pcpm_cpu_node = pcpm_meta_alloc(n); /* zeroed: every CPU on node 0 until discovery */
	if (!pcpm_pcp || !pcpm_cpu_node)
		return false;
	pcpm_zone.per_cpu_pageset = pcpm_pcp;
	if (pcpm_cfg.cpu_source == CPU_RSEQ && &__rseq_size && &__rseq_offset && __rseq_size >= 8) {
		rseq_cpu_off = __rseq_offset + 4;
		use_rseq = true;
	}
	return true;
}

bool pcp_uses_rseq(void)
{
	return use_rseq;
}

/* pageset_update(): new sizes for every pcp, each written under its lock; high itself is
 * pulled into [high_min, high_max] by the next clamp_high().  Takes no other lock. */
void pcpm_pcp_resize(void)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++) {
		struct zone *z = &pcpm_zones[n];
		for (int i = 0; i < pcpm_nr_cpus; i++) {
			struct per_cpu_pages *pcp = zone_pcp(z, (unsigned)i);
			struct pcpm_size_out sz;
			size_cpu(z, i, &sz);
			pcpm_lock(&pcp->lock);
			set_sizes(pcp, &sz);
			pcpm_unlock(&pcp->lock);
		}
	}
}

int pcpm_numa_setup(int nr_nodes, const int *cpu_node, const int *os_node, int bind)
{
	if (nr_nodes < 1 || nr_nodes > MAX_NUMNODES)
		return -1;
	pcpm_lock(&pcpm_zones_lock);
	int old = atomic_load_explicit(&pcpm_nr_zones, memory_order_relaxed);
	for (int n = old; n < nr_nodes; n++) {
		struct zone *z = &pcpm_zones[n];
		pcpm_zone_init(z);
		z->per_cpu_pageset = zone_pageset_alloc(z);
		if (!z->per_cpu_pageset) {
			pcpm_unlock(&pcpm_zones_lock);
			return -1;
		}
	}
	/* identity first, then the count that publishes the zones, then the CPUs' nodes */
	for (int n = 0; n < nr_nodes; n++) {
		struct zone *z = &pcpm_zones[n];
		pcpm_lock(&z->lock);
		z->os_node = os_node ? os_node[n] : n;
		z->bind = nr_nodes >= 2 ? bind : -1;
		pcpm_unlock(&z->lock);
	}
	if (nr_nodes > old)
		atomic_store_explicit(&pcpm_nr_zones, nr_nodes, memory_order_release);
	for (int c = 0; c < pcpm_nr_cpus; c++) {
		int nid = cpu_node[c] >= 0 && cpu_node[c] < nr_nodes ? cpu_node[c] : 0;
		atomic_store_explicit(&pcpm_cpu_node[c], (uint8_t)nid, memory_order_relaxed);
	}
	pcpm_unlock(&pcpm_zones_lock);
	return 0;
}

static inline int clamp_high(struct per_cpu_pages *pcp)
{
	int h = pcp->high;
	h = h < pcp->high_min ? pcp->high_min : h > pcp->high_max ? pcp->high_max : h;
	pcp->high = h;
	return h;
}

/* nr_pcp_alloc(): how many blocks one refill takes; raises high on the way (§4.2). */
static int nr_pcp_alloc(struct per_cpu_pages *pcp, unsigned order)
{
	int base = pcp->batch;
	int high = clamp_high(pcp);
	if (high < base)
		return 1;
	int b = (order == 0 && pcpm_cfg.alloc_scale) ? base << pcp->alloc_factor : base;
	if (pcp->high_min != pcp->high_max) {
		int nh = MIN(high + b, pcp->high_max);
		if (nh > pcp->high)
			pcp->high_raises++;
		pcp->high = high = nh;
	}
	if (order == 0) {
		int room = MAX(high - pcp->count - base, base);
		if (pcpm_cfg.alloc_scale && b <= room && pcp->alloc_factor < pcpm_cfg.batch_scale_max)
			pcp->alloc_factor++;
		b = MIN(b, room);
	}
	if (b > 1)
		b = MAX(b >> order, 2);
	return b;
}

/*
 * free_pcppages_bulk(): give up to count pages back to the zone under one zone-lock hold,
 * coldest first (list tails), starting with the list that triggered the drain.
 */
static void free_pcppages_bulk(struct zone *z, struct per_cpu_pages *pcp, int count,
			       unsigned pindex)
{
	uint64_t now = pcpm_now_ms();
	count = MIN(count, pcp->count);
	if (count <= 0)
		return;
	pcp->drains++;
	zone_lock(z);
	unsigned p = pindex;
	while (count > 0) {
		while (list_empty(&pcp->lists[p]))
			p = (p + 1) % NR_PCP_LISTS;
		do {
			struct page *pg = (struct page *)pcp->lists[p].prev;
			list_del(&pg->lru);
			count -= 1 << p;
			pcp->count -= 1 << p;
			pcp->drain_pages += 1UL << p;
			__free_one_page(z, pg, p, now);
		} while (count > 0 && !list_empty(&pcp->lists[p]));
	}
	zone_unlock(z);
	zone_free_done(z);
}

/* Drains in chunks of batch pages, one zone-lock hold each ([new] mainline behaviour). */
static void drain_chunked(struct zone *z, struct per_cpu_pages *pcp, int to_free, unsigned pindex)
{
	while (to_free > 0 && pcp->count > 0) {
		int chunk = MIN(to_free, pcp->batch);
		free_pcppages_bulk(z, pcp, chunk, pindex);
		to_free -= chunk;
	}
}

/* decay_pcp_high(): shrink high towards high_min once per period and drain the excess. */
static void decay_pcp_high(struct zone *z, struct per_cpu_pages *pcp, uint64_t now)
{
	pcp->last_decay_ms = now;
	pcp->decay_runs++;
	int cap = pcp->batch << pcpm_cfg.batch_scale_max;
	if (pcp->high > pcp->high_min) {
		int dec;
		if (pcpm_cfg.decay_mode == DECAY_COUNT_MIN)
			dec = MIN(pcp->count_min, pcp->high / pcpm_cfg.count_min_div);
		else
			dec = pcp->high >> pcpm_cfg.decay_shift;
		int nh = MAX(MAX(pcp->count - cap, pcp->high - dec), pcp->high_min);
		if (nh < pcp->high)
			pcp->high_decays++;
		pcp->high = nh;
	}
	pcp->count_min = pcp->count;
	drain_chunked(z, pcp, pcp->count - pcp->high, 0);
}

/*
 * Remote pageset expiry (§5.3, refresh_cpu_vm_stats + drain_zone_pages): a CPU's pcp of a
 * zone on another node holds pages it freed there; after 3 periods without use it gives back
 * min(count, batch) pages per period, so remote pages do not sit on a CPU that will not
 * allocate them.  A local pcp never expires.  pcp lock held.
 */
static void expire_remote_pcp(struct zone *z, struct per_cpu_pages *pcp, unsigned cpu)
{
	if (!pcp->count || z->node == pcp_cpu_node(cpu)) {
		pcp->expire = 0;
		return;
	}
	if (pcp->expire && --pcp->expire)
		return;
	drain_chunked(z, pcp, MIN(pcp->count, pcp->batch), 0);
}

int pcpm_pcp_periodic_due PCPM_HOT;

void pcp_decay_all(uint64_t now)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++) {
		struct zone *z = &pcpm_zones[n];
		for (int i = 0; i < pcpm_nr_cpus; i++) {
			struct per_cpu_pages *pcp = zone_pcp(z, (unsigned)i);
			if (now - pcp->last_decay_ms < (uint64_t)pcpm_cfg.decay_ms)
				continue;
			if (!pcpm_trylock(&pcp->lock))
				continue;
			if (now - pcp->last_decay_ms >= (uint64_t)pcpm_cfg.decay_ms) {
				decay_pcp_high(z, pcp, now);
				if (nr > 1)
					expire_remote_pcp(z, pcp, (unsigned)i);
			}
			pcpm_unlock(&pcp->lock);
		}
	}
}

/* Slow paths decay this CPU's pcp when its period has passed and flag the periodic work
 * for every other CPU and the layers' purges, which the API's slow path then runs from above
 * (vmstat.c: the lazy vmstat_update). */
static inline void maybe_periodic(struct zone *z, struct per_cpu_pages *pcp)
{
	uint64_t now = pcpm_now_ms();
	if (unlikely(now - pcp->last_decay_ms >= (uint64_t)pcpm_cfg.decay_ms)) {
		decay_pcp_high(z, pcp, now);
		if (!__atomic_load_n(&pcpm_pcp_periodic_due, __ATOMIC_RELAXED))
			__atomic_store_n(&pcpm_pcp_periodic_due, 1, __ATOMIC_RELAXED);
	}
	pcpm_unlock(&pcp->lock);
}

/* rmqueue() on one zone: through this CPU's pcp of z for orders 0..3; NULL when z is
 * exhausted. */
static struct page *rmqueue(struct zone *z, unsigned cpu, unsigned order)
{
	if (order > PAGE_ALLOC_COSTLY_ORDER) {
		/* counted with the pcp refills: a heap of large page runs, or of the paged
		 * classes' order-4/5 slabs, is worth the topology discovery too */
		pcpm_topology_note_refill(z->managed_pages);
		return zone_alloc_pages(z, order);
	}
	struct per_cpu_pages *pcp = zone_pcp(z, cpu);
	if (unlikely(!pcpm_trylock(&pcp->lock))) {
		atomic_fetch_add_explicit(&pcp->lock_contended, 1, memory_order_relaxed);
		return zone_alloc_pages(z, order);
	}
	pcp->free_count >>= 1;
	struct list_head *list = &pcp->lists[order];
	bool slow = false;
	if (list_empty(list)) {
		int n = nr_pcp_alloc(pcp, order);
		int got = rmqueue_bulk(z, order, n, list);
		pcp->refills++;
		pcpm_topology_note_refill(z->managed_pages);
		pcp->refill_pages += (uint64_t)got << order;
		pcp->count += got << order;
		slow = true;
		if (!got) {
			pcpm_unlock(&pcp->lock);
			return NULL;
		}
	}
	struct page *pg = (struct page *)list->next;
	list_del(&pg->lru);
	pg->state = PG_NONE;
	pcp->count -= 1 << order;
	if (pcp->count < pcp->count_min)
		pcp->count_min = pcp->count;
	pcp->pgalloc_pcp += 1UL << order;
	pcp->expire = 3; /* in use: a remote pcp starts its expiry countdown again */
	if (slow)
		maybe_periodic(z, pcp);
	else
		pcpm_unlock(&pcp->lock);
	return pg;
}

/*
 * get_page_from_freelist(): this CPU's node's zone first, then the others in zonelist order,
 * as the kernel falls back when a node's zone is below its watermark.  Every CPU starts on
 * node 0 (the only zone) and learns its node when the topology is discovered.
 */
/*
 * One zone per NUMA node, from the nodes the topology gave the CPUs (logical indexes
 * 0..n-1).  The arenas of each zone are mbind'ed to its node only on the real machine with
 * 2+ nodes: a fake machine's nodes do not exist here, and with one node there is nothing to
 * choose.
 */
static void numa_from_topology(void)
{
	int nr = 1;
	for (int i = 0; i < pcpm_nr_cpus; i++)
		if (pcpm_cpu_cache(i)->node + 1 > nr)
			nr = pcpm_cpu_cache(i)->node + 1;
	if (nr == 1)
		return; /* the zone and the CPUs' node 0 stay as they are: nothing to do */
	if (nr > MAX_NUMNODES) {
		if (pcpm_cfg.verbose)
			pcpm_warn("topology: %d NUMA nodes, more than %d: one zone", nr, MAX_NUMNODES);
		return;
	}
	size_t len = ALIGN_UP((size_t)(pcpm_nr_cpus + MAX_NUMNODES) * sizeof(int), PAGE_SIZE);
	int *cpu_node = pcpm_os_map(len, PAGE_SIZE);
	if (!cpu_node)
		return;
	int *os_node = cpu_node + pcpm_nr_cpus;
	for (int n = 0; n < nr; n++)
		os_node[n] = n;
	for (int i = 0; i < pcpm_nr_cpus; i++) {
		const struct pcpm_cpu_cache *c = pcpm_cpu_cache(i);
		cpu_node[i] = c->node >= 0 ? c->node : 0;
		if (c->node >= 0 && c->node_os >= 0)
			os_node[c->node] = c->node_os;
	}
	bool fake = pcpm_cfg.topology_xml || pcpm_cfg.topology_synthetic;
	int bind = fake || pcpm_cfg.numa_bind == NUMA_BIND_OFF ? -1 : pcpm_cfg.numa_bind;
	if (pcpm_numa_setup(nr, cpu_node, os_node, bind) != 0 && pcpm_cfg.verbose)
		pcpm_warn("topology: cannot set up %d zones; keeping one", nr);
	else if (pcpm_cfg.verbose)
		pcpm_warn("topology: %d NUMA nodes, one zone each; arenas %s", nr,
			  bind < 0 ? "not bound (fake machine or PCPMALLOC_NUMA_BIND=off)"
				   : "mbind'ed to their node");
	pcpm_os_unmap(cpu_node, len);
}

/* The topology generation whose sizes the pcps have; one puller at a time. */
static _Atomic unsigned pulled_gen PCPM_HOT;
static _Atomic int pulling PCPM_HOT;

/* New sizes were published (topology discovery): pageset_update() for every pcp, then the
 * NUMA zones.  Takes pcp and zone locks: never from a signal handler. */
static PCPM_COLD void pull_topology(void)
{
	int z = 0;
	if (pcpm_nested() || !atomic_compare_exchange_strong(&pulling, &z, 1))
		return;
	unsigned gen = atomic_load_explicit(&pcpm_topology_gen, memory_order_acquire);
	pcpm_pcp_resize();
	numa_from_topology();
	if (pcpm_cfg.verbose) {
		const struct per_cpu_pages *p = &pcpm_pcp[0];
		pcpm_warn("pcp: sized from the topology: cpu 0: batch %d, high_min %d, high_max %d, "
			  "free_high_batch %s",
			  p->batch, p->high_min, p->high_max,
			  (p->flags & PCPF_FREE_HIGH_BATCH) ? "on" : "off");
	}
	atomic_store_explicit(&pulled_gen, gen, memory_order_relaxed);
	atomic_store_explicit(&pulling, 0, memory_order_release);
}

/* Pulls the topology's sizes when it published new ones: one relaxed load otherwise. */
static inline void sync_topology(void)
{
	if (unlikely(atomic_load_explicit(&pcpm_topology_gen, memory_order_relaxed) !=
		     atomic_load_explicit(&pulled_gen, memory_order_relaxed)))
		pull_topology();
}

struct page *pcp_alloc(unsigned order)
{
	sync_topology();
	unsigned cpu = pcp_cpu();
	int nid = pcp_cpu_node(cpu);
	struct page *pg = rmqueue(&pcpm_zones[nid], cpu, order);
	if (likely(pg))
		return pg;
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int i = 1; i < nr; i++) {
		struct zone *z = zonelist_zone(nid, i, nr);
		pg = rmqueue(z, cpu, order);
		if (pg) {
			atomic_fetch_add_explicit(&z->numa_miss, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&pcpm_zones[nid].numa_foreign, 1,
						  memory_order_relaxed);
			return pg;
		}
	}
	return NULL;
}

int pcp_alloc_bulk(unsigned order, int count, struct page **pages)
{
	sync_topology();
	int nid = pcp_cpu_node(pcp_cpu());
	int got = 0, nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int i = 0; i < nr && got < count; i++) {
		struct zone *z = i ? zonelist_zone(nid, i, nr) : &pcpm_zones[nid];
		pcpm_topology_note_refill(z->managed_pages); /* as rmqueue's order > 3 path */
		int n = zone_alloc_bulk(z, order, count - got, pages + got);
		if (i && n) {
			atomic_fetch_add_explicit(&z->numa_miss, (uint64_t)n, memory_order_relaxed);
			atomic_fetch_add_explicit(&pcpm_zones[nid].numa_foreign, (uint64_t)n,
						  memory_order_relaxed);
		}
		got += n;
	}
	return got;
}

void pcp_free_bulk(unsigned order, int count, struct page **pages)
{
	/* each run of blocks of one zone in one hold of that zone's lock */
	for (int i = 0, j; i < count; i = j) {
		struct zone *z = page_zone(pages[i]);
		for (j = i + 1; j < count && page_zone(pages[j]) == z; j++)
			;
		zone_free_bulk(z, order, j - i, pages + i);
		zone_free_done(z);
	}
}

/* nr_pcp_high(): the high this free is measured against; tunes high on the way (§4.5). */
static int nr_pcp_high(struct per_cpu_pages *pcp, int batch, bool free_high)
{
	int high = clamp_high(pcp);
	if (high == 0)
		return 0;
	if (free_high) {
		pcp->high = MAX(high - (batch << pcpm_cfg.batch_scale_max), pcp->high_min);
		return 0;
	}
	if (pcp->high_min == pcp->high_max)
		return high;
	if (pcp->count >= high) {
		int need = pcp->free_count + batch;
		if (pcp->high < need) {
			pcp->high = need < pcp->high_min ? pcp->high_min
						       : need > pcp->high_max ? pcp->high_max : need;
			pcp->high_raises++;
		}
	}
	return high;
}

/* nr_pcp_free(): how many pages this drain gives back (§4.6). */
static int nr_pcp_free(struct per_cpu_pages *pcp, int batch, int high, bool free_high)
{
	if (free_high)
		return MIN(pcp->count, batch << pcpm_cfg.batch_scale_max);
	if (high < batch)
		return 1;
	int n = MAX(pcp->free_count, batch);
	return MAX(MIN(n, high - batch), 1);
}

/* free_frozen_pages(): into this CPU's pcp of the block's own zone (arena -> node), local
 * or remote, so a page always goes back to the zone it came from. */
void pcp_free(struct page *pg, unsigned order)
{
	struct zone *z = page_zone(pg);
	pg->flags |= PG_DIRTY;
	if (order > PAGE_ALLOC_COSTLY_ORDER) {
		zone_free_pages(z, pg, order);
		zone_free_done(z);
		return;
	}
	struct per_cpu_pages *pcp = zone_pcp(z, pcp_cpu());
	if (unlikely(!pcpm_trylock(&pcp->lock))) {
		atomic_fetch_add_explicit(&pcp->lock_contended, 1, memory_order_relaxed);
		zone_free_pages(z, pg, order);
		zone_free_done(z);
		return;
	}
	/* free_frozen_page_commit() */
	pcp->alloc_factor >>= 1;
	pg->state = PG_PCP;
	pg->order = order;
	list_add(&pg->lru, &pcp->lists[order]);
	pcp->count += 1 << order;
	pcp->pgfree_pcp += 1UL << order;
	pcp->expire = 3;
	int batch = pcp->batch;
	bool free_high = false;
	if (order >= 1) {
		int thresh = pcpm_cfg.free_high_thresh != AUTO ? pcpm_cfg.free_high_thresh
							       : batch + pcp->high_min / 2;
		free_high = pcpm_cfg.free_high && pcp->free_count >= thresh &&
			    (pcp->flags & PCPF_PREV_FREE_HIGH_ORDER) &&
			    (!(pcp->flags & PCPF_FREE_HIGH_BATCH) || pcp->count >= batch);
		pcp->flags |= PCPF_PREV_FREE_HIGH_ORDER;
	} else {
		pcp->flags &= ~PCPF_PREV_FREE_HIGH_ORDER;
	}
	if (pcp->free_count < (batch << pcpm_cfg.batch_scale_max))
		pcp->free_count += 1 << order;
	int high = nr_pcp_high(pcp, batch, free_high);
	if (pcp->count < high) {
		pcpm_unlock(&pcp->lock);
		return;
	}
	int to_free = nr_pcp_free(pcp, batch, high, free_high);
	if (free_high)
		pcp->free_high_drains++;
	drain_chunked(z, pcp, to_free, order);
	maybe_periodic(z, pcp);
}

/* drain_pages_zone() for every CPU, taking each pcp lock unconditionally (remote drain). */
void pcp_drain_all(void)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++) {
		struct zone *z = &pcpm_zones[n];
		for (int i = 0; i < pcpm_nr_cpus; i++) {
			struct per_cpu_pages *pcp = zone_pcp(z, (unsigned)i);
			if (!pcp->count)
				continue;
			pcpm_lock(&pcp->lock);
			drain_chunked(z, pcp, pcp->count, 0);
			pcpm_unlock(&pcp->lock);
		}
	}
}

void pcp_zone_stats(struct zone *z, uint64_t *refills, uint64_t *refill_pages, uint64_t *count)
{
	*refills = *refill_pages = *count = 0;
	for (int i = 0; i < pcpm_nr_cpus; i++) {
		struct per_cpu_pages *p = zone_pcp(z, (unsigned)i);
		*refills += p->refills;
		*refill_pages += p->refill_pages;
		*count += (uint64_t)p->count;
	}
}

void pcp_stats_add(struct pcpm_stats *s)
{
	sync_topology(); /* the sizes reported are those in force after a discovery */
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int i = 0; i < nr * pcpm_nr_cpus; i++) {
		struct per_cpu_pages *p = zone_pcp(&pcpm_zones[i / pcpm_nr_cpus],
						   (unsigned)(i % pcpm_nr_cpus));
		s->pgalloc_pcp += p->pgalloc_pcp;
		s->pgfree_pcp += p->pgfree_pcp;
		s->refills += p->refills;
		s->refill_pages += p->refill_pages;
		s->drains += p->drains;
		s->drain_pages += p->drain_pages;
		s->free_high_drains += p->free_high_drains;
		s->high_raises += p->high_raises;
		s->high_decays += p->high_decays;
		s->decay_runs += p->decay_runs;
		s->pcp_lock_contended += atomic_load_explicit(&p->lock_contended, memory_order_relaxed);
	}
}

/* fork: every pcp of every zone, zone by zone, then (the caller) every zone lock; the zone
 * count cannot change meanwhile, the caller holds pcpm_zones_lock. */
void pcp_lock_all(void)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_relaxed);
	for (int n = 0; n < nr; n++)
		for (int i = 0; i < pcpm_nr_cpus; i++)
			pcpm_lock(&zone_pcp(&pcpm_zones[n], (unsigned)i)->lock);
}

void pcp_unlock_all(void)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_relaxed);
	for (int n = 0; n < nr; n++)
		for (int i = 0; i < pcpm_nr_cpus; i++)
			pcpm_unlock(&zone_pcp(&pcpm_zones[n], (unsigned)i)->lock);
}

void pcp_reset_locks(void)
{
	/* a resize in flight on another thread at the fork: the child pulls the sizes again */
	atomic_store_explicit(&pulling, 0, memory_order_relaxed);
	atomic_store_explicit(&pulled_gen, 0, memory_order_relaxed);
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_relaxed);
	for (int n = 0; n < nr; n++)
		for (int i = 0; i < pcpm_nr_cpus; i++)
			pcpm_lock_reset(&zone_pcp(&pcpm_zones[n], (unsigned)i)->lock);
}
