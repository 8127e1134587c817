/*
 * nested.h - is this thread inside a signal handler that may have interrupted pcpmalloc, or
 * inside pcpmalloc's own slow path?  A leaf every layer reads (kernel-pcp.md §12.2): the
 * slow paths of every layer keep to trylocks while pcpm_nested() holds.  The variables live
 * in os.c; the handler wrapper (preload/signal.c) and tcache.c's enter/exit set them.
 */
#ifndef PCPM_NESTED_H
#define PCPM_NESTED_H

#include "os.h"

/*
 * Signal handlers (see tcache.c): pcpm_sig_depth > 0 while this thread runs a handler that
 * preload/ wrapped; the slow paths then take no lock they could wait for.  Enter/exit are
 * async-signal-safe and nest; exit returns with every signal blocked (the handler's return
 * restores the interrupted mask), so it must be the handler's last call.
 */
extern __thread int pcpm_sig_depth __attribute__((tls_model("initial-exec"))) PCPM_HIDDEN;

/*
 * Set for good in the child of a fork() called by a signal handler that had interrupted
 * pcpmalloc (pcpm_fork_prepare could take no lock without deadlocking on the interrupted
 * code's): the locks other threads held at the fork stay taken in the child, so every
 * thread of the child keeps to the no-wait paths of the handlers.
 */
extern int pcpm_nolock_all PCPM_HIDDEN;

/* Must the slow paths avoid waiting for a lock (a signal handler, or such a child)? */
static inline bool pcpm_nested(void)
{
	return pcpm_sig_depth || pcpm_nolock_all;
}

/*
 * The per-thread "inside allocator" flag of kernel-pcp.md §12.2, kept by the slow paths only
 * (the fast paths run entirely in pcpmalloc's own code, which the signal wrapper recognises
 * from the interrupted program counter).  A handler that interrupted neither runs the normal
 * paths, and may leave with siglongjmp.  PCPM_INSIDE_BEGIN/END bracket a slow path.
 */
extern __thread int pcpm_inside __attribute__((tls_model("initial-exec"))) PCPM_HIDDEN;
#define PCPM_INSIDE_BEGIN()                                                                        \
	int pcpm_was_inside_ = pcpm_inside;                                                        \
	pcpm_inside = 1;                                                                           \
	atomic_signal_fence(memory_order_seq_cst)
#define PCPM_INSIDE_END()                                                                          \
	do {                                                                                       \
		atomic_signal_fence(memory_order_seq_cst);                                         \
		pcpm_inside = pcpm_was_inside_;                                                    \
	} while (0)

#endif
