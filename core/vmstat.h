/*
 * vmstat.h - the optional background worker (PCPMALLOC_DECAY_THREAD=1), the user-space
 * vmstat_update/vmstat_shepherd: once per PCPMALLOC_DECAY_MS it runs decay_pcp_high on every
 * pcp and purges idle free memory, so a process that went idle still gives memory back.
 * While there is nothing to decay or purge it sleeps on a futex until a free path kicks it,
 * so an idle process is not woken every period.  Off by default: lazy decay from the slow
 * paths does the same work for processes that keep allocating.
 * Thread-safety: all functions are thread-safe.
 */
#ifndef PCPM_VMSTAT_H
#define PCPM_VMSTAT_H

#include "os.h"

extern _Atomic int pcpm_vmstat_idle; /* 1 while the worker sleeps waiting for work */

extern int pcpm_vmstat_wanted;	     /* PCPMALLOC_DECAY_THREAD, cleared if the start fails */
extern _Atomic int pcpm_vmstat_running; /* the worker was started in this process */

/* Starts the worker if configured and not running (call with no allocator lock held). */
void pcpm_vmstat_start(void);

/* Wakes a sleeping worker: memory became free that may need decay/purge. */
void pcpm_vmstat_kick_slow(void);
static inline void pcpm_vmstat_kick(void)
{
	if (unlikely(atomic_load_explicit(&pcpm_vmstat_idle, memory_order_relaxed)))
		pcpm_vmstat_kick_slow();
}

static inline void pcpm_vmstat_maybe_start(void)
{
	if (unlikely(pcpm_vmstat_wanted && !atomic_load_explicit(&pcpm_vmstat_running, memory_order_relaxed)))
		pcpm_vmstat_start();
}

/* fork child: the worker does not exist there; the next slow path restarts it. */
void pcpm_vmstat_fork_child(void);

#endif
