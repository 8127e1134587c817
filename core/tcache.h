/*
 * tcache.h - per-thread object caches: the allocation fast path (no lock, no atomic).
 *
 * Each thread has, per size class, a LIFO stack of free objects threaded through their
 * first word (safe-linked: fl_encode in slab.h), refilled from and flushed to the kmem_cache in batches of PCPMALLOC_FBATCH
 * objects (15, or 31 on machines with more than 64 CPUs: the pagevec / folio_batch size,
 * kernel-pcp.md §8, §12.7).  `avail` counts the free room of a stack; it is 0 before the
 * thread's cache is set up and after it was torn down at thread exit, which sends both
 * paths to the slow path without an extra test.  A free object's second word holds a
 * per-process key: free() of an object that carries it is checked for a double free.
 * Thread-safety: a thread touches only its own cache, except stats readers (racy reads).
 */
#ifndef PCPM_TCACHE_H
#define PCPM_TCACHE_H

#include "slab.h"

struct tcache_bin {
	void *head;	/* top of the stack */
	uint32_t avail; /* room left before a flush: cap - objects on the stack */
};

enum { TC_UNINIT = 0, TC_ACTIVE = 1, TC_DEAD = 2 };

struct tcache {
	struct tcache_bin bins[NR_SIZE_CLASSES];
	/* PCPMALLOC_SECURE: the slow paths' own stacks (the fast path never sees them; bins
	 * stay empty), same layout; avail = room left (capacity as bins' in the default mode) */
	struct tcache_bin sbins[NR_SIZE_CLASSES];
	uint64_t malloc_calls, free_calls;
	uint64_t refills, flushes, large_allocs;
	int state;
	struct tcache *next, *prev; /* registry of live caches, for stats and fork */
	/* slow paths only: capacity in force per class (pcpm_tcache_cap, or one batch while
	 * the thread only frees: tcache_free_slow), and malloc_calls at the last flush */
	uint16_t cap[NR_SIZE_CLASSES];
	uint64_t flush_mark;
};

extern __thread struct tcache pcpm_tc __attribute__((tls_model("initial-exec")));
extern uintptr_t pcpm_free_key PCPM_HIDDEN;
extern uint16_t pcpm_tcache_cap[NR_SIZE_CLASSES];

/* One stack operation on bin b of tc (bins or sbins): pop needs a non-empty stack, push
 * room on it; the object's second word holds pcpm_free_key while it is on a stack. */
static inline __attribute__((always_inline)) void *tcache_bin_pop(struct tcache *tc,
								  struct tcache_bin *b)
{
	void *p = b->head;
	b->head = fl_decode(p, "malloc");
	b->avail++;
	((uintptr_t *)p)[1] = 0;
	tc->malloc_calls++;
	return p;
}

static inline __attribute__((always_inline)) void tcache_bin_push(struct tcache *tc,
								  struct tcache_bin *b, void *p)
{
	uintptr_t key = pcpm_free_key;
	fl_store(p, b->head);
	((uintptr_t *)p)[1] = key;
	b->head = p;
	b->avail--;
	tc->free_calls++;
}

/* Fast allocation of class cls, NULL when the stack is empty (then call tcache_alloc_slow). */
static inline __attribute__((always_inline)) void *tcache_pop(unsigned cls)
{
	struct tcache *tc = &pcpm_tc;
	struct tcache_bin *b = &tc->bins[cls];
	if (likely(b->head))
		return tcache_bin_pop(tc, b);
	return NULL;
}

void *tcache_alloc_slow(unsigned cls);

void tcache_free_slow(void *p, unsigned cls);

/* Pushes a validated object; false when the stack is full or the cache is not active. */
static inline __attribute__((always_inline)) bool tcache_push(void *p, unsigned cls)
{
	struct tcache *tc = &pcpm_tc;
	struct tcache_bin *b = &tc->bins[cls];
	if (likely(b->avail)) {
		tcache_bin_push(tc, b, p);
		return true;
	}
	return false;
}

/*
 * Signal handlers (see tcache.c): pcpm_sig_depth > 0 while this thread runs a handler that
 * preload/ wrapped; the slow paths then take no lock they could wait for.  Enter/exit are
 * async-signal-safe and nest; exit returns with every signal blocked (the handler's return
 * restores the interrupted mask), so it must be the handler's last call.
 */
extern __thread int pcpm_sig_depth __attribute__((tls_model("initial-exec"))) PCPM_HIDDEN;
void pcpm_signal_enter(void);
void pcpm_signal_exit(void);

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

/*
 * PCPMALLOC_SECURE: pops an object of class cls from the thread's secure-mode stack (sbins);
 * NULL when it is empty, the cache is not active or a signal handler runs (the caller then
 * takes the full slow path).  The caller arms the object (secure_arm_small).
 */
static inline void *tcache_secure_pop(unsigned cls)
{
	struct tcache *tc = &pcpm_tc;
	struct tcache_bin *b = &tc->sbins[cls];
	if (!b->head || pcpm_nested() || tc->state != TC_ACTIVE)
		return NULL;
	return tcache_bin_pop(tc, b);
}

void tcache_setup(void);
/* Registers the calling thread's cache on its first slow-path call. */
static inline void tcache_ensure(void)
{
	if (unlikely(pcpm_tc.state == TC_UNINIT))
		tcache_setup();
}

/* Counts a call made outside the fast path (large/huge, or without an active cache). */
void tcache_count_slow(bool is_free);
static inline void tcache_count(bool is_free)
{
	if (likely(pcpm_tc.state == TC_ACTIVE)) {
		if (is_free)
			pcpm_tc.free_calls++;
		else
			pcpm_tc.malloc_calls++;
	} else {
		tcache_count_slow(is_free);
	}
}

/* Double-free confirmation for an object whose key word matched: aborts when it is free. */
void tcache_check_double_free(void *p, struct page *head, const char *call);

/* Flushes the calling thread's caches back to the slabs (malloc_trim, thread exit). */
void tcache_flush_all(struct tcache *tc);

/* Objects per refill/flush (PCPMALLOC_FBATCH or the CPU-count default). */
unsigned tcache_fbatch(void);

/* Sets up per-thread teardown (pthread key); once at init. */
void pcpm_tcache_init(void);

/* Adds every thread's counters to s (registry lock).  In a signal handler that finds the lock
 * taken: the exited threads' and this thread's counters only, without waiting. */
void tcache_stats_add(struct pcpm_stats *s);
void tcache_lock_registry(void);
void tcache_unlock_registry(void);
void tcache_fork_child(void);

#endif
