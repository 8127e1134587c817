/*
 * tcache_registry.h - the thread caches themselves (struct tcache: per size class a stack of
 * free objects, an array of pointers; tcache.h has the operations on them) and which of them
 * exist: the calling thread's cache pointer, the registry of live caches and the caches of
 * exited threads kept for reuse, their counters, the double-free walk of other threads'
 * stacks and the fork child's reset (tcache_registry.c).  Thread-safety: a thread touches
 * only its own cache; the registry is under its own lock (registry lock), which stats
 * readers, the double-free walk and fork take.
 */
#ifndef PCPM_TCACHE_REGISTRY_H
#define PCPM_TCACHE_REGISTRY_H

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

/* Live caches (registry lock; read racily: tcache.c's stacks grow while there is one). */
extern unsigned pcpm_tcache_live;
/* Bytes of capacity the live caches' stacks grew by, all threads together (atomic: tcache.c
 * adds and takes on its slow paths; a thread's at its exit; the forking thread's in a fork
 * child).  tcache.c bounds it, so idle live threads cannot keep the growth of every one. */
extern size_t pcpm_tcache_grown;

/* The registry (registry lock, taken inside).  reuse: a cache an exited thread left, NULL
 * when there is none (its contents as the thread left them); add: tc becomes live (set-up);
 * retire: tc leaves the registry at thread exit (its counters folded into the exited
 * threads'), the calling thread gets the static dead cache and tc is kept for reuse. */
struct tcache *tcache_registry_reuse(void);
void tcache_registry_add(struct tcache *tc);
void tcache_registry_retire(struct tcache *tc);

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
/* A free counted by tcache_count_slow that turned out not to be a call (tcache_release). */
void tcache_uncount_slow_free(void);

/* Double-free confirmation for an object whose key word matched: aborts when it is free. */
void tcache_check_double_free(void *p, struct page *head, const char *call);

/* Adds every thread's counters to s (registry lock).  In a signal handler that finds the lock
 * taken: the exited threads' and this thread's counters only, without waiting. */
void tcache_stats_add(struct pcpm_stats *s);
void tcache_lock_registry(void);
void tcache_unlock_registry(void);
/* Bytes of the free objects on every live thread's stacks (by class size), a racy snapshot
 * under the registry lock (mallinfo: free memory, not live blocks); 0 in a signal handler. */
size_t tcache_cached_bytes(void);
void tcache_fork_child(void);

#endif
