/*
 * slab.c - kmem_caches (see slab.h).  Mirrors SLUB: calculate_order, set_min_partial,
 * partial lists, empty-slab discard; the batch refill/flush replaces the per-CPU sheaves
 * (kernel-pcp.md §7.2, §12.6) because pcpmalloc's sheaf is the per-thread cache.
 * Calls the pcp (slab pages of order 0..3) and, above order 3, the zone through it; called by
 * tcache and the front ends.
 */
#include "slab.h"
#include "topology.h"
#include "vg.h"

#include <string.h>

struct kmem_cache pcpm_caches[NR_SIZE_CLASSES];
uint8_t pcpm_small_class[NR_SMALL_LOOKUP] PCPM_HOT;
uint32_t pcpm_class_size[NR_SIZE_CLASSES] PCPM_HOT;
uintptr_t pcpm_link_key PCPM_HOT;

void pcpm_freelist_corrupt(const char *call, const void *pos)
{
	pcpm_fatal("%s(): corrupted free list at %p", call, pos);
}

/* Slow-path decode of a slab freelist link: next must be NULL or an object of the same slab. */
static void *slab_fl_next(struct kmem_cache *s, struct page *pg, const void *o)
{
	char *next = fl_decode(o, "malloc");
	if (next && (next < pg->addr || next >= pg->addr + (size_t)s->objects * s->size ||
		     (size_t)(next - pg->addr) % s->size))
		pcpm_freelist_corrupt("malloc", o);
	return next;
}

/* Bytes of partial slabs a cache keeps before it frees empty ones (see min_partial). */
#define MIN_PARTIAL_BYTES (64UL << 10)
/* Secure mode's (SLAB_FREELIST_RANDOM; 8 slabs at most): a new slab costs a whole carving - a
 * shuffle, every object's link and mark, new pages - so emptied slabs stay (issue 24, 8th round). */
#define SECURE_MIN_PARTIAL_BYTES (256UL << 10)

/* SLAB_* flags of every cache, set once at init. */
static unsigned slab_flags PCPM_HOT;

void pcpm_slab_init(unsigned flags)
{
	slab_flags = flags;
	pcpm_link_key = (uintptr_t)pcpm_random64();
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
		pcpm_class_size[c] = slab_class_size(c);
	for (unsigned i = 0; i < NR_SMALL_LOOKUP; i++)
		pcpm_small_class[i] = (uint8_t)size_to_class_slow(i * 16);
}

static uint64_t slab_random(void)
{
	static _Atomic uint64_t ctr;
	static uint64_t seed;
	if (unlikely(!seed))
		seed = pcpm_random64();
	uint64_t z = seed + atomic_fetch_add_explicit(&ctr, 0x9e3779b97f4a7c15ULL, memory_order_relaxed);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* CONFIG_SLAB_FREELIST_RANDOM with init_on_free: a new slab's freelist in random order,
 * every object zeroed and marked free (secure mode's free state: zero but for the link and
 * the free mark).  With 3 objects or more the first and the last are never handed out: every
 * object handed out has neighbours in the slab whose marks secure mode's free checks (an
 * underflow or overflow across the slab's ends would land in other memory).  Cache lock
 * held. */
static PCPM_NOINLINE PCPM_COLD void slab_carve_random(struct page *head, uint32_t size, uint32_t objects)
{
	uint16_t order[(PAGE_SIZE << PAGE_ALLOC_COSTLY_ORDER) / 16];
	uint32_t first = objects >= 3, n = objects - 2 * first;
	for (uint32_t i = 0; i < n; i++)
		order[i] = (uint16_t)(first + i);
	/* Fisher-Yates from one slab_random() seed per slab (one atomic, not one per object),
	 * stepped with xorshift64*; j in [0, i] by multiply-shift rather than a division */
	uint64_t x = slab_random() | 1;
	for (uint32_t i = n - 1; i > 0; i--) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		uint32_t r = (uint32_t)((x * 0x2545f4914f6cdd1dULL) >> 32);
		uint32_t j = (uint32_t)(((uint64_t)r * (i + 1)) >> 32);
		uint16_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	if (head->flags & PG_DIRTY) /* pages never written since committed or purged: zero */
		memset(head->addr, 0, (size_t)size * objects);
	if (first) { /* the two kept back: marked free */
		((uintptr_t *)head->addr)[1] = PCPM_FREE_KEY;
		((uintptr_t *)(head->addr + (size_t)(objects - 1) * size))[1] = PCPM_FREE_KEY;
	}
	void *next = NULL;
	for (uint32_t i = 0; i < n; i++) {
		char *o = head->addr + (size_t)order[i] * size;
		fl_store(o, next);
		((uintptr_t *)o)[1] = PCPM_FREE_KEY;
		next = o;
	}
	head->freelist = next;
	__atomic_store_n(&head->carved, (uint16_t)objects, __ATOMIC_RELAXED);
}

/* kmem_cache_create() of class cls, at its first use: a short process that uses three
 * classes writes three caches, not 64 (8 KiB, two page faults). */
static PCPM_COLD struct kmem_cache *cache_setup(struct kmem_cache *s)
{
	unsigned c = (unsigned)(s - pcpm_caches);
	pcpm_lock(&s->lock);
	if (!s->size) {
		uint32_t size = pcpm_class_size[c];
		s->cls = c;
		s->order = calculate_order(size);
		s->objects = (uint32_t)((PAGE_SIZE << s->order) / size);
		s->reciprocal = (uint32_t)((1ULL << 32) / size + 1);
		s->lim_step = (uint32_t)((uint64_t)size * s->reciprocal - (1ULL << 32));
		if (slab_flags & SLAB_FREELIST_RANDOM)
			s->hidden = s->objects >= 3 ? 2 : 0; /* see slab_carve_random */
		else if (slab_flags & SLAB_HIDE_FIRST)
			s->hidden = s->objects > 1; /* see slab_init */
		/* set_min_partial(): ilog2(size) / 2 clamped to [5, 10]; here also at most
		 * MIN_PARTIAL_BYTES of slabs (at least 2): the kernel's 6 or 7 slabs of 32 KiB per
		 * cache are nothing in a machine's memory but 0.4 MiB of empty slabs per class
		 * above 8 KiB in a process (xthread-large: up to 1 MiB over its nine classes). */
		unsigned m = (unsigned)(31 - __builtin_clz(size)) / 2;
		s->min_partial = m < 5 ? 5 : m > 10 ? 10 : m;
		s->min_partial = MAX(s->order > PAGE_ALLOC_COSTLY_ORDER ? 1u : 2u,
				     MIN(s->min_partial, MIN_PARTIAL_BYTES / (PAGE_SIZE << s->order)));
		if (slab_flags & SLAB_FREELIST_RANDOM) /* see SECURE_MIN_PARTIAL_BYTES */
			s->min_partial = MAX(s->min_partial,
					     MIN(8u, SECURE_MIN_PARTIAL_BYTES / (PAGE_SIZE << s->order)));
		list_init(&s->partial);
		__atomic_store_n(&s->size, size, __ATOMIC_RELEASE);
	}
	pcpm_unlock(&s->lock);
	return s;
}

struct kmem_cache *kmem_cache_of(unsigned cls)
{
	struct kmem_cache *s = &pcpm_caches[cls];
	return likely(__atomic_load_n(&s->size, __ATOMIC_ACQUIRE)) ? s : cache_setup(s);
}

static void __slab_free_deferred(struct kmem_cache *s);

/* Takes the cache lock; frees what signal handlers deferred meanwhile (slab_free_nested). */
static inline void cache_unlock(struct kmem_cache *s)
{
	lockstat_unlock(&s->lock, &s->ls);
}

static inline void cache_lock(struct kmem_cache *s)
{
	lockstat_lock(&s->lock, &s->ls);
	if (unlikely(atomic_load_explicit(&s->deferred, memory_order_relaxed)))
		__slab_free_deferred(s);
}

/* A new slab from the pcp, every page pointing at the head; NULL when out of memory. */
/* The block pg of 2^s->order pages made a slab of s, every page pointing at the head. */
static void slab_init(struct kmem_cache *s, struct page *pg)
{
	unsigned n = 1u << s->order;
	for (unsigned i = 0; i < n; i++) {
		pg[i].slab_head = pg;
		pg[i].cls = (uint8_t)s->cls;
		pg[i].arena = pg->arena;
	}
	char *addr = page_address(pg);
	/* the head's copy for the slow paths (they all go through slab_head); the free fast
	 * path reads every page's fast descriptor instead */
	pg->addr = addr;
	pg->reciprocal = s->reciprocal;
	pg->bin8 = (uint8_t)(s->cls * 2);
	struct page_fast *fp = page_fast(pg);
	for (unsigned i = 0; i < n; i++) { /* what the free fast path reads, on every page */
		fp[i] = (struct page_fast){ .addr_lo = (uint32_t)(uintptr_t)addr,
					    .reciprocal = s->reciprocal,
					    .bin8 = (uint8_t)(s->cls * 2),
					    .cls = (uint8_t)s->cls };
	}
	pg->freelist = NULL;
	pg->inuse = 0;
	/* memcheck mode: the descriptor's addr points at object 0, which would make a leaked
	 * object 0 look reachable; it is never handed out */
	__atomic_store_n(&pg->carved,
			 (uint16_t)((slab_flags & SLAB_HIDE_FIRST) && s->objects > 1), __ATOMIC_RELAXED);
	pg->order = (uint8_t)s->order;
	if (unlikely(slab_flags & SLAB_FREELIST_RANDOM))
		slab_carve_random(pg, s->size, s->objects);
	for (unsigned i = 0; i < n; i++)
		pg[i].state = PG_SLAB;
	/* a slab carved whole at once: its frees take the fast path's checks too, then the
	 * front end's stack (memcheck mode keeps 0: every free goes to its front end) */
	if (unlikely(slab_flags & SLAB_FREELIST_RANDOM))
		for (unsigned i = 0; i < n; i++)
			fp[i].fast_lim = slab_fast_lim(s, s->objects);
}

/*
 * Up to need (<= NEW_SLABS_MAX) new slabs into fresh[], how many (0: out of memory).  Orders
 * 0..3 one by one from the pcp; above (8-32 KiB classes, orders 4-5), which the pcps do not
 * hold, all in one zone lock hold (pcp_alloc_bulk: alloc_pages_bulk).  No cache lock held.
 */
static unsigned new_slabs(struct kmem_cache *s, unsigned need, struct page **fresh)
{
	unsigned nf = 0;
	if (s->order > PAGE_ALLOC_COSTLY_ORDER)
		nf = (unsigned)MAX(pcp_alloc_bulk(s->order, (int)need, fresh), 0);
	else
		while (nf < need && (fresh[nf] = pcp_alloc(s->order)) != NULL)
			nf++;
	for (unsigned i = 0; i < nf; i++)
		slab_init(s, fresh[i]);
	return nf;
}

#define NEW_SLABS_MAX 8 /* slabs one call may add in one lock hold */

/* nr_partial is read without the lock (slab_alloc_bulk's guess); written under it. */
static inline void partial_count(struct kmem_cache *s, int delta)
{
	__atomic_store_n(&s->nr_partial, s->nr_partial + (uint32_t)delta, __ATOMIC_RELAXED);
}

/* New slabs fresh[0..n) onto the cache's partial list.  Cache lock held. */
static void __cache_add(struct kmem_cache *s, struct page **fresh, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		s->nr_slabs++;
		s->slab_alloc++;
		list_add_tail(&fresh[i]->lru, &s->partial);
	}
	partial_count(s, (int)n);
}

/*
 * need new slabs (at most NEW_SLABS_MAX) onto the cache's partial list: made with the lock
 * dropped (into fresh[], room the caller lends: slab_alloc_bulk's objs[], free until its
 * objects are written, so that no array of them is on the stack of a first allocation, which
 * may be a PTHREAD_STACK_MIN thread's), listed in one hold; how many (0: out of memory).
 * Cache lock held on entry and exit.
 */
static unsigned __cache_grow(struct kmem_cache *s, unsigned need, struct page **fresh)
{
	cache_unlock(s);
	unsigned nf = new_slabs(s, MIN(need, NEW_SLABS_MAX), fresh);
	cache_lock(s);
	__cache_add(s, fresh, nf);
	return nf;
}

/* The empty slabs pg[0..n) back to the pcp, or (orders 4-5) to the zone in one hold. */
static void discard_slabs(struct kmem_cache *s, struct page **pg, unsigned n)
{
	unsigned pages = 1u << s->order;
	for (unsigned k = 0; k < n; k++) {
		struct page_fast *fp = page_fast(pg[k]);
		for (unsigned i = 0; i < pages; i++)
			fp[i].fast_lim = 0;
		for (unsigned i = 1; i < pages; i++)
			pg[k][i].state = PG_NONE;
		pg[k]->state = PG_NONE;
		if (s->order <= PAGE_ALLOC_COSTLY_ORDER)
			pcp_free(pg[k], s->order);
	}
	if (n && s->order > PAGE_ALLOC_COSTLY_ORDER)
		pcp_free_bulk(s->order, (int)n, pg);
}

static inline bool slab_has_free(struct kmem_cache *s, struct page *pg)
{
	return pg->freelist || pg->carved < s->objects;
}

/* Objects were carved from slab pg: every page's fast_lim follows carved, so frees of the
 * objects handed out so far take the fast path (pcpm_free_call), which checks the object
 * against fast_lim of the object's page alone (slab_fast_lim).  Cache lock held.  Memcheck mode keeps 0:
 * its frees take the checked slow path (secure mode's slabs are carved whole in slab_init). */
static void slab_carved(struct kmem_cache *s, struct page *pg)
{
	if (unlikely(slab_flags))
		return;
	struct page_fast *fp = page_fast(pg);
	for (unsigned i = 0; i < 1u << s->order; i++)
		fp[i].fast_lim = slab_fast_lim(s, pg->carved);
}

/* (few: the array is on the stack of a thread's first allocation, which may be a
 * PTHREAD_STACK_MIN thread's: discovery_thread allows glibc's use + 1 KiB) */
#define CARVE_RANGES 4 /* runs of never-used objects one call may carve */
#define FREELISTS 4    /* slab freelists one call may detach whole */

/* Objects on pg's freelist: those carved, less those handed out and those never handed out
 * (object 0 in memcheck mode, the two ends of a randomly carved slab: s->hidden). */
static inline unsigned slab_nr_free(struct kmem_cache *s, struct page *pg)
{
	return (unsigned)pg->carved - pg->inuse - s->hidden;
}

/*
 * Under the lock, whole freelists are detached (get_freelist: the slab keeps none, its
 * inuse counts them as handed out) and never-used objects only counted out of their slab
 * (carved advances); both are walked into objs[] after the unlock, so neither a free
 * object's link nor the first touch of new memory - a page fault per page - happens under
 * the kmem_cache lock.  Only a freelist longer than the room left is cut under the lock.
 * New slabs for what is still missing come with the lock dropped and go onto the partial
 * list in one hold.  Carving stops at min (new memory is touched only for what is asked
 * for); freelists are taken up to max.
 */
unsigned slab_alloc_bulk(unsigned cls, unsigned min, unsigned max, void **objs, uint32_t owner)
{
	struct kmem_cache *s = kmem_cache_of(cls);
	struct {
		char *addr;	 /* a carved run, or a detached freelist's first object */
		uint16_t n, at;	 /* objects, and where they go in objs */
		bool list;	 /* a detached freelist */
	} run[CARVE_RANGES + FREELISTS];
	unsigned got = 0, nrun = 0, ncarve = 0;
	/* fewer partial slabs a moment ago than the request would fill (a heap growing): new
	 * slabs are made before the lock is taken, not with it dropped and taken again (one
	 * kmem_cache hold per refill, not two); what is left of them waits on the partial
	 * list, used first by the next refill */
	/* (objs[] holds them until they are listed: need <= min <= max entries) */
	struct page **fresh = (struct page **)objs;
	unsigned nfresh = 0;
	unsigned need = MIN((min + s->objects - 1) / s->objects, NEW_SLABS_MAX);
	if (__atomic_load_n(&s->nr_partial, __ATOMIC_RELAXED) < need)
		nfresh = new_slabs(s, need, fresh);
	cache_lock(s);
	__cache_add(s, fresh, nfresh);
	while (got < min) {
		if (list_empty(&s->partial) &&
		    !__cache_grow(s, (min - got + s->objects - 1) / s->objects,
				  (struct page **)&objs[got]))
			break;
		struct page *pg = (struct page *)s->partial.next;
		unsigned f = pg->freelist ? slab_nr_free(s, pg) : 0;
		if (owner)
			__atomic_store_n(&pg->slab_owner, owner, __ATOMIC_RELAXED);
		if (f && f <= max - got && nrun - ncarve < FREELISTS) {
			run[nrun++] = (typeof(run[0])){ pg->freelist, (uint16_t)f, (uint16_t)got, true };
			pg->freelist = NULL;
			pg->inuse += f;
			got += f;
		}
		while (got < max && pg->freelist) { /* the rest of a list too long to take */
			void *o = pg->freelist;
			vg_open_obj(o);
			pg->freelist = slab_fl_next(s, pg, o);
			objs[got++] = o;
			pg->inuse++;
		}
		if (got < min && pg->carved < s->objects) {
			if (ncarve == CARVE_RANGES)
				break; /* (not with today's sizes: a call takes <= 128 objects) */
			unsigned k = MIN(min - got, s->objects - pg->carved);
			run[nrun++] = (typeof(run[0])){ pg->addr + (size_t)pg->carved * s->size,
						       (uint16_t)k, (uint16_t)got, false };
			ncarve++;
			__atomic_store_n(&pg->carved, (uint16_t)(pg->carved + k), __ATOMIC_RELAXED);
			pg->inuse += k;
			got += k;
			slab_carved(s, pg);
		}
		if (!slab_has_free(s, pg)) {
			list_del(&pg->lru);
			partial_count(s, -1);
		}
	}
	cache_unlock(s);
	for (unsigned r = 0; r < nrun; r++) {
		void **dst = &objs[run[r].at];
		if (run[r].list) { /* a detached freelist: exactly n objects, NULL-terminated */
			void *o = run[r].addr;
			struct page *pg = pcpm_page_of(o)->slab_head;
			for (unsigned j = 0; j < run[r].n; j++) {
				if (unlikely(!o))
					pcpm_freelist_corrupt("malloc", dst[j - 1]);
				vg_open_obj(o);
				dst[j] = o;
				o = slab_fl_next(s, pg, o);
			}
			if (unlikely(o))
				pcpm_freelist_corrupt("malloc", dst[run[r].n - 1]);
		} else {
			for (unsigned j = 0; j < run[r].n; j++) {
				dst[j] = run[r].addr + (size_t)j * s->size;
				vg_open_obj(dst[j]);
			}
		}
	}
	for (unsigned i = 0; i < got; i++)
		((uintptr_t *)objs[i])[1] = PCPM_FREE_KEY;
	return got;
}

unsigned slab_new_frozen(unsigned cls, unsigned n, struct page **pg, uint32_t owner)
{
	struct kmem_cache *s = kmem_cache_of(cls);
	if (unlikely(slab_flags))
		return 0;
	unsigned nf = new_slabs(s, MIN(n, NEW_SLABS_MAX), pg);
	for (unsigned i = 0; i < nf; i++) {
		pg[i]->inuse = (uint16_t)s->objects;
		pg[i]->flags |= PG_FROZEN;
		__atomic_store_n(&pg[i]->slab_owner, owner, __ATOMIC_RELAXED);
	}
	atomic_fetch_add_explicit(&s->nr_frozen, nf, memory_order_relaxed);
	return nf;
}

unsigned slab_frozen_carve(unsigned cls, struct page *pg, unsigned n, void **objs)
{
	struct kmem_cache *s = &pcpm_caches[cls];
	unsigned k = MIN(n, s->objects - pg->carved);
	char *o = pg->addr + (size_t)pg->carved * s->size;
	for (unsigned j = 0; j < k; j++, o += s->size) {
		((uintptr_t *)o)[1] = PCPM_FREE_KEY;
		objs[j] = o;
	}
	__atomic_store_n(&pg->carved, (uint16_t)(pg->carved + k), __ATOMIC_RELAXED);
	slab_carved(s, pg);
	return k;
}

void slab_unfreeze(unsigned cls, struct page *first)
{
	struct kmem_cache *s = &pcpm_caches[cls];
	struct page *empty = NULL;
	unsigned n = 0;
	cache_lock(s);
	for (struct page *pg = first, *next; pg; pg = next, n++) {
		next = (struct page *)pg->lru.next;
		s->frozen_free -= s->objects - pg->inuse;
		pg->inuse = (uint16_t)(pg->inuse - (s->objects - pg->carved));
		pg->flags &= (uint8_t)~PG_FROZEN;
		s->nr_slabs++;
		s->slab_alloc++;
		if (pg->inuse == 0 && s->nr_partial >= s->min_partial) {
			s->nr_slabs--;
			s->slab_free++;
			pg->lru.next = (struct list_head *)empty;
			empty = pg;
		} else if (slab_has_free(s, pg)) {
			list_add_tail(&pg->lru, &s->partial);
			partial_count(s, 1);
		}
	}
	atomic_fetch_sub_explicit(&s->nr_frozen, n, memory_order_relaxed);
	cache_unlock(s);
	for (struct page *pg = empty, *next; pg; pg = next) {
		next = (struct page *)pg->lru.next;
		discard_slabs(s, &pg, 1);
	}
}

/* Puts the chain first..last (n objects of slab pg, linked first to last, last's link
 * unset) on pg's freelist.  Cache lock held.  Returns the slab when it became empty and
 * should go back to the pcp (the caller discards it after unlocking). */
static struct page *__slab_free_chain(struct kmem_cache *s, struct page *pg, void *first,
				      void *last, unsigned n)
{
	bool was_full = !slab_has_free(s, pg);
	fl_store(last, pg->freelist);
	vg_close_obj(last);
	pg->freelist = first;
	/* (relaxed atomics: a frozen slab's owner reads inuse without the lock) */
	__atomic_store_n(&pg->inuse, (uint16_t)(pg->inuse - n), __ATOMIC_RELAXED);
	if (pg->flags & PG_FROZEN) { /* a CPU's slab: its owner lists it when it unfreezes it */
		s->frozen_free += n;
		return NULL;
	}
	if (was_full) {
		list_add_tail(&pg->lru, &s->partial);
		partial_count(s, 1);
	}
	if (pg->inuse == 0 && s->nr_partial > s->min_partial) {
		list_del(&pg->lru);
		partial_count(s, -1);
		s->nr_slabs--;
		s->slab_free++;
		return pg;
	}
	return NULL;
}

static inline struct page *__slab_free_one(struct kmem_cache *s, void *o, struct page *pg)
{
	return __slab_free_chain(s, pg, o, o, 1);
}

/* Objects freed by signal handlers while the lock was taken: put them back (empty slabs
 * stay on the partial list; the next free or malloc_trim discards them). */
static void __slab_free_deferred(struct kmem_cache *s)
{
	void *o = atomic_exchange_explicit(&s->deferred, NULL, memory_order_acquire);
	while (o) {
		void *next = fl_decode(o, "free");
		struct page *pg = pcpm_page_of(o)->slab_head;
		uint32_t min = s->min_partial;
		s->min_partial = UINT32_MAX; /* keep empty slabs: no pcp call under the lock */
		__slab_free_one(s, o, pg);
		s->min_partial = min;
		o = next;
	}
}

void *slab_alloc_nested(unsigned cls)
{
	struct kmem_cache *s = &pcpm_caches[cls];
	/* (not set up yet: it has no slab to take from, and setting it up would wait) */
	if (!__atomic_load_n(&s->size, __ATOMIC_ACQUIRE) || !lockstat_trylock(&s->lock, &s->ls))
		return NULL;
	if (unlikely(atomic_load_explicit(&s->deferred, memory_order_relaxed)))
		__slab_free_deferred(s);
	void *o = NULL;
	if (!list_empty(&s->partial)) {
		struct page *pg = (struct page *)s->partial.next;
		if (pg->freelist) {
			o = pg->freelist;
			vg_open_obj(o);
			pg->freelist = slab_fl_next(s, pg, o);
		} else if (pg->carved < s->objects) {
			o = pg->addr + (size_t)pg->carved * s->size;
			__atomic_store_n(&pg->carved, (uint16_t)(pg->carved + 1), __ATOMIC_RELAXED);
			vg_open_obj(o);
			slab_carved(s, pg);
		}
		if (o) {
			pg->inuse++;
			if (!slab_has_free(s, pg)) {
				list_del(&pg->lru);
				partial_count(s, -1);
			}
		}
	}
	cache_unlock(s);
	if (o)
		((uintptr_t *)o)[1] = 0;
	return o;
}

void slab_free_nested(void *o, struct page *head)
{
	struct kmem_cache *s = slab_cache_of(head);
	if (lockstat_trylock(&s->lock, &s->ls)) {
		uint32_t min = s->min_partial;
		s->min_partial = UINT32_MAX; /* no pcp call from a signal handler */
		__slab_free_one(s, o, head);
		s->min_partial = min;
		cache_unlock(s);
		return;
	}
	/* the lock holder may be the thread this handler interrupted: defer (Treiber push) */
	void *h = atomic_load_explicit(&s->deferred, memory_order_relaxed);
	do
		fl_store(o, h);
	while (!atomic_compare_exchange_weak_explicit(&s->deferred, &h, o, memory_order_release,
						      memory_order_relaxed));
}

/* One slab's objects of a slab_free_bulk call, linked before the lock is taken. */
struct detached {
	struct page *pg;
	void *first, *last;
	unsigned n;
};

/* Splices the chains onto their slabs in one lock hold, then discards the slabs that became
 * empty (at most one per chain). */
static void free_detached(struct kmem_cache *s, struct detached *d, unsigned nd)
{
	struct page *empty[FREELISTS];
	unsigned nempty = 0;
	cache_lock(s);
	for (unsigned i = 0; i < nd; i++) {
		struct page *e = __slab_free_chain(s, d[i].pg, d[i].first, d[i].last, d[i].n);
		if (e)
			empty[nempty++] = e;
	}
	cache_unlock(s);
	discard_slabs(s, empty, nempty);
}

void slab_free_bulk(unsigned cls, void *const *objs, unsigned n)
{
	struct kmem_cache *s = &pcpm_caches[cls];
	struct detached d[FREELISTS];
	unsigned nd = 0;
	for (unsigned i = 0; i < n; i++) {
		void *o = objs[i];
		struct page *pg = pcpm_page_of(o);
		if (unlikely(!pg || pg->state != PG_SLAB || pg->cls != cls))
			pcpm_freelist_corrupt("free", o);
		pg = pg->slab_head;
		unsigned k = 0;
		while (k < nd && d[k].pg != pg)
			k++;
		if (k == FREELISTS) { /* more slabs than chains: these go first */
			free_detached(s, d, nd);
			nd = k = 0;
		}
		if (k == nd) {
			d[nd++] = (struct detached){ pg, o, o, 1 };
			continue;
		}
		fl_store(o, d[k].first);
		vg_close_obj(o);
		d[k].first = o;
		d[k].n++;
	}
	if (nd)
		free_detached(s, d, nd);
}

bool slab_object_is_free(struct page *head, const void *p)
{
	struct kmem_cache *s = slab_cache_of(head);
	bool found = false;
	cache_lock(s);
	unsigned limit = s->objects;
	for (void *o = head->freelist; o && limit; limit--) {
		if (o == p) {
			found = true;
			break;
		}
		vg_open_obj(o);
		void *next = slab_fl_next(s, head, o);
		vg_close_obj(o);
		o = next;
	}
	cache_unlock(s);
	return found;
}

size_t slab_shrink_all(void)
{
	size_t pages = 0;
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		struct kmem_cache *s = &pcpm_caches[c];
		if (!__atomic_load_n(&s->size, __ATOMIC_ACQUIRE))
			continue; /* never used: no slabs */
		for (;;) {
			struct page *victim = NULL;
			cache_lock(s);
			for (struct list_head *e = s->partial.next; e != &s->partial; e = e->next) {
				struct page *pg = (struct page *)e;
				if (pg->inuse == 0) {
					victim = pg;
					list_del(&pg->lru);
					partial_count(s, -1);
					s->nr_slabs--;
					s->slab_free++;
					break;
				}
			}
			cache_unlock(s);
			if (!victim)
				break;
			discard_slabs(s, &victim, 1);
			pages += 1u << s->order;
		}
	}
	return pages;
}

void slab_usage(bool nowait, size_t *live_bytes, size_t *slab_bytes)
{
	size_t live = 0, slabs = 0;
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		struct kmem_cache *s = &pcpm_caches[c];
		if (!__atomic_load_n(&s->size, __ATOMIC_ACQUIRE))
			continue; /* never set up */
		size_t bytes = (size_t)(s->nr_slabs + atomic_load_explicit(&s->nr_frozen,
									   memory_order_relaxed))
			       << (s->order + PAGE_SHIFT);
		/* a signal handler waits for no lock: a cache it cannot lock counts whole */
		if (nowait ? !pcpm_trylock(&s->lock) : (pcpm_lock(&s->lock), false)) {
			live += bytes;
			slabs += bytes;
			continue;
		}
		/* full slabs are on no list: every object of theirs is handed out; a frozen
		 * slab's are, but those freed back to it (its uncarved tail: sheaf_cached_bytes) */
		uint32_t frozen = atomic_load_explicit(&s->nr_frozen, memory_order_relaxed);
		uint64_t objs = (s->nr_slabs - s->nr_partial + frozen) * s->objects - s->frozen_free;
		for (struct list_head *e = s->partial.next; e != &s->partial; e = e->next)
			objs += ((struct page *)e)->inuse;
		live += (size_t)objs * s->size;
		slabs += (size_t)(s->nr_slabs + frozen) << (s->order + PAGE_SHIFT);
		pcpm_unlock(&s->lock);
	}
	*live_bytes = live;
	*slab_bytes = slabs;
}

void slab_stats_add(struct pcpm_stats *st)
{
	struct lock_sum ls = { 0 };
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		/* (a frozen slab is counted when it is unfrozen, those frozen now here) */
		st->slab_alloc += pcpm_caches[c].slab_alloc +
				  atomic_load_explicit(&pcpm_caches[c].nr_frozen, memory_order_relaxed);
		st->slab_free += pcpm_caches[c].slab_free;
		lock_sum_add(&ls, &pcpm_caches[c].ls);
	}
	st->slab_lock += ls.acquired;
	st->slab_lock_contended += ls.contended;
	st->slab_lock_wait_ns += ls.wait_ns;
	st->slab_lock_hold_ns += lock_sum_hold_ns(&ls);
	st->slab_lock_busiest += ls.busiest;
}

void slab_lock_all(void)
{
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
		pcpm_lock(&pcpm_caches[c].lock);
}

void slab_unlock_all(void)
{
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
		pcpm_unlock(&pcpm_caches[c].lock);
}

void slab_reset_locks(void)
{
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
		pcpm_lock_reset(&pcpm_caches[c].lock);
}
