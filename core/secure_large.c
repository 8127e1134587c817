/*
 * secure_large.c - the secure front end's large blocks, huge mappings and zero-size blocks
 * (see secure_large.h).  hardened_malloc's large allocations are the model: the block's end
 * against a guard page, nothing of it reused at once.
 *
 * A page run is a buddy block of 2^order pages whose first and last pages are guards laid
 * out once (secure_runs.c):
 *
 *   | guard | zero ... | canary | size word | canary word | the block | < 16 B canary | guard |
 *
 * the block's end against the tail guard (its start 16-byte aligned, or to align): an
 * overflow faults at once or is caught by the short canary at free; the 64 bytes before the
 * block (header included) catch underflows, the front guard longer ones.  The run's head
 * descriptor keeps the request size and the block's offset in the run (req_size = n |
 * offset << 32).  A freed block's bytes are zeroed (once: the run is handed out again as
 * it is), its run waits in secure_runs.c's quarantine, is checked zero when it leaves it and
 * is cached per order with its guards; a second free finds it there (double free).  Huge
 * mappings keep the block at the mapping's start with the canary up to a guard page, and go
 * through huge_quarantine.c when freed.
 * Calls secure_runs.c, large, huge, the quarantine of huge mappings and os.c.  Thread-safe;
 * signal handlers get huge mappings and free runs without the quarantine.
 */
#include "early.h"
#include "free.h"
#include "huge_quarantine.h"
#include "large.h"
#include "os.h"
#include "secure_large.h"
#include "secure_runs.h"

#include <errno.h>

/* ---- zero-size blocks ------------------------------------------------------------------ */

#define ZERO_SPAN (64UL << 20) /* reserved, never accessible: 4 Mi distinct blocks */
static _Atomic(char *) zero_base;
static _Atomic size_t zero_next;

void *secure_zero_block(void)
{
	char *b = atomic_load_explicit(&zero_base, memory_order_acquire);
	if (unlikely(!b)) {
		char *r = pcpm_os_reserve(ZERO_SPAN, PAGE_SIZE);
		if (!r)
			return NULL;
		if (!atomic_compare_exchange_strong(&zero_base, &b, r))
			pcpm_os_unmap(r, ZERO_SPAN); /* another thread's won: b holds it */
		else
			b = r;
	}
	size_t o = atomic_fetch_add_explicit(&zero_next, 16, memory_order_relaxed);
	return b + o % ZERO_SPAN;
}

bool secure_is_zero_block(const void *p)
{
	char *b = atomic_load_explicit(&zero_base, memory_order_relaxed);
	return b && (uintptr_t)p - (uintptr_t)b < ZERO_SPAN;
}

/* ---- the canary of a page run: byte-exact, any length ------------------------------- */

static void canary_bytes(uint64_t c, char *from, char *to)
{
	for (char *q = from; q < to; q++)
		*q = (char)(c >> (8 * ((uintptr_t)q & 7)));
}

static bool canary_bytes_ok(uint64_t c, const char *from, const char *to)
{
	uint8_t diff = 0;
	for (const char *q = from; q < to; q++)
		diff |= (uint8_t)(*q ^ (char)(c >> (8 * ((uintptr_t)q & 7))));
	return !diff;
}

/* ---- huge mappings --------------------------------------------------------------------- */

/* The first 2^k bytes of the mapping (a page, or the alignment) and its last page are
 * guards (no VMA split where the kernel has MADV_GUARD_INSTALL, so mremap still sees one
 * mapping): an underflow or overflow of any length faults; the bytes between the request
 * and the tail guard carry the canary; a cached mapping handed out again is cleared.
 * Returns the block, base + 2^k. */
static void *huge_arm(void *base, size_t size, unsigned k)
{
	if (!base)
		return NULL;
	struct region *r = pcpm_region_of(base);
	char *p = (char *)base + ((size_t)1 << k);
	r->req = size | (uint64_t)k << HUGE_FRONT_SHIFT;
	pcpm_os_guard_install(base, (size_t)1 << k);
	pcpm_os_guard_install(huge_tail_guard(r), PAGE_SIZE);
	memset(p, 0, huge_dirty_bytes(r, p, size)); /* (its dirty head only, as calloc's) */
	secure_fill_canary(p + size, huge_tail_guard(r));
	return p;
}

/* A huge mapping for a block of n bytes aligned to align (>= 16): front guard, block,
 * tail guard. */
static void *huge_secure_alloc(size_t n, size_t align)
{
	unsigned k = align > PAGE_SIZE ? (unsigned)ilog2_ceil(align) : PAGE_SHIFT;
	size_t hlen = ((size_t)1 << k) + ALIGN_UP(n, PAGE_SIZE) + PAGE_SIZE;
	if (pcpm_nested())
		return huge_arm(huge_alloc_nested(hlen, align), n, k);
	/* mappings handlers freed: quarantined, not cached where their old pointers point */
	huge_drain_deferred(huge_free_quarantined);
	return huge_arm(huge_alloc(hlen, align), n, k);
}

/* The live huge mapping whose block is p, or NULL. */
static struct region *huge_of(const char *p)
{
	struct region *r = pcpm_is_early(p) ? NULL : pcpm_region_of(p);
	if (r && r->kind == REGION_HUGE && huge_base(r) + huge_front(r) == p)
		return r;
	return NULL;
}

/* ---- page runs ------------------------------------------------------------------------- */

/* The marks of a run's block p of n bytes at offset off, its tail guard at gp: the front
 * canary, the size word and canary word before p, the tail canary up to the guard. */
static void arm_run(char *p, size_t n, size_t off, uint64_t c, char *gp)
{
	canary_bytes(c, p - SECURE_LARGE_FRONT, p - 16);
	secure_store64(p - 16, secure_size_word(p, n, off));
	secure_store64(p - 8, c);
	canary_bytes(c, p + n, MIN(gp, p + n + SECURE_CANARY_CHECK));
	if (gp - (p + n) > SECURE_CANARY_CHECK)
		secure_store64(gp - 8, c);
}

/*
 * The order of the secure run for a block of n bytes aligned to align (16 to HUGE_THRESHOLD)
 * and its offset in the run: the block's end as close to the tail guard (the last page) as
 * the alignment allows, at least a page (the front guard) and SECURE_LARGE_FRONT bytes in;
 * -1 when no run of MAX_PAGE_ORDER holds it (a huge mapping).
 */
static int run_order(size_t n, size_t align, size_t *off)
{
	size_t body = ALIGN_UP(n, 16);
	size_t need = (body + SECURE_LARGE_FRONT + PAGE_SIZE - 1) / PAGE_SIZE + 2;
	for (unsigned o = (unsigned)ilog2_ceil(need); o <= MAX_PAGE_ORDER; o++) {
		size_t end = (PAGE_SIZE << o) - PAGE_SIZE;
		if (end < body)
			continue;
		size_t at = (end - body) & ~(align - 1);
		if (at >= PAGE_SIZE + SECURE_LARGE_FRONT) {
			*off = at;
			return (int)o;
		}
	}
	return -1;
}

/* The run's last page (its own tail guard, laid out with the run). */
static inline char *run_last(struct page *h)
{
	return page_address(h) + ((size_t)h->npages << PAGE_SHIFT) - PAGE_SIZE;
}

/* Where a block laid out to grow starts in its run: past the front guard and the header. */
#define GROW_OFF (PAGE_SIZE + SECURE_LARGE_FRONT)
#define GROW_MIN (64UL << 10) /* (below, a copy costs less than moving the guard) */

/* Takes the guard of the growing block of run h off (its run is being freed); its page then
 * reads zero, as it did when the guard was installed on it.  PG_SECURE_GROW stays until the
 * run is handed out again: the quarantine's check stops at that page (secure_runs.c). */
static void grow_guard_drop(struct page *h)
{
	char *gp = secure_run_guard(h);
	if ((h->flags & PG_SECURE_GROW) && gp < run_last(h))
		pcpm_os_guard_remove(gp, PAGE_SIZE);
}

void *secure_large_alloc(size_t n, size_t align, bool *run)
{
	*run = false;
	if (align < 16)
		align = 16;
	size_t off = 0;
	int o = n > HUGE_THRESHOLD || align > HUGE_THRESHOLD ? -1 : run_order(n, align, &off);
	if (o < 0 || unlikely(pcpm_nested()))
		return huge_secure_alloc(n, align);
	struct page *h = secure_run_get((unsigned)o, off - SECURE_LARGE_FRONT, 0);
	if (!h)
		return NULL;
	*run = true;
	char *base = page_address(h), *p = base + off;
	h->req_size = n | (uint64_t)off << 32;
	arm_run(p, n, off, secure_canary(base), secure_run_guard(h));
	return p; /* the run reads zero (with SECURE_P_ZERO; else calloc clears): no clearing */
}

/* The head descriptor of the secure run holding p (a page and SECURE_LARGE_FRONT bytes or
 * more into it), or NULL: runs are buddy blocks, so the head is p's page rounded down to
 * the run's order, the one PG_LARGE head whose run covers p. */
static struct page *run_of(const void *p)
{
	struct page *pg = pcpm_page_of(p);
	if (!pg)
		return NULL;
	struct arena *a = pcpm_arena_of(p); /* (pg is inside the run: no arena byte) */
	size_t pfn = (size_t)((uintptr_t)p - (uintptr_t)a->base) >> PAGE_SHIFT;
	for (unsigned o = 1; o <= MAX_PAGE_ORDER; o++) {
		size_t hp = pfn & ~((1UL << o) - 1);
		if (hp == pfn)
			continue;
		struct page *h = pg - (pfn - hp);
		if (h->state == PG_LARGE && h->npages == 1UL << o)
			return h;
	}
	return NULL;
}

/* Checks the live block p of run h (header, canaries, the caller's size); returns n. */
static size_t run_check(char *p, struct page *h, const char *call, size_t size)
{
	char *base = page_address(h);
	if (h->flags & PG_SECURE_QUAR) {
		if (p == base + (h->req_size >> 32))
			secure_double_free(p, call);
		pcpm_bad_pointer(call, p);
	}
	size_t n = (uint32_t)h->req_size, off = h->req_size >> 32;
	if (p != base + off)
		pcpm_bad_pointer(call, p);
	uint64_t c = secure_canary(base);
	if (secure_load64(p - 16) != secure_size_word(p, n, off) || secure_load64(p - 8) != c ||
	    !canary_bytes_ok(c, p - SECURE_LARGE_FRONT, p - 16))
		secure_underflow(p, call);
	char *gp = secure_run_guard(h);
	if (!canary_bytes_ok(c, p + n, MIN(gp, p + n + SECURE_CANARY_CHECK)) ||
	    (gp - (p + n) > SECURE_CANARY_CHECK && secure_load64(gp - 8) != c))
		secure_overflow(p, call);
	if (size != SECURE_NO_SIZE && size != n)
		secure_size_mismatch(p, size, n, call);
	return n;
}

/* Zeroes what the live block p of run h and arm_run wrote: the front canary and header, the
 * block, the tail canary and the last word before the guard, by residency (a sparse block's
 * untouched pages are not written).  The rest of the run between them was zero when the
 * block was handed out and nothing legal wrote it since (the quarantine's check reads it
 * all): a block aligned far below its tail guard (64 KiB aligned to 64 KiB: 60 KiB of tail)
 * no longer has its tail pages written, so they stay untouched, not resident.  Returns
 * whether every page was resident (a dense block: the check reads it whole). */
static bool run_zero(char *p, struct page *h)
{
	char *e = secure_run_written_end(p, h), *gp = secure_run_guard(h);
	bool dense = secure_run_zero(p - SECURE_LARGE_FRONT, e);
	if (gp - e >= 8)
		secure_store64(gp - 8, 0);
	return dense;
}

void secure_large_free(void *ptr, const char *call, size_t size)
{
	char *p = ptr;
	struct page *pg = pcpm_page_of(p);
	if (pg) {
		struct page *h = run_of(p);
		if (!h || ((uintptr_t)p & 15))
			pcpm_bad_page_pointer(call, p, pg);
		run_check(p, h, call, size);
		tcache_count(true);
		if (unlikely(pcpm_nested())) { /* no lock: straight back, guards off */
			grow_guard_drop(h);
			secure_run_free_nested(h);
			return;
		}
		/* zeroed once, here: a read after free finds nothing, and the run goes back to
		 * the cache clean (checked zero when it leaves the quarantine) */
		h->flags &= (uint8_t)~PG_SECURE_SPARSE;
		if (secure_on(SECURE_P_ZERO) && !run_zero(p, h))
			h->flags |= PG_SECURE_SPARSE;
		/* a growing block's guard off: the run joins the others with its two guards */
		grow_guard_drop(h);
		h->flags |= PG_SECURE_QUAR;
		secure_run_put(h, call);
		return;
	}
	struct region *r = huge_of(p);
	if (r) {
		size_t n = huge_req_size(r);
		if (huge_state(r) != HUGE_LIVE)
			secure_double_free(p, call);
		secure_check_canary(p, p + n, huge_tail_guard(r), call);
		if (size != SECURE_NO_SIZE && size != n)
			secure_size_mismatch(p, size, n, call);
		tcache_count(true);
		if (unlikely(pcpm_nested())) {
			/* deferred, then cached like any mapping: no guard page inside it */
			pcpm_os_guard_remove(huge_base(r), huge_front(r));
			pcpm_os_guard_remove(huge_tail_guard(r), PAGE_SIZE);
			huge_defer(r); /* quarantined when drained */
			return;
		}
		huge_drain_deferred(huge_free_quarantined);
		huge_free_quarantined(r);
		zone_note_free(); /* the decay worker, asleep, purges the cached mapping */
		return;
	}
	dfl_free_slow(p, NULL, call); /* an early block, or no block: abort */
}

void secure_large_drain(void)
{
	secure_runs_drain();
}

bool secure_is_large(const void *p)
{
	if (pcpm_page_of(p))
		return run_of(p) != NULL;
	struct region *r = pcpm_is_early(p) ? NULL : pcpm_region_of(p);
	return r && r->kind == REGION_HUGE;
}

size_t secure_large_size(const void *ptr, const char *call)
{
	char *p = (char *)ptr;
	struct page *pg = pcpm_page_of(p);
	if (pg) {
		struct page *h = run_of(p);
		if (!h || ((uintptr_t)p & 15))
			pcpm_bad_page_pointer(call, p, pg);
		return run_check(p, h, call, SECURE_NO_SIZE);
	}
	struct region *r = huge_of(p);
	if (!r && !pcpm_owns(p)) /* glibc's block (RTLD_DEEPBIND plugin, __libc_malloc) */
		return pcpm_foreign_usable(p, call);
	if (!r)
		pcpm_bad_pointer(call, p);
	if (huge_state(r) != HUGE_LIVE)
		secure_double_free(p, call);
	return huge_req_size(r);
}

/*
 * realloc of the growing block p (PG_SECURE_GROW) of run h in place, n bytes now: the block
 * stays, its tail guard moves to the page after the new end (one guard installed, one
 * removed, no copy).  False when the run cannot hold size bytes, a shrink would move the
 * guard down (over bytes the block wrote: the caller moves the block) or the new guard
 * cannot be installed; nothing changed then.
 */
static bool grow_in_place(char *p, struct page *h, size_t n, size_t size)
{
	size_t off = h->req_size >> 32;
	char *base = page_address(h), *last = run_last(h), *ogp = secure_run_guard(h);
	if (size > (size_t)(last - p))
		return false;
	char *ngp = base + ALIGN_UP(off + size, PAGE_SIZE);
	if (ngp < ogp || (ngp != ogp && ngp < last && !pcpm_os_guard_install(ngp, PAGE_SIZE)))
		return false;
	/* what the old block and its canary wrote past the kept bytes, and the word before
	 * the old guard, zero again: the grown bytes read zero (the run above was clean) */
	char *old_e = secure_run_written_end(p, h), *keep = p + MIN(n, size);
	if (old_e > keep)
		memset(keep, 0, (size_t)(old_e - keep));
	if (ogp - old_e >= 8)
		secure_store64(ogp - 8, 0);
	if (ngp != ogp && ogp < last)
		pcpm_os_guard_remove(ogp, PAGE_SIZE); /* the page reads zero */
	h->req_size = size | (uint64_t)off << 32;
	arm_run(p, size, off, secure_canary(base), secure_run_guard(h));
	return true;
}

/*
 * realloc of the huge block p of mapping r to size bytes in place: a size that still needs a
 * huge mapping and fits before the tail guard stays; a smaller mapping is shrunk with its
 * tail unmapped and the guard installed on its new last page (no copy; the kernel's
 * mremap shrinks in place as well).  The grown bytes (less than a page) are zeroed and the
 * canary written after the new end.  NULL: the block must move (growth past the mapping,
 * or a size for a page run).
 */
static void *huge_resize(char *p, struct region *r, size_t size)
{
	size_t n = huge_req_size(r), front = huge_front(r);
	if (huge_state(r) != HUGE_LIVE || size <= HUGE_THRESHOLD)
		return NULL; /* (a freed block: the move's checks report it) */
	char *guard = huge_tail_guard(r);
	secure_check_canary(p, p + n, guard, "realloc");
	size_t hlen = front + ALIGN_UP(size, PAGE_SIZE) + PAGE_SIZE;
	if (hlen > r->len)
		return NULL;
	if (hlen < r->len) {
		huge_shrink(r, hlen); /* (the old guard page goes with the tail) */
		guard = huge_tail_guard(r);
		pcpm_os_guard_install(guard, PAGE_SIZE);
	}
	if (size > n) /* the old canary's bytes */
		memset(p + n, 0, size - n);
	huge_set_req_size(r, size);
	secure_fill_canary(p + size, guard);
	return p;
}

void *secure_large_resize(void *ptr, size_t size)
{
	char *p = ptr;
	if (!pcpm_page_of(p)) {
		struct region *r = pcpm_nested() ? NULL : huge_of(p);
		return r ? huge_resize(p, r, size) : NULL;
	}
	struct page *h = run_of(p);
	if (!h || pcpm_nested())
		return NULL;
	size_t n = run_check(p, h, "realloc", SECURE_NO_SIZE);
	if (h->flags & PG_SECURE_GROW)
		return grow_in_place(p, h, n, size) ? p : NULL;
	/* stays when a run of the same order holds the new size: the block moves inside it
	 * (its end against the same guard), no system call, no page fault */
	size_t off;
	if (run_order(size, 16, &off) != ilog2_ceil(h->npages))
		return NULL;
	char *base = page_address(h), *q = base + off;
	char *gp = secure_run_guard(h);
	size_t m = MIN(n, size);
	if (q < p) /* moving down: what the run has not cleared yet below the old front */
		secure_run_clean(h, off - SECURE_LARGE_FRONT);
	memmove(q, p, m);
	/* zero again what the move left outside the new block: before its front (the block
	 * moved up) and after the bytes it keeps (the grown part, the old tail; a block that
	 * was aligned may move either way) */
	if (q > p)
		memset(p - SECURE_LARGE_FRONT, 0, (size_t)(q - p));
	/* what the old block and its canary wrote past the kept bytes (the word before the
	 * guard: arm_run writes it again or covers it with the tail canary) */
	char *old_e = secure_run_written_end(p, h);
	if (old_e > q + m)
		memset(q + m, 0, (size_t)(old_e - (q + m)));
	h->req_size = size | (uint64_t)off << 32;
	arm_run(q, size, off, secure_canary(base), gp);
	return q;
}

void *secure_large_alloc_grow(size_t n)
{
	/* room for twice the block (once grown, moved to a run twice as large again), or
	 * for the block alone near MAX_PAGE_ORDER */
	size_t body = ALIGN_UP(n, 16);
	unsigned o = (unsigned)ilog2_ceil((ALIGN_UP(GROW_OFF + 2 * body, PAGE_SIZE) >> PAGE_SHIFT) + 1);
	if (o > MAX_PAGE_ORDER)
		o = (unsigned)ilog2_ceil((ALIGN_UP(GROW_OFF + body, PAGE_SIZE) >> PAGE_SHIFT) + 1);
	if (n < GROW_MIN || n > HUGE_THRESHOLD || o > MAX_PAGE_ORDER || pcpm_nested())
		return NULL;
	struct page *h = secure_run_get(o, GROW_OFF - SECURE_LARGE_FRONT,
					ALIGN_UP(GROW_OFF + body + SECURE_CANARY_CHECK, PAGE_SIZE));
	if (!h)
		return NULL;
	char *base = page_address(h), *p = base + GROW_OFF;
	char *gp = base + ALIGN_UP(GROW_OFF + n, PAGE_SIZE);
	size_t off = GROW_OFF;
	if (gp < run_last(h) && !pcpm_os_guard_install(gp, PAGE_SIZE)) {
		/* no guard to move: the block's end against the run's (the run is clean) */
		off = ((size_t)(run_last(h) - base) - body) & ~(size_t)15;
		p = base + off;
	} else {
		h->flags |= PG_SECURE_GROW;
	}
	h->req_size = n | (uint64_t)off << 32;
	arm_run(p, n, off, secure_canary(base), secure_run_guard(h));
	return p;
}
