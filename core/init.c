/*
 * init.c - start-up of the allocator proper (see init.h): the configuration, the mode, then
 * each layer bottom-up; PCPMALLOC_VERBOSE=1 prints what is in force.  Calls every layer's
 * init (topology, zone, pcp, slab, tcache, huge), config, the memcheck probe (vg.c) and the
 * secure mode's keys (secure.c); called by the API entries (api.c) and preload's constructor.
 */
#define _GNU_SOURCE
#include "init.h"
#include "config.h"
#include "huge.h"
#include "huge_quarantine.h"
#include "prof_dump.h"
#include "secure.h"
#include "tcache.h"
#include "topology.h"
#include "vg.h"
#include "vmstat.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

static pcpm_lock_t init_lock PCPM_HOT = PCPM_LOCK_INIT;
static _Atomic int init_done PCPM_HOT;
_Atomic int pcpm_mode PCPM_HOT = PCPM_MODE_START;

/*
 * PCPMALLOC_VERBOSE=1: the configuration in force, as one block written with one write(2)
 * (built in a static buffer under init_lock: no malloc, nothing on a small stack).
 */
static char config_block[8192];

static void print_configuration(void)
{
	static const char *const cpu_src[] = {"rseq", "sched_getcpu", "thread-id hash"};
	static const char *const topo[] = {"lazy", "now", "off"};
	char *b = config_block;
	size_t len = sizeof(config_block), n = 0;
	n = pcpm_bappend(b, len, n, "pcpmalloc: pcpmalloc %s in pid %d: configuration in force\n",
			 PCPM_VERSION, (int)getpid());
	n = pcpm_config_describe(b, len, n);
	const struct pcpm_cpu_cache *cc = pcpm_cpu_cache(0);
	const struct per_cpu_pages *pcp = &pcpm_pcp[0];
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   cpus: %d pcp slots, %d CPUs usable; current CPU from %s\n",
			 pcpm_nr_cpus, pcpm_nr_online,
			 pcp_uses_rseq() ? "rseq" : cpu_src[pcpm_cfg.cpu_source == CPU_TID ? 2 : 1]);
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   caches (cpu 0): L2 %zu KiB, LLC %zu KiB shared by %d, slice %zu KiB "
			 "(provisional; discovery: %s)\n",
			 cc->l2_bytes >> 10, cc->llc_bytes >> 10, cc->llc_shared, cc->slice_bytes >> 10,
			 topo[pcpm_cfg.topology]);
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   pcp (cpu 0): batch %d, high_min %d, high_max %d pages, "
			 "free_high_batch %s, high policy %s\n",
			 pcp->batch, pcp->high_min, pcp->high_max,
			 (pcp->flags & PCPF_FREE_HIGH_BATCH) ? "on" : "off",
			 pcpm_cfg.high_policy ? "heap" : "cache");
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   slab: %d size classes, 16 B .. %d KiB; thread caches %s, %u objects "
			 "per refill/flush\n",
			 NR_SIZE_CLASSES, SLAB_PAGED_MAX >> 10,
			 pcpm_tcache_cap[0] ? "on" : "off", tcache_fbatch());
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   arena: %zu MiB of address space reserved per arena (when the first "
			 "is needed), committed %d MiB at a time; own mappings above %lu MiB\n",
			 pcpm_arena_reserve_bytes() >> 20, pcpm_cfg.arena_chunk_mb, HUGE_THRESHOLD >> 20);
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   purge: free memory unused for %d ms, every %d ms, or beyond %d%% of "
			 "the recent peak in use (at least %d MiB); decay thread %s\n",
			 pcpm_cfg.decay_ms / 2, pcpm_cfg.decay_ms / 2, pcpm_cfg.dirty_pct, pcpm_cfg.dirty_min_mb,
			 pcpm_cfg.decay_thread ? "on (started at the first allocation)" : "off");
	n = pcpm_bappend(b, len, n, "pcpmalloc:   valgrind: memcheck mode %s\n",
			 pcpm_vg ? "on" : "off");
	n = pcpm_bappend(b, len, n, "pcpmalloc: end of configuration\n");
	pcpm_write_stderr(b, n);
}

/* Thread id of the thread running the initialisation (under init_lock), 0 when none. */
static _Atomic long init_owner;

static long my_tid(void)
{
	int e = errno;
	long t = syscall(SYS_gettid);
	errno = e;
	return t;
}

bool pcpm_init_reentered(void)
{
	long o = atomic_load_explicit(&init_owner, memory_order_relaxed);
	return o && o == my_tid();
}

bool pcpm_init(void)
{
	if (likely(atomic_load_explicit(&init_done, memory_order_acquire)))
		return true;
	if (pcpm_init_reentered())
		return false; /* the caller serves it from the early area (pcpm_init_reentered) */
	pcpm_lock(&init_lock);
	atomic_store_explicit(&init_owner, my_tid(), memory_order_relaxed);
	if (!atomic_load_explicit(&init_done, memory_order_relaxed)) {
		pcpm_config_init();
		bool secure = pcpm_cfg.secure;
		pcpm_vg_init();
		/* memcheck mode describes every block to memcheck; secure mode's canaries, junk
		 * and whole-slab carving write where it has said "no access" (false reports), and
		 * its slabs hand out object 0, which memcheck mode keeps back (valid frees
		 * aborted as invalid): memcheck, which sees more, wins */
		if (pcpm_vg && secure) {
			secure = false;
			pcpm_warn("PCPMALLOC_SECURE=1 ignored: memcheck mode is on (PCPMALLOC_VALGRIND)");
		}
		pcpm_secure = secure;
		pcpm_secure_prot = (pcpm_cfg.secure_zero ? SECURE_P_ZERO : 0) |
				   (pcpm_cfg.secure_canary ? SECURE_P_CANARY : 0) |
				   (pcpm_cfg.secure_quarantine ? SECURE_P_QUAR : 0);
		/* junk filling is a debugging aid of the default functions: secure mode zeroes
		 * free memory instead, memcheck mode tracks it */
		bool junk = pcpm_cfg.junk && !secure && !pcpm_vg;
		if (pcpm_cfg.junk && !junk)
			pcpm_warn("PCPMALLOC_JUNK=1 ignored: %s mode is on", secure ? "secure" : "memcheck");
		/* the heap profiler samples the default functions' blocks: the other modes
		 * have front ends of their own */
		bool prof = (pcpm_cfg.prof || pcpm_cfg.leaks) && !secure && !pcpm_vg && !junk;
		/* (a note, not a warning: a suite or a shell that profiles everything it runs
		 * also runs programs in those modes; a dump asked for says profiling is off) */
		if ((pcpm_cfg.prof || pcpm_cfg.leaks) && !prof)
			pcpm_verbose("PCPMALLOC_PROF/PCPMALLOC_LEAKS ignored: %s mode is on",
				     secure ? "secure" : pcpm_vg ? "memcheck" : "junk");
		pcpm_topology_init();
		pcpm_zone_init(&pcpm_zone);
		/* the one step that can fail (out of memory): nothing before it needs undoing,
		 * so a later call simply starts over */
		if (!pcpm_pcp_init()) {
			atomic_store_explicit(&init_owner, 0, memory_order_relaxed);
			pcpm_unlock(&init_lock);
			return false;
		}
		/* secure mode carves whole slabs in random order; memcheck mode keeps object 0
		 * back and sends every free through its front end */
		pcpm_cycles_mark(); /* the lock profile's clock */
		pcpm_slab_init(secure ? SLAB_FREELIST_RANDOM : pcpm_vg ? SLAB_HIDE_FIRST : 0);
		/* the fast stacks in the default mode only; secure mode has stacks of its own,
		 * which only its front end pops and pushes */
		/* the profiler counts the bytes of refills: stacks that grow would serve
		 * allocations it never counts (test_prof: 330 of 512 MB) */
		if (prof)
			pcpm_cfg.tcache_grow_kb = 0;
		pcpm_tcache_init(!pcpm_vg && !secure && !junk, secure);
		/* CPU sheaves in the default mode only: the other modes check and annotate
		 * objects on the paths between the thread caches and the slabs */
		pcpm_sheaf_init(!pcpm_vg && !secure && !junk && pcpm_cfg.sheaves && pcpm_cfg.tcache);
		if (secure) {
			pcpm_secure_init(pcpm_link_key);
			huge_deferred_free_set(huge_free_quarantined);
		}
		huge_init(pcpm_vg);
		if (prof)
			prof = pcpm_prof_init();
		pcpm_vmstat_wanted = pcpm_cfg.decay_thread || pcpm_cfg.live;
		if (pcpm_cfg.verbose)
			print_configuration();
		/* the mode first: whoever sees init_done sees the mode chosen */
		atomic_store_explicit(&pcpm_mode,
				      pcpm_vg	? PCPM_MODE_MEMCHECK
				      : secure	? PCPM_MODE_SECURE
				      : junk	? PCPM_MODE_JUNK
				      : prof	? PCPM_MODE_PROF
						: PCPM_MODE_DEFAULT,
				      memory_order_release);
		atomic_store_explicit(&init_done, 1, memory_order_release);
	}
	atomic_store_explicit(&init_owner, 0, memory_order_relaxed);
	pcpm_unlock(&init_lock);
	return true;
}

bool pcpm_init_done(void)
{
	return atomic_load_explicit(&init_done, memory_order_acquire);
}

void pcpm_init_lock(void)
{
	pcpm_lock(&init_lock);
}

void pcpm_init_unlock(void)
{
	pcpm_unlock(&init_lock);
}

void pcpm_init_reset_lock(void)
{
	pcpm_lock_reset(&init_lock);
}
