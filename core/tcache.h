/*
 * tcache.h - per-thread object caches: the allocation fast path (no lock, no atomic).
 *
 * Each thread has, per size class, a LIFO stack of free objects threaded through their
 * first word, refilled from and flushed to the kmem_cache in batches of PCPMALLOC_FBATCH
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
	uint64_t malloc_calls, free_calls;
	uint64_t refills, flushes, large_allocs;
	int state;
	struct tcache *next, *prev; /* registry of live caches, for stats and fork */
};

extern __thread struct tcache pcpm_tc __attribute__((tls_model("initial-exec")));
extern uintptr_t pcpm_free_key;
extern uint16_t pcpm_tcache_cap[NR_SIZE_CLASSES];

/* Fast allocation of class cls, NULL when the stack is empty (then call tcache_alloc_slow). */
static inline __attribute__((always_inline)) void *tcache_pop(unsigned cls)
{
	struct tcache *tc = &pcpm_tc;
	struct tcache_bin *b = &tc->bins[cls];
	void *p = b->head;
	if (likely(p)) {
		b->head = *(void **)p;
		b->avail++;
		((uintptr_t *)p)[1] = 0;
		tc->malloc_calls++;
	}
	return p;
}

void *tcache_alloc_slow(unsigned cls);
void tcache_free_slow(void *p, unsigned cls);

/* Pushes a validated object; false when the stack is full or the cache is not active. */
static inline __attribute__((always_inline)) bool tcache_push(void *p, unsigned cls)
{
	struct tcache *tc = &pcpm_tc;
	struct tcache_bin *b = &tc->bins[cls];
	if (likely(b->avail)) {
		*(void **)p = b->head;
		((uintptr_t *)p)[1] = pcpm_free_key;
		b->head = p;
		b->avail--;
		tc->free_calls++;
		return true;
	}
	return false;
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

void tcache_stats_add(struct pcpm_stats *s);
void tcache_lock_registry(void);
void tcache_unlock_registry(void);
void tcache_fork_child(void);

#endif
