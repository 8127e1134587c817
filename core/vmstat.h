/*
 * vmstat.h - the periodic work and its optional background worker, the user-space
 * vmstat_update/vmstat_shepherd.  Once per PCPMALLOC_DECAY_MS it runs decay_pcp_high on every
 * pcp, purges idle free memory in every zone and in the huge-mapping cache, and ticks the
 * lazy topology discovery: it calls down into each layer (pcp, zone, huge, topology), which
 * never call it.  Lazily: a refill that finds its CPU's period passed flags the work
 * (pcpm_pcp_periodic_due) and the API's next slow path runs it (pcpm_vmstat_maybe_run).
 * PCPMALLOC_DECAY_THREAD=1 adds a worker thread that does the same every half period, so a
 * process that went idle still gives memory back; while there is nothing to decay or purge
 * it sleeps on a futex until a free path wakes it (zone_note_free).
 * PCPMALLOC_LIVE=1 starts the same worker to publish the live statistics page once a second
 * (pcpm_vmstat_publish, set by the layer that owns the page: this file knows nothing of it);
 * without PCPMALLOC_DECAY_THREAD that is all the worker does.
 * Thread-safety: all functions are thread-safe.
 */
#ifndef PCPM_VMSTAT_H
#define PCPM_VMSTAT_H

#include "pcp.h"

extern int pcpm_vmstat_wanted;	     /* PCPMALLOC_DECAY_THREAD, cleared if the start fails */
extern _Atomic int pcpm_vmstat_running; /* the worker was started in this process */

/* Interval of the live page (ms): the worker calls pcpm_vmstat_publish this often. */
#define PCPM_VMSTAT_PUBLISH_MS 1000
/* Called on the worker thread (no allocator lock held) when PCPMALLOC_LIVE=1: the live
 * page's publisher (live.c), set before the worker starts by the layer above (preload). */
extern void (*_Atomic pcpm_vmstat_publish)(void);

/* The periodic work, now (every layer's part; trylocks where a lock is in use). */
void pcpm_periodic(uint64_t now_ms);

/* From the API's slow paths: runs the periodic work when a refill flagged it due. */
static inline void pcpm_vmstat_maybe_run(void)
{
	if (unlikely(__atomic_load_n(&pcpm_pcp_periodic_due, __ATOMIC_RELAXED))) {
		__atomic_store_n(&pcpm_pcp_periodic_due, 0, __ATOMIC_RELAXED);
		pcpm_periodic(pcpm_now_ms());
	}
}

/* After a free: a free's pcp drain (pcp_free) may have found its CPU's decay period passed
 * and flagged the periodic work, so frees run it as mallocs do (a program that only frees
 * still decays and purges: the lazy vmstat_update).  Not in a signal handler (the work
 * takes locks; a later call runs it). */
void pcpm_vmstat_after_free_slow(void);

static inline void pcpm_vmstat_after_free(void)
{
	if (unlikely(__atomic_load_n(&pcpm_pcp_periodic_due, __ATOMIC_RELAXED)))
		pcpm_vmstat_after_free_slow();
}

/* Starts the worker if configured and not running (call with no allocator lock held). */
void pcpm_vmstat_start(void);

static inline void pcpm_vmstat_maybe_start(void)
{
	if (unlikely(pcpm_vmstat_wanted && !atomic_load_explicit(&pcpm_vmstat_running, memory_order_relaxed)))
		pcpm_vmstat_start();
}

/* fork child: the worker does not exist there; the next slow path restarts it. */
void pcpm_vmstat_fork_child(void);

#endif
