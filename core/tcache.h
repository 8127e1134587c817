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
#include "sheaf.h"

/*
 * One stack.  Its slots are the array [bottom - max, bottom) of the thread's slot area; the
 * stack grows down from `bottom`, `top` points at the object the next pop returns.  Only the
 * low 16 bits of the two limits are kept (an array spans less than 64 KiB, so they are
 * unique within it): `top` at `empty` means no object, at `full` no room under the capacity
 * in force.  16 bytes, as the list head and count it replaced; a zeroed bin (no slots) is
 * empty and full at once.
 */
struct tcache_bin {
	void **top;	/* next object to pop; objects at [top, bottom) */
	uint16_t empty; /* (uint16_t)bottom */
	uint16_t full;	/* (uint16_t)(bottom - capacity in force) */
};

static inline __attribute__((always_inline)) bool tcache_bin_empty(const struct tcache_bin *b)
{
	return (uint16_t)(uintptr_t)b->top == b->empty;
}

static inline __attribute__((always_inline)) bool tcache_bin_full(const struct tcache_bin *b)
{
	return (uint16_t)(uintptr_t)b->top == b->full;
}

/* Objects on the stack, and room left under the capacity in force. */
static inline unsigned tcache_bin_count(const struct tcache_bin *b)
{
	return (uint16_t)(b->empty - (uint16_t)(uintptr_t)b->top) / sizeof(void *);
}

static inline unsigned tcache_bin_room(const struct tcache_bin *b)
{
	return (uint16_t)((uint16_t)(uintptr_t)b->top - b->full) / sizeof(void *);
}

enum { TC_UNINIT = 0, TC_ACTIVE = 1, TC_DEAD = 2 };

#define TC_RING 64 /* objects in a front end's quarantine ring */

struct tcache {
	struct tcache_bin bins[NR_SIZE_CLASSES];
	/* a front end's own stacks (secure mode's; the fast path never sees them, bins stay
	 * empty then), same layout (capacity as bins' in the default mode) */
	struct tcache_bin sbins[NR_SIZE_CLASSES];
	/* malloc's direct table, indexed by the request itself (0..SMALL_LOOKUP_MAX bytes):
	 * the offset of its class's stack from the cache in 8-byte units (cls x 2, as a slab
	 * page's bin8), so the fast path goes from the size to its stack in one byte load and
	 * an addressing mode, with no rounding of the size (mimalloc's pages_direct is indexed
	 * by (n + 7) >> 3 and holds pointers: two instructions more).  1 KiB per thread; the
	 * static caches' entries are all TC_BIN8_NONE */
	uint8_t direct[SMALL_LOOKUP_MAX + 1];
	/*
	 * Call counts.  The fast paths count pops only (one increment, in malloc); a push
	 * follows from the stacks: every object on a stack came by a refill or a push and left
	 * by a pop or a flush, so pushes = pops + objects held - moved (tcache_calls).
	 * malloc_calls and free_calls count the calls that pop or push nothing (slow paths),
	 * moved the objects refills put on the stacks less those flushes took off.
	 */
	uint64_t pops, malloc_calls, free_calls, moved;
	uint64_t refills, flushes, large_allocs;
	int state;
	struct tcache *next, *prev; /* registry of live caches, for stats and fork */
	/* slow paths only: capacity in force per class (pcpm_tcache_cap, or one batch while
	 * the thread only frees: tcache_free_slow), and malloc_calls at the last flush */
	uint16_t cap[NR_SIZE_CLASSES];
	uint64_t flush_mark;
	/*
	 * Stacks that grow (tcache.c, tcache_grow_refill): a class whose objects make round
	 * trips - flushed to the slab layer, then refilled from it - gets room for its working
	 * set, as tcmalloc's per-class max_length.  slots_max: the size of the class's array
	 * (pcpm_tcache_cap, or TC_GROW_SLOTS once it moved to grow_area); trip: TC_TRIP_*
	 * bits; overage: flushes in a row without a refill between; seen: the slow-path tick
	 * (refills + flushes) of the class's last refill; grown: bytes of capacity above
	 * pcpm_tcache_cap over every class (at most tc_grow_bytes).  grow_area is kept when the
	 * cache is reused.
	 */
	uint16_t slots_max[NR_SIZE_CLASSES];
	uint8_t trip[NR_SIZE_CLASSES], overage[NR_SIZE_CLASSES];
	/* slow start: refills of the class so far, up to the first of a whole batch (tcache.c's
	 * refill_want; TC_RAMP_DONE from then on) */
	uint8_t ramp[NR_SIZE_CLASSES];
	uint64_t seen[NR_SIZE_CLASSES];
	size_t grown;
	void **grow_area;
	void **slots; /* the stacks' arrays: metadata after the struct, bins' then sbins' */
	/* a front end's quarantine of freed objects (secure mode): each free puts its object
	 * in a random slot of its class's group of the ring and takes out the one that was
	 * there (secure_mode.c's ring_swap_class); flushed with the stacks */
	void *ring[TC_RING];
	uint8_t ring_cls[TC_RING];
	uint64_t ring_rng;
	/* the fast stacks while a signal handler runs (pcpm_signal_enter, tcache_signal.c) */
	struct tcache_bin parked[NR_SIZE_CLASSES];
	struct tcache *free_next; /* on the list of caches of exited threads, for reuse */
};

/*
 * The calling thread's cache.  The thread-local part of pcpmalloc is this pointer and a few
 * flags (initial-exec TLS of a few words, so the library can also be dlopen'ed or linked):
 * the cache itself is allocator metadata, set up at the thread's first slow path, reused
 * after the thread exits.  Never NULL: before set-up it is a static cache in the TC_UNINIT
 * state and after exit one in TC_DEAD, both with empty stacks and no room, so the fast paths
 * fall through to the slow paths without a test of their own.
 */
extern __thread struct tcache *pcpm_tcp __attribute__((tls_model("initial-exec"))) PCPM_HIDDEN;
static inline __attribute__((always_inline)) struct tcache *tcache_self(void)
{
	return pcpm_tcp;
}
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
_Static_assert(sizeof(struct tcache_bin) == 16 && __builtin_offsetof(struct tcache, bins) == 0,
	       "struct page's bin8 is cls x 2 in 8-byte units from the start of a thread cache");
_Static_assert(NR_SIZE_CLASSES * 2 <= 255, "bin8 is one byte");
/* The static caches' direct entries (before set-up, after exit): the 16 bytes at 255 x 8 lie
 * inside their sbins, zero (a stack empty and full), and the value is above every
 * descriptor's bin8, so a sized free's class check fails there and the slow path checks. */
#define TC_BIN8_NONE 255
_Static_assert(__builtin_offsetof(struct tcache, sbins) <= TC_BIN8_NONE * 8 &&
		       TC_BIN8_NONE * 8 + sizeof(struct tcache_bin) <=
			       __builtin_offsetof(struct tcache, sbins) + sizeof(((struct tcache *)0)->sbins),
	       "TC_BIN8_NONE reads a zeroed bin of the static caches");

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

/* Counts a call made outside the fast path (large/huge, or without an active cache). */
void tcache_count_slow(bool is_free);
static inline void tcache_count(bool is_free)
{
	struct tcache *tc = tcache_self();
	if (likely(tc->state == TC_ACTIVE)) {
		if (is_free)
			tc->free_calls++;
		else
			tc->malloc_calls++;
	} else {
		tcache_count_slow(is_free);
	}
}

/* Counts a page-run allocation (thread-local; folded in by the registry). */
static inline void tcache_count_large(void)
{
	tcache_self()->large_allocs++;
}

/* Double-free confirmation for an object whose key word matched: aborts when it is free. */
void tcache_check_double_free(void *p, struct page *head, const char *call);

/* Flushes the calling thread's caches back to the slabs (malloc_trim, thread exit). */
void tcache_flush_all(struct tcache *tc);

/* Objects per refill/flush (PCPMALLOC_FBATCH or the CPU-count default). */
unsigned tcache_fbatch(void);

/* Capacities and per-thread teardown (pthread key); once at init.  fast_stacks: the fast
 * path's stacks (the default mode); mode_stacks: the front end's (sbins, secure mode). */
void pcpm_tcache_init(bool fast_stacks, bool mode_stacks);

/* Adds every thread's counters to s (registry lock).  In a signal handler that finds the lock
 * taken: the exited threads' and this thread's counters only, without waiting. */
void tcache_stats_add(struct pcpm_stats *s);
void tcache_lock_registry(void);
void tcache_unlock_registry(void);
/* Bytes of the free objects on every live thread's stacks (by class size), a racy snapshot
 * under the registry lock (mallinfo: free memory, not live blocks); 0 in a signal handler. */
size_t tcache_cached_bytes(void);
void tcache_fork_child(void);

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
