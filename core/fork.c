/*
 * fork.c - the pthread_atfork handlers: every allocator lock taken in the allocator's lock
 * order before fork, released in the parent, reset in the child.  Calls every layer's lock
 * functions (init, memcheck front end, slab, zone bring-up, pcp, zone, huge, arena, tcache);
 * called by preload/.
 */
#include "fork.h"
#include "tcache.h"
#include "vgmode.h"
#include "huge_quarantine.h"
#include "secure_runs.h"
#include "init.h"
#include "os.h"
#include "prof_dump.h"
#include "topology.h"
#include "vmstat.h"

/*
 * fork: take every lock in the allocator's lock order (init, kmem_caches, zone bring-up,
 * the pcps of every zone, every zone in node order, huge and its quarantine, arena/map/meta,
 * tcache registry) so the child gets consistent data; the child then resets the locks instead
 * of unlocking (their owners do not exist there).  The pcps come before the zones because a
 * pcp holder takes its zone's lock (rmqueue_bulk, free_pcppages_bulk); no path holds two zone locks.
 */
static void zones_lock_all(void)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_relaxed);
	for (int n = 0; n < nr; n++)
		pcpm_lock(&pcpm_zones[n].lock);
}

static void zones_unlock_all(bool reset)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_relaxed);
	for (int n = nr - 1; n >= 0; n--) {
		if (reset)
			pcpm_lock_reset(&pcpm_zones[n].lock);
		else
			pcpm_unlock(&pcpm_zones[n].lock);
	}
	/* a commit running in the parent has no committer in the child: its chunk is lost
	 * there (address space only), and the child's growers commit their own */
	for (int n = 0; reset && n < nr; n++) {
		pcpm_zones[n].grower.committing = false;
		pcpm_zones[n].grower.waiters = 0;
	}
}

/*
 * The forking thread holds every lock from prepare to parent/child: "inside" meanwhile, and
 * on the no-wait paths of a signal handler (pcpm_nested(): trylocks, deferred frees, own
 * mappings) so that the other fork handlers - prepare handlers that run after this one
 * (registered before it: a library constructor, .preinit_array), parent and child handlers
 * that run before it - can allocate and free on this thread without waiting for the locks it
 * holds itself.  glibc's own malloc serves them the same way: it takes its locks inside
 * fork, after every prepare handler.
 */
static __thread int fork_was_inside;
/* This fork came from a signal handler that interrupted pcpmalloc (or from a nolock
 * child): prepare took no lock, the child keeps to the no-wait paths (pcpm_nolock_all). */
static __thread bool fork_nested;

void pcpm_fork_prepare(void)
{
	if (!pcpm_init_done())
		return;
	if (unlikely(pcpm_nested())) {
		/* the interrupted code may hold any lock: waiting for it would never end */
		fork_nested = true;
		return;
	}
	fork_was_inside = pcpm_inside;
	pcpm_inside = 1;
	atomic_signal_fence(memory_order_seq_cst);
	pcpm_init_lock();
	if (pcpm_mode == PCPM_MODE_MEMCHECK)
		vg_fork_prepare();
	secure_runs_lock(); /* a leaf: held with no other lock, whatever the mode */
	sheaf_lock_all();
	slab_lock_all();
	pcpm_lock(&pcpm_zones_lock);
	pcp_lock_all();
	zones_lock_all();
	huge_lock_all();
	huge_quar_lock();
	pcpm_arena_lock_all();
	tcache_lock_registry();
	pcpm_sig_depth++;
	atomic_signal_fence(memory_order_seq_cst);
}

void pcpm_fork_parent(void)
{
	if (!pcpm_init_done())
		return;
	if (unlikely(fork_nested)) {
		fork_nested = false;
		return;
	}
	atomic_signal_fence(memory_order_seq_cst);
	pcpm_sig_depth--;
	tcache_unlock_registry();
	pcpm_arena_unlock_all();
	huge_quar_unlock();
	huge_unlock_all();
	zones_unlock_all(false);
	pcp_unlock_all();
	pcpm_unlock(&pcpm_zones_lock);
	slab_unlock_all();
	sheaf_unlock_all();
	secure_runs_unlock();
	if (pcpm_mode == PCPM_MODE_MEMCHECK)
		vg_fork_parent();
	pcpm_init_unlock();
	atomic_signal_fence(memory_order_seq_cst);
	pcpm_inside = fork_was_inside;
}

void pcpm_fork_child(void)
{
	if (!pcpm_init_done())
		return;
	/* a fresh heap profile (lock-free tables: also after a fork from a handler) */
	if (pcpm_mode == PCPM_MODE_PROF)
		pcpm_prof_fork_child();
	if (unlikely(fork_nested)) {
		/* locks stay as they were: the interrupted frame still holds its own (and
		 * releases them when the handler returns), other threads' never come free */
		fork_nested = false;
		pcpm_nolock_all = 1;
		return;
	}
	tcache_fork_child();
	pcpm_random_fork_child();
	pcpm_vmstat_fork_child();
	pcpm_arena_reset_locks();
	huge_quar_reset_lock();
	huge_reset_locks();
	zones_unlock_all(true);
	pcp_reset_locks();
	pcpm_lock_reset(&pcpm_zones_lock);
	slab_reset_locks();
	sheaf_reset_locks();
	secure_runs_reset_lock();
	if (pcpm_mode == PCPM_MODE_MEMCHECK)
		vg_fork_child();
	pcpm_init_reset_lock();
	atomic_signal_fence(memory_order_seq_cst);
	pcpm_sig_depth--;
	pcpm_inside = fork_was_inside;
}

