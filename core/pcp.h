/*
 * pcp.h - per-CPU pagesets (struct per_cpu_pages, include/linux/mmzone.h; the allocation
 * and free paths of mm/page_alloc.c: rmqueue_pcplist, nr_pcp_alloc, free_frozen_page_commit,
 * nr_pcp_high, nr_pcp_free, free_pcppages_bulk, decay_pcp_high, drain_pages_zone).
 *
 * One pcp per CPU slot (pcpm_nr_cpus, see topology.h) caches free blocks of orders 0..3 in
 * LIFO lists.  The current CPU comes from glibc's rseq area (one load), else sched_getcpu.
 * The owning thread takes the pcp lock with a trylock; when that fails (another thread on the
 * same CPU was preempted while holding it, or a remote decay/drain holds it) the request goes
 * straight to the zone, exactly as the kernel bypasses the pcp.  Remote maintenance takes the
 * lock unconditionally.  Lock order: pcp lock, then zone lock.
 */
#ifndef PCPM_PCP_H
#define PCPM_PCP_H

#include "stat_counters.h"
#include "zone.h"

#define PAGE_ALLOC_COSTLY_ORDER 3
#define NR_PCP_LISTS (PAGE_ALLOC_COSTLY_ORDER + 1) /* one migratetype: pindex == order */

#define PCPF_PREV_FREE_HIGH_ORDER 0x1 /* previous free here was order 1..3 */
#define PCPF_FREE_HIGH_BATCH 0x2      /* cache slice > 3 * batch: keep batch before free_high */

/* Fields in pages unless noted; all written under lock unless noted. */
struct per_cpu_pages {
	pcpm_lock_t lock;
	int count;	  /* pages on all lists (order-k entry counts 2^k) */
	int high;	  /* auto-tuned watermark in [high_min, high_max]; drain when count >= high */
	int high_min;	  /* lower bound of high (set at init, read-only after) */
	int high_max;	  /* upper bound of high; == high_min turns auto-tuning off */
	int batch;	  /* pages moved per zone-lock hold (2^n - 1) */
	int free_count;	  /* pages freed in a row (halved by each allocation) */
	int count_min;	  /* lowest count since the last decay (count_min mode) */
	uint8_t flags;	  /* PCPF_* */
	uint8_t alloc_factor; /* refill = batch << alloc_factor (halved by each free) */
	uint8_t expire;	  /* remote-node pcp: periods left before it drains (§5.3); 3 on use */
	uint64_t last_decay_ms;
	struct list_head lists[NR_PCP_LISTS];
	/* counters */
	uint64_t pgalloc_pcp, pgfree_pcp, refills, refill_pages, drains, drain_pages;
	uint64_t free_high_drains, high_raises, high_decays, decay_runs;
	_Atomic uint64_t lock_contended; /* trylock failures: counted without the lock */
} __attribute__((aligned(256)));

/*
 * Every zone has a pcp per CPU slot (z->per_cpu_pageset[cpu]): pcp[zone][cpu] as in the
 * kernel.  A CPU allocates through its own node's pcp (falling back along the zonelist) and
 * frees a block into the pcp of the block's zone, so a page always goes back to the zone it
 * came from; a CPU's pcp of a remote zone is drained by expiry (§5.3).
 * pcpm_pcp is node 0's array (the only one on a single-node machine).
 */
extern struct per_cpu_pages *pcpm_pcp;
static inline struct per_cpu_pages *zone_pcp(struct zone *z, unsigned cpu)
{
	return &z->per_cpu_pageset[cpu];
}

/*
 * Node of each CPU slot (cpu_to_node): 0 for every CPU until the topology is discovered.
 * Written by pcpm_numa_setup (a byte per CPU, relaxed: a CPU that still reads its old node
 * only allocates from the wrong zone for a moment), read on the pcp slow paths.
 */
extern _Atomic uint8_t *pcpm_cpu_node;
static inline int pcp_cpu_node(unsigned cpu)
{
	int nid = atomic_load_explicit(&pcpm_cpu_node[cpu], memory_order_relaxed);
	return nid < atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire) ? nid : 0;
}

/* Sizes the pcps from the topology and allocates node 0's; once, at init.  False when their
 * metadata cannot be mapped (out of memory: init fails with ENOMEM and is retried later). */
bool pcpm_pcp_init(void);

/*
 * Brings up one zone per NUMA node: zones 1..nr_nodes-1 get their pcps (sized like node 0's),
 * each CPU slot its node (cpu_node[cpu], 0..nr_nodes-1), each zone its kernel node number
 * (os_node[node]) and mbind policy for its future arenas (bind: NUMA_BIND_*, or -1 for none).
 * Called when the pcp layer pulls a new topology (pcp_alloc); zones are never taken down, so a
 * second call may only add nodes.  Returns 0, or -1 when nr_nodes exceeds MAX_NUMNODES or
 * metadata memory runs out (nothing changed then).
 */
int pcpm_numa_setup(int nr_nodes, const int *cpu_node, const int *os_node, int bind);

/* Zones in the order a CPU of node nid tries them (its zonelist): nid, nid+1, ... */
static inline struct zone *zonelist_zone(int nid, int i, int nr)
{
	return &pcpm_zones[(nid + i) % nr];
}

/* pageset_update() for every CPU: recompute the sizes from the topology (pulled by
 * pcp_alloc when topology published a new generation).  Takes each pcp lock in turn. */
void pcpm_pcp_resize(void);

/* Is the CPU read from glibc's rseq area (else sched_getcpu or the thread-id hash)? */
bool pcp_uses_rseq(void);

/* The current CPU's slot (0 .. pcpm_nr_cpus-1). */
unsigned pcp_cpu(void);

/*
 * A block of 2^order pages (order <= MAX_PAGE_ORDER), NULL when memory is exhausted.
 * Orders 0..3 come from this CPU's pcp; the block's descriptor state is left PG_NONE for
 * the caller to claim.  pcp_free takes back a block allocated that way.
 */
struct page *pcp_alloc(unsigned order);
void pcp_free(struct page *pg, unsigned order);

/*
 * Blocks of an order the pcps do not hold (above PAGE_ALLOC_COSTLY_ORDER: slabs of orders
 * 4-5), several per zone lock hold (alloc_pages_bulk): up to count blocks into pages[] from
 * this CPU's node's zone, then the others in zonelist order; returns how many (fewer only
 * when memory is exhausted).  Blocks are PG_NONE, the caller's.  pcp_free_bulk gives such
 * blocks back, one zone lock hold per run of blocks of one zone.  Zone locks taken inside;
 * call with no kmem_cache lock held if possible (a zone growth may run inside, with the zone
 * lock dropped but the caller's locks held).
 */
int pcp_alloc_bulk(unsigned order, int count, struct page **pages);
void pcp_free_bulk(unsigned order, int count, struct page **pages);

/* drain_all_pages(): empty every pcp into the zone (malloc_trim, allocation failure). */
void pcp_drain_all(void);

/* decay_pcp_high on every pcp whose period passed, and remote-pcp expiry (trylocks: a pcp
 * in use is done next time).  Called by the periodic work (vmstat.c). */
void pcp_decay_all(uint64_t now_ms);
/* Set (relaxed) by a refill that found its CPU's decay period passed: the periodic work is
 * due.  Read and cleared by vmstat.c, which runs it from above. */
extern int pcpm_pcp_periodic_due PCPM_HIDDEN;

void pcp_stats_add(struct pcpm_stats *s);
/* Sums of one zone's pcps (refills from it, pages parked on them). */
void pcp_zone_stats(struct zone *z, uint64_t *refills, uint64_t *refill_pages, uint64_t *count);
void pcp_lock_all(void);
void pcp_unlock_all(void);
void pcp_reset_locks(void);

#endif
