/*
 * vmstat.c - the periodic work and the background decay/purge worker (see vmstat.h;
 * kernel-pcp.md §5.1, §12.5).  Calls the pcp, zone, huge and topology layers.
 */
#define _GNU_SOURCE
#include "vmstat.h"
#include "config.h"
#include "zone_purge.h"
#include "huge.h"
#include "sheaf.h"
#include "topology.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Atomic int pcpm_vmstat_running;
int pcpm_vmstat_wanted PCPM_HOT;
static pcpm_lock_t start_lock = PCPM_LOCK_INIT;

/* Is there anything to decay (high above high_min, pages above high) or to purge? */
static bool need_update(void)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++) {
		for (int i = 0; i < pcpm_nr_cpus; i++) {
			struct per_cpu_pages *p = zone_pcp(&pcpm_zones[n], (unsigned)i);
			/* a remote pcp holding pages still has expiry to run */
			if (p->high > p->high_min || p->count > p->high_min ||
			    (p->count && pcp_cpu_node((unsigned)i) != n))
				return true;
		}
		if (pcpm_zones[n].dirty_pages)
			return true;
	}
	/* freed mappings not yet purged (huge_cache_decay), objects on sheaves (sheaf_decay) */
	return huge_cache_resident() > 0 || huge_deferred_pending() || sheaf_pending();
}

void pcpm_periodic(uint64_t now)
{
	sheaf_decay(now); /* first: what idle sheaves give back reaches the pcps below */
	pcp_decay_all(now);
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++)
		zone_maybe_purge(&pcpm_zones[n], now);
	pcpm_topology_tick(pcpm_zone.managed_pages);
	huge_drain_deferred_periodic(); /* what signal handlers freed while a lock was taken */
	huge_cache_decay(now);
}

void (*_Atomic pcpm_vmstat_publish)(void);

/* PCPMALLOC_LIVE: the live page, when its interval has passed (or first); true if live. */
static bool maybe_publish(uint64_t now, uint64_t *last)
{
	if (!pcpm_cfg.live)
		return false;
	void (*fn)(void) = atomic_load_explicit(&pcpm_vmstat_publish, memory_order_acquire);
	/* (the coarse clock ticks every 4 ms: a whole interval may read as 996 ms) */
	if (fn && (!*last || now - *last + 8 >= PCPM_VMSTAT_PUBLISH_MS)) {
		fn();
		*last = now;
	}
	return true;
}

static void *vmstat_worker(void *arg)
{
	(void)arg;
	uint64_t published = 0;
	maybe_publish(pcpm_now_ms(), &published); /* the page exists from the start on */
	for (;;) {
		/* twice a period: each pcp still decays once per period (pcp_periodic checks), the
		 * zone purge runs every half period (zone_maybe_purge); only the live page (no
		 * decay thread asked for): once per interval */
		int ms = pcpm_cfg.decay_ms / 2 > 0 ? pcpm_cfg.decay_ms / 2 : 1;
		if (pcpm_cfg.live && (!pcpm_cfg.decay_thread || ms > PCPM_VMSTAT_PUBLISH_MS))
			ms = PCPM_VMSTAT_PUBLISH_MS;
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		uint64_t now = pcpm_now_ms();
		if (pcpm_cfg.decay_thread)
			pcpm_periodic(now);
		if (maybe_publish(now, &published))
			continue; /* the page is rewritten every interval: no futex sleep */
		if (need_update())
			continue;
		/* vmstat_shepherd: nothing left; sleep until a free path kicks us */
		atomic_store(&pcpm_zone_free_waiter, 1);
		if (!need_update()) /* a wake-up between the check and the store would be lost */
			syscall(SYS_futex, (int *)&pcpm_zone_free_waiter, FUTEX_WAIT_PRIVATE, 1, NULL,
				NULL, 0);
		atomic_store(&pcpm_zone_free_waiter, 0);
	}
	return NULL;
}

void pcpm_vmstat_start(void)
{
	if (!pcpm_vmstat_wanted)
		return;
	pcpm_lock(&start_lock);
	if (!atomic_load(&pcpm_vmstat_running)) {
		atomic_store(&pcpm_vmstat_running, 1); /* before pthread_create: it allocates */
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 64 << 10);
		/* the worker takes allocator locks: no program signal handler may run on it */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		int rc = pthread_create(&t, &attr, vmstat_worker, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc != 0) {
			pcpm_vmstat_wanted = 0;
			if (pcpm_cfg.verbose)
				pcpm_warn("cannot start the decay thread; decay stays lazy");
		} else {
			pthread_setname_np(t, pcpm_cfg.decay_thread ? "pcpmalloc-decay"
							      : "pcpmalloc-live");
			if (pcpm_cfg.decay_thread)
				pcpm_verbose("decay thread started: decay and purge every %d ms",
					     pcpm_cfg.decay_ms);
			if (pcpm_cfg.live)
				pcpm_verbose("live page: the worker publishes it every %d ms",
					     PCPM_VMSTAT_PUBLISH_MS);
		}
		pthread_attr_destroy(&attr);
	}
	pcpm_unlock(&start_lock);
}

void pcpm_vmstat_fork_child(void)
{
	pcpm_lock_reset(&start_lock);
	atomic_store(&pcpm_vmstat_running, 0);
	atomic_store(&pcpm_zone_free_waiter, 0);
}

void pcpm_vmstat_after_free_slow(void)
{
	if (pcpm_nested()) /* a handler: the periodic work takes locks; a later call runs it */
		return;
	PCPM_INSIDE_BEGIN();
	pcpm_vmstat_maybe_run();
	PCPM_INSIDE_END();
}
