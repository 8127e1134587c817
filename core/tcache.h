/*
 * tcache.h - per-thread object caches: the allocation fast path (no lock, no atomic).
 *
 * Each thread has, per size class, a LIFO stack of free objects: an array of pointers (as the
 * kernel's sheaf, `void *objects[]`, and jemalloc's cache_bin), so a refill and a flush are
 * copies and no free object's memory carries a link the allocator follows.  Refilled from
 * and flushed to the slab layer (its per-CPU sheaves) in batches of PCPMALLOC_FBATCH objects
 * (15, or 31 on machines with more than 64 CPUs: the pagevec / folio_batch size,
 * kernel-pcp.md §8, §12.7); a flush gives back the oldest objects (the bottom of the
 * stack) and keeps the recently freed, cache-hot ones.  Before the thread's cache is set up
 * and after it was torn down at thread exit, every stack reads as empty and full at once,
 * which sends both paths to the slow path without an extra test.  A free object's second
 * word holds a per-process key: free() of an object that carries it is checked for a double
 * free.  Thread-safety: a thread touches only its own cache, except stats readers and the
 * double-free search (racy reads of the arrays, bounded).
 */
#ifndef PCPM_TCACHE_H
#define PCPM_TCACHE_H

#include "os.h"
#include "tcache_registry.h"


extern uint16_t pcpm_tcache_cap[NR_SIZE_CLASSES];

/* One stack operation on bin b of tc (bins or sbins): pop needs a non-empty stack, push
 * room on it; the object's second word holds PCPM_FREE_KEY while it is on a stack (take:
 * a pop that leaves the mark, for a caller that overwrites it at once, as calloc). */
static inline __attribute__((always_inline)) void *tcache_bin_take(struct tcache *tc,
								   struct tcache_bin *b)
{
	void **t = b->top;
	b->top = t + 1; /* (before the load: p is then computed in the return register) */
	void *p = *t;
	tc->pops++;
	return p;
}

static inline __attribute__((always_inline)) void *tcache_bin_pop(struct tcache *tc,
								  struct tcache_bin *b)
{
	void *p = tcache_bin_take(tc, b);
	((uintptr_t *)p)[1] = 0;
	return p;
}

static inline __attribute__((always_inline)) void tcache_bin_push(struct tcache *tc,
								  struct tcache_bin *b, void *p)
{
	(void)tc; /* counted by the stacks (struct tcache: pops) */
	void **t = b->top - 1;
	((uintptr_t *)p)[1] = PCPM_FREE_KEY;
	*t = p;
	b->top = t;
}

/* The stack at offset bin8 x 8 bytes of tc (a descriptor's bin8 or a direct table entry:
 * cls x 2), in one addressing mode (the x86 scale 8). */
static inline __attribute__((always_inline)) struct tcache_bin *tcache_bin_at(struct tcache *tc,
									      size_t bin8)
{
	return (struct tcache_bin *)((char *)tc + bin8 * 8);
}

/* Fast allocation of class cls, NULL when the stack is empty (then call tcache_alloc_slow). */
static inline __attribute__((always_inline)) void *tcache_pop(unsigned cls)
{
	struct tcache *tc = tcache_self();
	struct tcache_bin *b = &tc->bins[cls];
	if (likely(!tcache_bin_empty(b)))
		return tcache_bin_pop(tc, b);
	return NULL;
}

/*
 * The fast paths' stack operations on the stack at bin8 r of tc (a direct table entry or a
 * descriptor's bin8), each access in the (tc, r, 8) addressing mode.  TCACHE_HIDE(r)
 * between the accesses hides from gcc that they share an address, which it would otherwise
 * compute once into a register (lea: one instruction more per pop and per push).
 */
#define TCACHE_HIDE(r) __asm__("" : "+r"(r))

/* Pops the object on top of the stack at *r into *out (the mark left in place: the caller
 * clears it or overwrites it); false when the stack is empty.  *r is hidden in place, so a
 * caller that goes on using it (calloc's stores) needs no copy of it. */
static inline __attribute__((always_inline)) bool tcache_take_at(struct tcache *tc, size_t *r,
								  void **out)
{
	void **t = tcache_bin_at(tc, *r)->top;
	TCACHE_HIDE(*r);
	if (unlikely((uint16_t)(uintptr_t)t == tcache_bin_at(tc, *r)->empty))
		return false;
	TCACHE_HIDE(*r);
	tcache_bin_at(tc, *r)->top = t + 1;
	*out = *t;
	tc->pops++;
	return true;
}

/* Pushes the validated object p on the stack at *r; false when it is full.  *r is hidden
 * in place, as tcache_take_at's, so a caller that passes it on to a slow path (free's, when
 * the stack is full) needs no copy of it. */
static inline __attribute__((always_inline)) bool tcache_push_at(struct tcache *tc, size_t *r,
								  void *p)
{
	void **t = tcache_bin_at(tc, *r)->top;
	TCACHE_HIDE(*r);
	if (unlikely((uint16_t)(uintptr_t)t == tcache_bin_at(tc, *r)->full))
		return false;
	TCACHE_HIDE(*r);
	((uintptr_t *)p)[1] = PCPM_FREE_KEY;
	t[-1] = p;
	tcache_bin_at(tc, *r)->top = t - 1;
	return true;
}

/* Fast allocation of n <= SMALL_LOOKUP_MAX bytes through the direct table, NULL when the
 * stack is empty (then call tcache_alloc_slow with the class). */
static inline __attribute__((always_inline)) void *tcache_pop_small(size_t n)
{
	struct tcache *tc = tcache_self();
	void *p;
	if (likely(tcache_take_at(tc, &(size_t){tc->direct[n]}, &p))) {
		((uintptr_t *)p)[1] = 0;
		return p;
	}
	return NULL;
}

void *tcache_alloc_slow(unsigned cls);

void tcache_free_slow(void *p, unsigned cls);

/*
 * An object whose free was counted when the program called free, given back later (memcheck
 * mode's quarantine release): pushed, or through tcache_free_slow, and not counted again.
 * p carries no free mark yet; same thread-safety as tcache_free_slow (the calling thread's
 * cache only).
 */
void tcache_release(void *p, unsigned cls);

/* Pushes a validated object; false when the stack is full or the cache is not active. */
static inline __attribute__((always_inline)) bool tcache_push(void *p, unsigned cls)
{
	struct tcache *tc = tcache_self();
	struct tcache_bin *b = &tc->bins[cls];
	if (likely(!tcache_bin_full(b))) {
		tcache_bin_push(tc, b, p);
		return true;
	}
	return false;
}

/*
 * A front end's own stacks (sbins; secure mode uses them): tcache keeps them like its own -
 * flushed at thread exit and by tcache_flush_all, searched by the double-free check - but
 * never pops or pushes them; the front end does, with tcache_bin_pop/push.
 * tcache_mode_ready: the cache is active and the stack of cls in use; tcache_mode_refill
 * fills the empty stack from the slab (false: memory exhausted); tcache_mode_flush gives a
 * batch of a full stack back to the slab.
 */
bool tcache_mode_ready(struct tcache *tc, unsigned cls);
bool tcache_mode_refill(struct tcache *tc, unsigned cls);
void tcache_mode_flush(struct tcache *tc, unsigned cls);

void tcache_setup(void);
/* Registers the calling thread's cache on its first slow-path call. */
static inline void tcache_ensure(void)
{
	if (unlikely(tcache_self()->state == TC_UNINIT))
		tcache_setup();
}



/* Flushes the calling thread's caches back to the slabs (malloc_trim, thread exit). */
void tcache_flush_all(struct tcache *tc);

/* Objects per refill/flush (PCPMALLOC_FBATCH or the CPU-count default). */
unsigned tcache_fbatch(void);

/* Capacities and per-thread teardown (pthread key); once at init.  fast_stacks: the fast
 * path's stacks (the default mode); mode_stacks: the front end's (sbins, secure mode). */
void pcpm_tcache_init(bool fast_stacks, bool mode_stacks);


/* The calling thread's cached object for a request of n bytes, NULL when the request is not a
 * cached class's or its stack is empty (then the caller's slow path); the malloc fast path of
 * every front end that uses the default caches. */
static inline __attribute__((always_inline)) void *tcache_pop_size(size_t n)
{
	if (likely(n <= SMALL_LOOKUP_MAX))
		return tcache_pop_small(n);
	if (n <= SLAB_MAX_SIZE)
		return tcache_pop(size_to_class(n));
	return NULL;
}

#endif
