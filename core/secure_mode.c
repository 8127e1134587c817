/*
 * secure_mode.c - the secure front end (PCPMALLOC_SECURE=1): what api.c calls in secure mode
 * instead of the default functions; the small blocks here, page runs, huge mappings and
 * zero-size blocks in secure_large.c.  The layout and checks of a small block are secure.h's.
 *
 * Small blocks come from the thread's own stacks (sbins) of whole, randomly ordered slabs
 * (SLAB_FREELIST_RANDOM).  malloc pops a slot, checks that it is still zero (a write after
 * free is reported here), arms it (header, canary); free checks the header, the canary and
 * the neighbours' marks (the previous slot's last word, the next slot's canary word), zeroes
 * the slot and puts it in the thread's quarantine ring (ring_swap_class): the object that
 * falls out of the ring goes on the stack, so a freed address is never handed out at once,
 * and a second free finds the free mark.  Calls the default functions for what has no check
 * of its own (early blocks, foreign pointers), tcache, slab, secure_large.c, the periodic
 * work and the address-space reclaim.
 */
#include "early.h"
#include "alloc.h"
#include "free.h"
#include "secure_mode.h"
#include "huge_quarantine.h"
#include "secure_large.h"
#include "secure_runs.h"
#include "topology.h"
#include "vmstat.h"

#include <errno.h>
#include <string.h>

/* ---- small blocks: slots --------------------------------------------------------------- */

/* The end of the bytes a block of n bytes at slot + off writes: its own and the canary words
 * arm writes after them (16-byte aligned, before the slot's last two words). */
static inline char *written_end_of(char *slot, size_t size, size_t off, size_t n)
{
	char *e = (char *)ALIGN_UP((uintptr_t)(slot + off + n) + SECURE_CANARY_CHECK + 8, 16);
	char *last = slot + size - 16;
	return e < last ? e : last;
}

/* A slot about to be handed out as a block of n bytes at slot + off: its free mark (or 0: a
 * stack pop clears it) and zero bytes up to what the block will write and its last two
 * words, else something wrote into it while it was free (reported at the block it held).
 * A write after free further in stays, and the check of a larger block finds it. */
static inline __attribute__((always_inline)) void slot_check_free(char *slot, size_t size,
								  size_t off, size_t n,
								  const char *call)
{
	uint64_t mark = secure_load64(slot + 8);
	if (unlikely((mark && mark != PCPM_FREE_KEY) ||
		     (secure_load64(slot + size - 16) | secure_load64(slot + size - 8)) ||
		     (secure_on(SECURE_P_ZERO) &&
		      !secure_is_zero(slot + 16, written_end_of(slot, size, off, n)))))
		secure_uaf(slot + SECURE_HDR, call);
}

/* Arms the free slot of class cls as a block of n bytes at slot + off. */
static inline __attribute__((always_inline)) void *slot_take(char *slot, unsigned cls, size_t n,
							     size_t off, const char *call)
{
	size_t size = pcpm_class_size[cls];
	slot_check_free(slot, size, off, n, call);
	secure_store64(slot, 0); /* the link */
	if (!secure_on(SECURE_P_CANARY))
		return secure_arm_header(slot, n, off);
	return secure_arm(slot, size, n, off);
}

/* Pops a slot of class cls from the thread's stack and arms it; NULL when the stack is empty
 * or a signal handler runs.  Inline and free of calls: no pcpm_inside flag needed (a signal
 * handler recognises pcpmalloc's code by the program counter).  The free mark stays: the
 * neighbours' checks see a slot marked free or live, never cleared. */
static inline __attribute__((always_inline)) void *pop_small(unsigned cls, size_t n, size_t off,
							     const char *call)
{
	struct tcache *tc = tcache_self();
	struct tcache_bin *b = &tc->sbins[cls];
	if (unlikely(tcache_bin_empty(b) || pcpm_nested()))
		return NULL;
	char *slot = *b->top++;
	tc->pops++;
	return slot_take(slot, cls, n, off, call);
}

/* An unarmed slot of class cls: the thread's secure stack (refilled from the slab), or one
 * object from the slab when the thread has no cache; NULL when memory is exhausted. */
static void *small_slot(unsigned cls)
{
	if (unlikely(pcpm_nested()))
		return slab_alloc_nested(cls);
	tcache_ensure();
	struct tcache *tc = tcache_self();
	if (tcache_mode_ready(tc, cls)) {
		struct tcache_bin *sb = &tc->sbins[cls];
		if (tcache_bin_empty(sb) && !tcache_mode_refill(tc, cls))
			return NULL;
		return tcache_bin_pop(tc, sb);
	}
	return tcache_alloc_slow(cls); /* no cache: one object straight from the slab */
}

static PCPM_NOINLINE void slot_to_stack_slow(struct tcache *tc, void *slot, unsigned cls)
{
	if (tcache_mode_ready(tc, cls)) {
		if (tcache_bin_full(&tc->sbins[cls]))
			tcache_mode_flush(tc, cls);
		tcache_bin_push(tc, &tc->sbins[cls], slot);
		return;
	}
	tcache_free_slow(slot, cls); /* no cache: straight to the slab */
}

/* A freed slot (zeroed, marked) back to the thread's stack of class cls, or the slab: inline
 * while the stack has room (the stack is in use then: tcache_mode_ready's test), else the
 * cache's own rules (flush, or no cache). */
static inline __attribute__((always_inline)) void slot_to_stack(struct tcache *tc, void *slot,
								unsigned cls)
{
	struct tcache_bin *sb = &tc->sbins[cls];
	if (likely(!tcache_bin_full(sb))) {
		tcache_bin_push(tc, sb, slot);
		return;
	}
	slot_to_stack_slow(tc, slot, cls);
}

/*
 * The quarantine of freed slots: the thread's ring (TC_RING slots, flushed by tcache with
 * its stacks) split into groups of SQ_GROUP slots, one group per class modulo the number of
 * groups.  A freed slot takes a random slot of its class's group and the one that was there
 * goes to its stack: it comes back after 1 to many more frees of the group (SQ_GROUP on
 * average), never at the next malloc, at an address no one can predict, and still warm
 * (one ring for every class made it wait TC_RING frees of any size: a cache miss at each
 * reuse, 25% of secure_malloc in wl-churn).
 */
#define SQ_GROUP 8

static inline __attribute__((always_inline)) void *ring_swap_class(struct tcache *tc, void *p,
								  unsigned *cls)
{
	uint64_t x = tc->ring_rng;
	if (unlikely(!x))
		x = (uintptr_t)p | 1;
	x ^= x << 13; /* xorshift64 */
	x ^= x >> 7;
	x ^= x << 17;
	tc->ring_rng = x;
	unsigned i = (*cls % (TC_RING / SQ_GROUP)) * SQ_GROUP + ((unsigned)(x >> 32) & (SQ_GROUP - 1));
	void *old = tc->ring[i];
	unsigned oc = tc->ring_cls[i];
	tc->ring[i] = p;
	tc->ring_cls[i] = (uint8_t)*cls;
	*cls = oc;
	return old;
}



/* ---- small blocks: the live block's checks -------------------------------------------- */

struct small {
	char *slot;
	size_t size, n, off;
	long idx;
	unsigned cls;
};

/*
 * Finds and checks the live small block p of the slab at addr (its cache's reciprocal, its
 * class cls): its slot, header, canary; fills b.  Aborts with the call's name: invalid
 * pointer (not a block's start), double free (the slot is free), heap underflow (header
 * changed), heap overflow (canary changed).
 */
static inline __attribute__((always_inline)) void
__small_check(char *p, char *addr, uint32_t reciprocal, unsigned cls, const char *call,
	      struct small *b)
{
	struct kmem_cache *s = &pcpm_caches[cls];
	size_t size = s->size, soff = (size_t)(p - addr);
	size_t idx = (soff * reciprocal) >> 32;
	char *slot = addr + idx * size;
	size_t off = (size_t)(p - slot);
	if (unlikely(idx >= s->objects || ((uintptr_t)p & 15) || off < SECURE_HDR))
		pcpm_bad_pointer(call, p);
	uint64_t c = secure_canary(slot), mark = secure_load64(slot + 8);
	if (unlikely(mark != c)) {
		if (mark == PCPM_FREE_KEY || !mark)
			off == SECURE_HDR || !(off & (off - 1)) ? secure_double_free(p, call)
								 : pcpm_bad_pointer(call, p);
		secure_underflow(p, call);
	}
	uint64_t w = secure_load64(p - 16) ^ (uintptr_t)p ^ pcpm_secure_keys.size;
	size_t n = (uint32_t)w;
	if (unlikely(w >> 32 != off || n + off + SECURE_TAIL_MIN > size ||
		     secure_load64(p - 8) != c)) {
		/* p inside the block that starts at slot + 16 (its header intact), or a header
		 * that was overwritten */
		uint64_t w0 = secure_load64(slot) ^ (uintptr_t)(slot + 16) ^ pcpm_secure_keys.size;
		if (off != SECURE_HDR && w0 >> 32 == SECURE_HDR)
			pcpm_bad_pointer(call, p);
		secure_underflow(p, call);
	}
	if (secure_on(SECURE_P_CANARY))
		secure_canary_check(c, p + n, slot + size, p, call);
	b->slot = slot;
	b->size = size;
	b->n = n;
	b->off = off;
	b->idx = (long)idx;
	b->cls = cls;
}

/* __small_check out of line, for the calls that are no free (usable size, realloc). */
static PCPM_NOINLINE void small_check(char *p, struct page *head, const char *call,
				      struct small *b)
{
	__small_check(p, head->addr, head->reciprocal, head->cls, call, b);
}

/* A word another thread may be storing (whole words only), read as one. */
static inline uint64_t load_word(const char *q)
{
	return __atomic_load_n((const uint64_t *)q, __ATOMIC_RELAXED);
}

/*
 * The neighbours: the previous slot's last two words are zero (free) or its canary word
 * (live); the next slot's mark is its canary word, the free mark or zero (being popped), its
 * first word zero, a free-list link (16-byte aligned, canonical) or a size word of a block at
 * its offset 16.  Every state of a slot, whichever thread changes it, reads as one of these
 * (each word is stored whole); anything else was written across the slot boundary: an
 * underflow from p or an overflow past its end.
 */
static inline __attribute__((always_inline)) void
small_check_neighbours(const struct small *b, const char *p, const char *call)
{
	if (b->idx > 0) {
		uint64_t c = secure_canary(b->slot - b->size);
		uint64_t w1 = load_word(b->slot - 16), w2 = load_word(b->slot - 8);
		if (unlikely((w1 && w1 != c) || (w2 && w2 != c)))
			secure_underflow(p, call);
	}
	if ((uint32_t)b->idx + 1 < pcpm_caches[b->cls].objects) {
		const char *next = b->slot + b->size;
		uint64_t mark = load_word(next + 8), w = load_word(next);
		uint64_t link = w ^ (uintptr_t)next ^ pcpm_link_key;
		uint64_t sw = w ^ (uintptr_t)(next + SECURE_HDR) ^ pcpm_secure_keys.size;
		bool mark_ok = !mark || mark == PCPM_FREE_KEY || mark == secure_canary(next);
		bool word_ok = !w || (!(link & 15) && link < (1ULL << 47)) ||
			       (sw >> 32 == SECURE_HDR && (uint32_t)sw + SECURE_SMALL_EXTRA <= b->size);
		if (unlikely(!mark_ok || !word_ok))
			secure_overflow(p, call);
	}
}

/* The end of what the live block b may have written: its bytes and the canary words arm
 * wrote after them (16-byte aligned, before the slot's last two words).  The rest of the
 * slot stayed zero since malloc checked it (an overflow that skipped the canary is found by
 * the next malloc's zero check), so free zeroes up to here. */
static inline char *written_end(const struct small *b)
{
	return written_end_of(b->slot, b->size, b->off, b->n);
}

/* The rest of a small free when the inline path of small_free cannot finish it (a signal
 * handler runs, no active cache, no quarantine, a full stack): the slot, checked, zeroed
 * and marked free, to the thread's ring and stack or the slab, with pcpm_inside set (the
 * stack's flush takes locks). */
static PCPM_NOINLINE void small_free_tail(char *slot, unsigned cls)
{
	PCPM_INSIDE_BEGIN();
	if (unlikely(pcpm_nested())) {
		tcache_count(true);
		slab_free_nested(slot, pcpm_page_of(slot)->slab_head);
		goto out;
	}
	tcache_ensure();
	struct tcache *tc = tcache_self();
	if (tc->state != TC_ACTIVE) {
		tcache_free_slow(slot, cls); /* (counted there) */
		goto out;
	}
	if (!secure_on(SECURE_P_QUAR)) {
		slot_to_stack(tc, slot, cls);
		goto out;
	}
	void *old = ring_swap_class(tc, slot, &cls);
	if (old)
		slot_to_stack(tc, old, cls);
	else
		tc->free_calls++;
out:
	PCPM_INSIDE_END();
}

/*
 * Frees the small block p of the slab at addr (size: the caller's, or SECURE_NO_SIZE): checks,
 * zero, free mark, the quarantine ring; what falls out of it goes to its stack.  Secure
 * mode's fast path for free: inline in its entries, one function from the checks to the
 * stack push, no call on the way (the checks were two calls down, under the pcpm_inside
 * flag: 40-50 instructions more per malloc + free pair) and, as pop_small, no pcpm_inside
 * flag (a signal handler recognises pcpmalloc's code by the program counter; the zeroing's
 * memset leaves no stack or ring half changed).  What it cannot finish goes to
 * small_free_tail.  A free is counted (free_calls) only where no push follows: tcache_calls
 * counts a stack's pushes itself (counted both ways, secure mode reported twice its frees).
 */
static inline __attribute__((always_inline)) void small_free(char *p, char *addr,
							     uint32_t reciprocal, unsigned cls,
							     const char *call, size_t size)
{
	struct small b;
	__small_check(p, addr, reciprocal, cls, call, &b);
	if (unlikely(size != SECURE_NO_SIZE && size != b.n))
		secure_size_mismatch(p, size, b.n, call);
	if (secure_on(SECURE_P_CANARY))
		small_check_neighbours(&b, p, call);
	__atomic_store_n((uint64_t *)(b.slot + 8), PCPM_FREE_KEY, __ATOMIC_RELAXED);
	/* the padding in front of an aligned block stayed zero: from its header on */
	if (secure_on(SECURE_P_ZERO))
		secure_zero(b.off > SECURE_HDR ? p - SECURE_HDR : b.slot + 16, written_end(&b));
	__atomic_store_n((uint64_t *)(b.slot + b.size - 16), 0, __ATOMIC_RELAXED);
	__atomic_store_n((uint64_t *)(b.slot + b.size - 8), 0, __ATOMIC_RELAXED);
	secure_store64(b.slot, 0);
	struct tcache *tc = tcache_self();
	if (likely(tc->state == TC_ACTIVE && secure_on(SECURE_P_QUAR) && !pcpm_nested())) {
		void *old = ring_swap_class(tc, b.slot, &cls);
		struct tcache_bin *sb = &tc->sbins[cls];
		if (likely(old && !tcache_bin_full(sb))) {
			tcache_bin_push(tc, sb, old);
			return;
		}
		if (!old) { /* counted: no push follows (tcache_calls counts pushes) */
			tc->free_calls++;
			return;
		}
		PCPM_INSIDE_BEGIN();
		slot_to_stack_slow(tc, old, cls);
		PCPM_INSIDE_END();
		return;
	}
	small_free_tail(b.slot, b.cls);
}

/* A pointer the fast path took for a slab object's start: no secure block starts there. */
void secure_free_small(void *p, unsigned cls)
{
	(void)cls;
	pcpm_bad_pointer("free", p);
}

void secure_free_slab_checked(void *p, const char *call)
{
	pcpm_bad_pointer(call, p);
}

/* ---- malloc ---------------------------------------------------------------------------- */

/* A small block of n bytes at slot + off (16, or the alignment) of class cls, from the slow
 * path (stack refill, a slab, a signal handler's partial slab); NULL when exhausted. */
static void *small_alloc_slow(unsigned cls, size_t n, size_t off, const char *call)
{
	char *slot = small_slot(cls);
	if (!slot)
		return NULL;
	return slot_take(slot, cls, n, off, call);
}

static void *__malloc(size_t n)
{
	if (unlikely(!pcpm_nested()))
		tcache_ensure();
	pcpm_vmstat_maybe_start();
	void *p;
	for (bool retried = false;; retried = true) {
		if (n == 0) {
			p = secure_zero_block();
		} else if (n <= SECURE_SMALL_MAX) {
			p = small_alloc_slow(size_to_class(n + SECURE_SMALL_EXTRA), n, SECURE_HDR,
					     "malloc");
			bool run; /* a signal handler without a partial slab: a mapping */
			if (!p && pcpm_nested())
				p = secure_large_alloc(n, 0, &run);
		} else if (n > PCPM_USER_VA_BYTES) { /* no mapping can hold it */
			p = NULL;
		} else {
			bool run;
			p = secure_large_alloc(n, 0, &run);
			if (p && !pcpm_nested())
				pcpm_count_malloc(run);
		}
		if (likely(p) || retried || n > PCPM_USER_VA_BYTES || pcpm_nested() ||
		    !pcpm_reclaim_address_space(n))
			break;
	}
	if (unlikely(!p)) {
		errno = ENOMEM;
		return NULL;
	}
	if (!pcpm_nested()) {
		pcpm_vmstat_maybe_run();
		pcpm_topology_maybe_discover();
	}
	return p;
}

static PCPM_NOINLINE void *malloc_inside(size_t n)
{
	int e = errno; /* a failed mapping before a success must not show (dfl_malloc_slow) */
	PCPM_INSIDE_BEGIN();
	void *p = __malloc(n);
	PCPM_INSIDE_END();
	if (likely(p))
		errno = e;
	return p;
}

void *secure_malloc(size_t n)
{
	void *p;
	/* small blocks straight from the thread's own stack when it has one; the rest in a
	 * function of its own, so this part needs no stack frame */
	if (likely(n - 1 < SECURE_SMALL_MAX) &&
	    likely(p = pop_small(size_to_class(n + SECURE_SMALL_EXTRA), n, SECURE_HDR, "malloc")))
		return p;
	return malloc_inside(n);
}

/* Every block secure mode hands out is zeroed (small: checked zero; runs and mappings:
 * cleared when reused), so calloc clears nothing; with the zeroing off, it clears all but
 * huge mappings (cleared when reused either way: huge_arm). */
void *secure_calloc(size_t n)
{
	void *p = secure_malloc(n); /* zeroed on free, checked zero at malloc */
	if (p && n && n <= HUGE_THRESHOLD && !secure_on(SECURE_P_ZERO))
		memset(p, 0, n);
	return p;
}

/* ---- aligned --------------------------------------------------------------------------- */

/* The first class whose slots are multiples of align with room for a block of size bytes
 * at slot + align (align > 16; the header in the 16 bytes before it); -1 when none. */
static int aligned_class(size_t align, size_t size)
{
	if (size > SLAB_MAX_SIZE || align > PAGE_SIZE)
		return -1;
	size_t need = size + align + SECURE_TAIL_MIN;
	if (need > SLAB_MAX_SIZE)
		return -1;
	for (unsigned c = size_to_class(need); c < NR_SIZE_CLASSES; c++) {
		if (pcpm_class_size[c] & (align - 1))
			continue;
		if (align <= (PAGE_SIZE << kmem_cache_of(c)->order))
			return (int)c;
	}
	return -1;
}

static void *aligned_core(size_t align, size_t size)
{
	if (size > PTRDIFF_MAX || align > PTRDIFF_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	if (size == 0 && align <= 16)
		return __malloc(0);
	if (align <= 16 && size <= SECURE_SMALL_MAX)
		return __malloc(size);
	int c = aligned_class(align, size);
	void *p = NULL;
	if (c >= 0)
		p = small_alloc_slow((unsigned)c, size, align, "memalign");
	if (c < 0 || (!p && pcpm_nested())) {
		bool run;
		p = secure_large_alloc(MAX(size, 1), align, &run);
		if (p && !pcpm_nested())
			pcpm_count_malloc(run);
	}
	if (!p)
		errno = ENOMEM;
	return p;
}

void *secure_aligned_alloc(size_t align, size_t size)
{
	if (align <= 16 && size - 1 < SECURE_SMALL_MAX)
		return secure_malloc(size);
	int c = aligned_class(align, size);
	if (c >= 0) {
		void *p = pop_small((unsigned)c, size, align, "memalign");
		if (p)
			return p;
	}
	PCPM_INSIDE_BEGIN();
	void *p = aligned_core(align, size);
	PCPM_INSIDE_END();
	return p;
}

/* ---- free, usable size ----------------------------------------------------------------- */

/* Frees what is not a small block of the first arena: NULL, a small block of another arena,
 * a zero-size block, a page run, a huge mapping (or aborts). */
static PCPM_NOINLINE void free_other(void *p, const char *call, size_t size)
{
	if (!p)
		return;
	struct page *pg = pcpm_page_of(p);
	if (pg && pg->state == PG_SLAB) {
		struct page *head = pg->slab_head;
		small_free(p, head->addr, head->reciprocal, head->cls, call, size);
		return;
	}
	PCPM_INSIDE_BEGIN();
	if (secure_is_zero_block(p))
		((uintptr_t)p & 15) ? pcpm_bad_pointer(call, p) : (void)0;
	else
		secure_large_free(p, call, size);
	PCPM_INSIDE_END();
}

/*
 * Any block: small ones of the first arena through small_free, inline, found as the default
 * mode's free fast path finds them (free_fast.h): the page's 16-byte fast descriptor (four
 * to a line) has the slab's address, reciprocal and class, and its bound is not 0 on every
 * page of a slab (secure mode carves them whole), so neither the 64-byte struct page nor
 * the slab's head is read; the rest in free_other.  Then the periodic work, when a drain
 * flagged it (api.c's switch, which ran it before, now tail-calls secure mode's free).
 */
static inline __attribute__((always_inline)) void free_checked(void *p, const char *call,
							       size_t size)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)pcpm_arena0.base;
	const struct page_fast *fp;
	uint32_t soff;
	if (likely(off < __arena0_committed_racy()) &&
	    likely((fp = pcpm_arena0.fast + (off >> PAGE_SHIFT))->fast_lim) &&
	    /* below 2^17 in a slab; a descriptor read while its page changed hands may say
	     * otherwise: then the struct page's view (free_other), never an address far off */
	    likely((soff = (uint32_t)(uintptr_t)p - fp->addr_lo) < (PAGE_SIZE << SLAB_MAX_ORDER)))
		small_free(p, (char *)p - soff, fp->reciprocal, fp->cls, call, size);
	else
		free_other(p, call, size);
	pcpm_vmstat_after_free();
}

void secure_free_generic(void *p, const char *call)
{
	free_checked(p, call, SECURE_NO_SIZE);
}

void secure_free_sized(void *p, size_t size, const char *call)
{
	free_checked(p, call, size);
}

static size_t usable_size(void *p, const char *call)
{
	struct page *pg = pcpm_page_of(p);
	if (pg && pg->state == PG_SLAB) {
		struct small b;
		small_check(p, pg->slab_head, call, &b);
		return b.n;
	}
	if (secure_is_zero_block(p))
		return 0;
	if (!pg && pcpm_is_early(p))
		return pcpm_early_usable(p, call);
	return secure_large_size(p, call);
}

size_t secure_usable_size(const void *p)
{
	return usable_size((void *)p, "malloc_usable_size");
}

/* ---- realloc --------------------------------------------------------------------------- */

static void *__realloc(char *p, size_t size)
{
	struct page *pg = pcpm_page_of(p);
	if (pg && pg->state == PG_SLAB && !pcpm_nested()) {
		/* a small block stays when its slot still fits: checked, grown bytes zeroed,
		 * header and canary rewritten */
		struct page *head = pg->slab_head;
		struct small b;
		small_check(p, head, "realloc", &b);
		if (b.off == SECURE_HDR && size + SECURE_SMALL_EXTRA <= b.size &&
		    (size_to_class(size + SECURE_SMALL_EXTRA) == head->cls || size >= b.size / 2)) {
			if (size > b.n)
				memset(p + b.n, 0, size - b.n);
			else /* the old bytes and canary past the new end: zero again */
				memset(p + size, 0, (size_t)(written_end(&b) - (p + size)));
			if (!secure_on(SECURE_P_CANARY))
				return secure_arm_header(b.slot, size, SECURE_HDR);
			return secure_arm(b.slot, b.size, size, SECURE_HDR);
		}
	} else if (!pg && !secure_is_zero_block(p) && !pcpm_owns(p)) {
		return pcpm_foreign_realloc(p, size); /* glibc's block stays glibc's */
	} else if (size > SECURE_SMALL_MAX && !secure_is_zero_block(p)) {
		void *q = secure_large_resize(p, size);
		if (q)
			return q;
	}
	/* every other realloc moves, with the checks of malloc and free */
	size_t old = usable_size(p, "realloc");
	void *q = size > SECURE_SMALL_MAX && size > old ? secure_large_alloc_grow(size) : NULL;
	if (q)
		pcpm_count_malloc(true); /* at the front of a run, to grow in place next time */
	else if (!(q = __malloc(size)))
		return NULL;
	memcpy(q, p, MIN(old, size));
	secure_free_generic(p, "realloc");
	return q;
}

void *secure_realloc(void *p, size_t size)
{
	PCPM_INSIDE_BEGIN();
	int e = errno;
	void *q = __realloc(p, size);
	if (q) /* a grow in place or a new mapping may have failed before the move succeeded */
		errno = e;
	PCPM_INSIDE_END();
	return q;
}

void secure_trim(void)
{
	/* mappings handlers freed go through the quarantine (the default trim would cache and
	 * unmap them); the run quarantine keeps its runs, so a double free after the trim is
	 * still reported */
	huge_drain_deferred(huge_free_quarantined);
	secure_runs_trim(); /* the resident cold runs' pages */
}
