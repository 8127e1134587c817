/*
 * tcache_signal.c - the thread cache while a signal handler runs (see tcache_signal.h): its
 * stacks parked and put back.  Calls tcache (the cache) and os (the nesting depth); called by
 * preload/signal.c.  Moved out of tcache.c (issue 22, branch single) to keep that file under
 * 700 lines when the stacks learnt to grow.
 */
#include "tcache_signal.h"

#include <signal.h>
#include <string.h>

/*
 * ---- signal handlers (kernel-pcp.md §12.2 "Re-entrancy") ----
 * A handler may interrupt this thread anywhere in pcpmalloc: in the middle of a thread-cache
 * push or pop, or holding a kmem_cache, pcp or zone lock.  preload/ runs every handler the
 * program installs between pcpm_signal_enter() and pcpm_signal_exit().  Enter sets the
 * thread's "in a handler" depth and parks the thread cache's stacks (the handler sees empty,
 * full stacks, so its fast paths fall through to the slow paths without touching the state
 * the interrupted code may be changing); exit puts them back unchanged.  With the depth set,
 * the slow paths use trylock only: frees that cannot get a lock are deferred on lock-free
 * lists drained by the next lock holder, allocations that cannot get one map memory.  The
 * fast path pays nothing; such a signal costs three sigprocmask calls and two 1 KiB copies.
 */

void pcpm_signal_enter(void)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* no second handler while the stacks move */
	struct tcache *tc = tcache_self();
	/* (the static caches of a thread without one have nothing to park) */
	if (pcpm_sig_depth++ == 0 && tc->state == TC_ACTIVE) {
		memcpy(tc->parked, tc->bins, sizeof(tc->parked));
		memset(tc->bins, 0, sizeof(tc->bins));
	}
	atomic_signal_fence(memory_order_seq_cst);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/*
 * Leaves every signal blocked: once the stacks are back, a signal that came before the
 * interrupted code resumed would run its handler in the normal mode against a half-done
 * push or pop.  The handler's return (rt_sigreturn) restores the interrupted code's mask
 * together with its registers, so call this last, just before returning from the handler.
 */
void pcpm_signal_exit(void)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	atomic_signal_fence(memory_order_seq_cst);
	struct tcache *tc = tcache_self();
	if (--pcpm_sig_depth == 0 && tc->state == TC_ACTIVE) {
		memcpy(tc->bins, tc->parked, sizeof(tc->parked));
		memset(tc->parked, 0, sizeof(tc->parked)); /* counted once (tcache_calls) */
	}
}
