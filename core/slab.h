/*
 * slab.h - size classes and one kmem_cache per class (mm/slub.c; kernel-pcp.md §7, §12.6).
 *
 * Classes: 16..128 bytes in 16-byte steps (every result 16-byte aligned, as glibc), then
 * eight classes per power of two up to 16 KiB, so above 128 B a request wastes at most 1/8
 * of its object; then the paged classes (20, 24, 28, 32 KiB, below).  A slab is 2^order pages
 * (order 0..3, the kernel's calculate_order; up to 4 above 8 KiB and 5 for the paged classes,
 * see paged_order) from the pcp or, above order 3, the zone, cut into equal objects on
 * demand (bump carving, so untouched objects cost no RSS), with a SLUB freelist threaded
 * through free objects.  Partial slabs sit on the cache's
 * partial list; a slab that becomes empty goes back to the pcp once min_partial slabs are
 * kept.  Objects move between a cache and the thread caches in batches (one lock hold).
 * Lock: kmem_cache.lock (the node list_lock), taken before any pcp/zone lock is ever needed
 * - slab pages are allocated and freed with it released.
 */
#ifndef PCPM_SLAB_H
#define PCPM_SLAB_H

#include "lockstat.h"
#include "pcp.h"
#include "slab_order.h"

/*
 * Layout: the fields read on every path sit on the first cache line, written once when the
 * cache is set up; the lock and everything written under it on lines of their own
 * (____cacheline_aligned_in_smp in the kernel), so the CPUs that take the lock do not
 * invalidate the line that realloc, malloc_usable_size and the refills read.
 */
struct kmem_cache {
	/* read-mostly: written by cache_setup() only */
	uint32_t size;	      /* object size, bytes */
	uint32_t objects;     /* objects per slab */
	uint32_t order;	      /* slab order (pages = 2^order) */
	uint32_t reciprocal;  /* 2^32 / size + 1: exact object index for offsets < 2^17 */
	uint32_t cls;	      /* index in pcpm_caches */
	uint32_t hidden;      /* objects of a slab never handed out nor on its freelist
			       * (SLAB_HIDE_FIRST's object 0, SLAB_FREELIST_RANDOM's two ends) */
	uint32_t lim_step;    /* size * reciprocal - 2^32, in [1, size]: see slab_fast_lim */
	/* written under lock */
	pcpm_lock_t lock PCPM_CACHELINE_ALIGNED;
	uint32_t nr_partial;  /* slabs on partial */
	uint32_t min_partial; /* partial slabs kept before empty ones are freed */
	struct list_head partial;
	_Atomic(void *) deferred; /* objects freed by signal handlers while the lock was
				   * taken (safe-linked stack); drained by the next holder */
	/* counters, under lock (nr_slabs: the slabs not frozen) */
	uint64_t nr_slabs, slab_alloc, slab_free;
	uint32_t frozen_free;	  /* objects on frozen slabs' freelists, under lock */
	_Atomic uint32_t nr_frozen; /* slabs frozen for a CPU (slab_new_frozen) */
	struct lock_stat ls; /* the lock profile: slab_lock* in the statistics */
} PCPM_CACHELINE_ALIGNED;

extern struct kmem_cache pcpm_caches[NR_SIZE_CLASSES];
/* The cache of a slab (its head or any page's descriptor: every page carries cls). */
static inline struct kmem_cache *slab_cache_of(const struct page *pg)
{
	return &pcpm_caches[pg->cls];
}

/* The cache of class cls, set up (kmem_cache_create) at its first use; thread-safe. */
struct kmem_cache *kmem_cache_of(unsigned cls);
extern uint8_t pcpm_small_class[NR_SMALL_LOOKUP];
extern uint32_t pcpm_class_size[NR_SIZE_CLASSES];

/*
 * Safe-linking of free lists (thread-cache stacks and slab freelists): the link stored in a
 * free object's first word is next ^ (address of the link) ^ pcpm_link_key, a per-process
 * random key (getrandom at init).  An overflow into a free object therefore cannot point the
 * allocator at an address of the attacker's choosing without knowing the key, and a random
 * overwrite decodes to a misaligned pointer with probability 15/16 (every object is 16-byte
 * aligned), which the decode check turns into an abort.  In the spirit of glibc's
 * PROTECT_PTR (which uses ASLR bits only); the key makes it independent of ASLR.
 */
extern uintptr_t pcpm_link_key PCPM_HIDDEN;
/*
 * The free mark: the second word of an object that is free (on a thread's stack, a slab's
 * freelist); free() of an object that carries it is checked for a double free.  A constant
 * (a sign-extended 32-bit immediate: the fast paths compare and store it without a load,
 * one instruction less per free).  It was random per process; knowing it buys an attacker
 * nothing: a word that matches only sends a free to the full check, and a freed object
 * whose mark was overwritten escapes the check whatever the mark's value.  A negative
 * number that is no pointer and no small count, so live data rarely carries it (then the
 * free is merely checked).
 */
#define PCPM_FREE_KEY ((uintptr_t)(intptr_t)(int32_t)0xa7c35e1dU)

static inline uintptr_t fl_encode(const void *pos, const void *next)
{
	return (uintptr_t)next ^ (uintptr_t)pos ^ pcpm_link_key;
}

/* Aborts with "pcpmalloc: CALL(): corrupted free list at POS" (a free object was written). */
void pcpm_freelist_corrupt(const char *call, const void *pos) __attribute__((noreturn, cold));

/* Decodes the link stored at pos; aborts when the result is not 16-byte aligned. */
static inline void *fl_decode(const void *pos, const char *call)
{
	uintptr_t next = *(const uintptr_t *)pos ^ (uintptr_t)pos ^ pcpm_link_key;
	if (unlikely(next & 15))
		pcpm_freelist_corrupt(call, pos);
	return (void *)next;
}

static inline void fl_store(void *pos, const void *next)
{
	*(uintptr_t *)pos = fl_encode(pos, next);
}

/* Size class of a request of n bytes (n <= SLAB_MAX_SIZE). */
static inline unsigned size_to_class(size_t n)
{
	if (likely(n <= SMALL_LOOKUP_MAX))
		return pcpm_small_class[(n + 15) >> 4];
	unsigned k = 63 - (unsigned)__builtin_clzl(n - 1); /* 2^k < n <= 2^(k+1) */
	return 8 + (k - 7) * 8 + (unsigned)((n - 1 - (1UL << k)) >> (k - 3));
}

/* Flags of every kmem_cache (the kernel's SLAB_* cache flags), chosen by the mode at init:
 * SLAB_FREELIST_RANDOM carves a slab whole at once, its objects in random order, poisoned
 * (secure mode); SLAB_HIDE_FIRST never hands out object 0 and keeps frees off the fast path
 * (memcheck mode: a descriptor pointing at object 0 would make a leak look reachable). */
#define SLAB_FREELIST_RANDOM 0x1u
#define SLAB_HIDE_FIRST 0x2u
void pcpm_slab_init(unsigned flags);

/*
 * Takes at least min and at most max objects of class cls into objs[] (fewer than min only
 * when memory is exhausted: 0 then) and returns how many; each is marked free (its second
 * word PCPM_FREE_KEY, the mark the double-free check reads).  Whole slab freelists are
 * detached under the kmem_cache lock (SLUB's get_freelist) and walked, like never-used
 * objects, after it is dropped: no free object's memory is touched under the lock.
 * owner: the CPU slot + 1 whose sheaves take the objects, recorded in each slab taken from
 * (slab_owner: frees on other CPUs send the objects there); 0 leaves it as it is.
 */
unsigned slab_alloc_bulk(unsigned cls, unsigned min, unsigned max, void **objs, uint32_t owner);

/*
 * Gives back the n objects of class cls in objs[] (each carrying the free mark; the array
 * is read, not kept).  They are linked into one chain per slab before the kmem_cache lock
 * is taken (the kernel's build_detached_freelist); under it each chain is spliced onto its
 * slab's freelist.  Empty slabs beyond min_partial go back to the pcp.  Aborts on an object
 * that is not one of the class's (a corrupted cache).
 */
void slab_free_bulk(unsigned cls, void *const *objs, unsigned n);

/*
 * The free fast path's object check (free_fast.h), Lemire's divisibility test on the product
 * the index takes: for an offset soff < 2^17 from the slab's start, soff * reciprocal =
 * idx * 2^32 + low, where low (the product's low 32 bits) is idx * lim_step when soff is
 * idx objects exactly and at least reciprocal otherwise (reciprocal > lim_step * objects
 * for every class: test_slab checks every class and offset).  So one compare,
 * low < carved * lim_step, says "the start of one of the carved objects", and a bound of 0
 * says "no object here" (pages that are no slab's).  The bound of a slab with carved objects.
 */
static inline uint32_t slab_fast_lim(const struct kmem_cache *s, unsigned carved)
{
	return carved * s->lim_step;
}

/*
 * Object index of p in its slab, or -1 when p is not the start of an object.  head is
 * the slab's head descriptor.
 */
static inline long slab_obj_index(struct page *head, const void *p)
{
	size_t off = (size_t)((const char *)p - head->addr);
	size_t idx = (off * head->reciprocal) >> 32;
	/* carved is read without the cache lock (it only grows while the slab lives, and p's
	 * index is below it once p was handed out): relaxed atomics, plain moves on x86, so
	 * TSan sees no race whichever caller this is inlined into (realloc, free, usable) */
	if (unlikely(idx * pcpm_class_size[head->cls] != off ||
		     idx >= __atomic_load_n(&head->carved, __ATOMIC_RELAXED)))
		return -1;
	return (long)idx;
}

/*
 * Signal-handler variants (kernel-pcp.md §12.2 "Re-entrancy"): trylock only.
 * slab_alloc_nested: one object of class cls from a partial slab (no new slab), NULL when
 * the lock is taken or no partial slab has room.  slab_free_nested: back to its slab, or
 * onto the cache's lock-free deferred list when the lock is taken.  Neither calls the pcp.
 */
void *slab_alloc_nested(unsigned cls);
void slab_free_nested(void *o, struct page *head);

/*
 * Frozen slabs (SLUB's CPU slab, kmem_cache_cpu): new slabs one CPU carves with no kmem_cache
 * lock (slab_cpu.c).  slab_new_frozen: up to n (<= 8) new slabs of class cls into pg[], how
 * many (0: out of memory, or a mode whose slabs are carved differently, slab_flags); taken
 * from the pcp (above order 3 from the zone in one hold), on no list, every object counted
 * in use and none carved, slab_owner set to owner.  slab_frozen_carve: up to n objects of
 * the frozen slab pg's uncarved tail into objs[], each marked free (PCPM_FREE_KEY), the
 * free fast path's bound raised to them; how many.  A free that reaches a frozen slab goes
 * onto its freelist and never lists it.  slab_unfreeze: the frozen slabs of the chain first
 * (linked through lru.next) back to the cache in one lock hold (deactivate_slab): the
 * uncarved tail is the slab's again, and each goes on the partial list, or back to the
 * pcp when every object came back, or on no list when full.  The owner alone calls the
 * three for a slab (its sheaf lock serializes them); no kmem_cache lock held.
 */
unsigned slab_new_frozen(unsigned cls, unsigned n, struct page **pg, uint32_t owner);
unsigned slab_frozen_carve(unsigned cls, struct page *pg, unsigned n, void **objs);
void slab_unfreeze(unsigned cls, struct page *first);

/* Is p on its slab's freelist?  (double-free confirmation; takes the cache lock) */
bool slab_object_is_free(struct page *head, const void *p);

/* Frees every empty slab of every cache (malloc_trim). Returns pages given back. */
size_t slab_shrink_all(void);

/* Bytes of the objects handed out (by their class size; objects in thread caches count as
 * handed out here) and bytes of the slabs holding them.  Takes each cache's lock in turn
 * (mallinfo); nowait (a signal handler): trylocks, a cache it cannot lock counts whole. */
void slab_usage(bool nowait, size_t *live_bytes, size_t *slab_bytes);
void slab_stats_add(struct pcpm_stats *s);
void slab_lock_all(void);
void slab_unlock_all(void);
void slab_reset_locks(void);

#endif
