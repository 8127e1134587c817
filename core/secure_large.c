/*
 * secure_large.c - the secure front end's large blocks, huge mappings and zero-size blocks
 * (see secure_mode.h).  hardened_malloc's large allocations are the model: the block's end
 * against a guard page, nothing of it reused at once.
 *
 * A page run holds | canary ... | size word | canary word | the block | < 16 B canary | guard |
 * with the block's end against the guard page (its start 16-byte aligned, or to align): an
 * overflow faults at once or is caught by the short canary at free; the 64 bytes before the
 * block (header included) catch underflows.  The run's head descriptor keeps the request
 * size and the block's offset in the run (req_size = n | offset << 32).  A freed run of a
 * block of SECURE_DROP_MIN or more gets guard markers over its whole length
 * (MADV_GUARD_INSTALL: the pages are dropped, so any access faults and the memory reads as
 * zero when it comes back), a smaller one is zeroed; both wait in a FIFO quarantine (LQ_SLOTS
 * runs, LQ_BYTES of address space) before they go back to the zone; a second free finds them
 * there (double free).  Huge mappings keep the block at the mapping's
 * start with the canary up to a guard page, and go through huge_quarantine.c when freed.
 * Calls large, huge, the quarantine of huge mappings and os.c.  Thread-safety: the run
 * quarantine is under lq_lock (no other lock held); signal handlers skip it.
 */
#include "early.h"
#include "huge_quarantine.h"
#include "large.h"
#include "nested.h"
#include "secure_mode.h"

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

/* The guard page after the block p of n bytes (the block ends in the page before it). */
static inline char *guard_of(const char *p, size_t n)
{
	return (char *)ALIGN_UP((uintptr_t)p + ALIGN_UP(n, 16), PAGE_SIZE);
}

/* The head descriptor of the page run holding the block p (p is at most a page and
 * SECURE_LARGE_FRONT bytes into its run), or NULL. */
static inline struct page *run_of(const void *p)
{
	struct page *h = pcpm_page_of(p);
	if (h && h->state == PG_LARGE && p == page_address(h))
		return h; /* a block at its run's start (aligned to more than a page) */
	h = pcpm_page_of((const char *)p - SECURE_LARGE_FRONT);
	return h && h->state == PG_LARGE ? h : NULL;
}

/* ---- huge mappings --------------------------------------------------------------------- */

/* The last page of the mapping is a guard (no VMA split where the kernel has
 * MADV_GUARD_INSTALL, so mremap still sees one mapping), the bytes between the request and
 * the guard carry the canary; a cached mapping handed out again is cleared. */
static void *huge_arm(void *p, size_t size)
{
	if (!p)
		return NULL;
	struct region *r = pcpm_region_of(p);
	r->req = size;
	pcpm_os_guard_install(huge_base(r) + r->len - PAGE_SIZE, PAGE_SIZE);
	if (r->dirty)
		memset(p, 0, size);
	secure_fill_canary(huge_base(r) + size, huge_base(r) + r->len - PAGE_SIZE);
	return p;
}

/* ---- the quarantine of page runs ------------------------------------------------------ */

/* Freed runs for blocks from this size on are dropped and guarded whole (any access faults);
 * smaller ones are zeroed and stay resident in the quarantine (no page faults at reuse: the
 * dropping cost xthread-large, 8-32 KiB blocks, x14). */
#define SECURE_DROP_MIN (256UL << 10)
#define LQ_SLOTS 16
#define LQ_BYTES (64UL << 20)
static pcpm_lock_t lq_lock = PCPM_LOCK_INIT;
static struct page *lq[LQ_SLOTS]; /* a FIFO ring, under lq_lock */
static unsigned lq_next;	  /* the oldest entry / the next slot */
static size_t lq_bytes;

static size_t run_bytes(struct page *h)
{
	return (size_t)h->npages << PAGE_SHIFT;
}

/* A run out of the quarantine: guard markers off (over the whole run when it was dropped:
 * the pages read as zero; else its guard page), to the zone. */
static void lq_release(struct page *h)
{
	size_t n = (uint32_t)h->req_size;
	char *base = page_address(h), *p = base + (h->req_size >> 32);
	if (n >= SECURE_DROP_MIN)
		pcpm_os_guard_remove(base, run_bytes(h));
	else
		pcpm_os_guard_remove(p == base ? p + ALIGN_UP(n, PAGE_SIZE) : guard_of(p, n), PAGE_SIZE);
	h->flags &= (uint8_t)~PG_SECURE_QUAR;
	large_free(h);
}

/* Puts the guarded run h in the quarantine; releases what falls out (lock not held). */
static void lq_put(struct page *h)
{
	struct page *out[LQ_SLOTS + 1];
	unsigned nout = 0;
	pcpm_lock(&lq_lock);
	if (lq[lq_next]) {
		out[nout++] = lq[lq_next];
		lq_bytes -= run_bytes(lq[lq_next]);
	}
	lq[lq_next] = h;
	lq_bytes += run_bytes(h);
	lq_next = (lq_next + 1) % LQ_SLOTS;
	for (unsigned i = 1; i < LQ_SLOTS && lq_bytes > LQ_BYTES; i++) {
		unsigned k = (lq_next + i - 1) % LQ_SLOTS; /* oldest first, h last */
		if (lq[k] && lq[k] != h) {
			out[nout++] = lq[k];
			lq_bytes -= run_bytes(lq[k]);
			lq[k] = NULL;
		}
	}
	pcpm_unlock(&lq_lock);
	for (unsigned i = 0; i < nout; i++)
		lq_release(out[i]);
}

void secure_large_drain(void)
{
	struct page *out[LQ_SLOTS];
	unsigned nout = 0;
	pcpm_lock(&lq_lock);
	for (unsigned k = 0; k < LQ_SLOTS; k++) {
		if (lq[k])
			out[nout++] = lq[k];
		lq[k] = NULL;
	}
	lq_bytes = 0;
	pcpm_unlock(&lq_lock);
	for (unsigned i = 0; i < nout; i++)
		lq_release(out[i]);
}

/* The marks of a run's block p of n bytes at offset off, its guard page at gp: the front
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

/* ---- page runs ------------------------------------------------------------------------- */

/* A block aligned to more than a page: at the start of its run (offset 0, no header; the
 * descriptor has its size), the canary from its end to the guard page after its last page. */
static void *run_alloc_at_start(size_t n, size_t align, bool *run)
{
	size_t dlen = ALIGN_UP(n, PAGE_SIZE);
	char *p = large_alloc(dlen + PAGE_SIZE, align, run);
	if (!p)
		return NULL;
	struct page *h = pcpm_page_of(p);
	if (h->flags & PG_DIRTY)
		memset(p, 0, n);
	h->flags |= PG_DIRTY;
	h->req_size = n;
	uint64_t c = secure_canary(p);
	char *gp = p + dlen;
	canary_bytes(c, p + n, MIN(gp, p + n + SECURE_CANARY_CHECK));
	if (gp - (p + n) > SECURE_CANARY_CHECK)
		secure_store64(gp - 8, c);
	pcpm_os_guard_install(gp, PAGE_SIZE);
	return p;
}

void *secure_large_alloc(size_t n, size_t align, bool *run)
{
	*run = false;
	if (align < 16)
		align = 16;
	size_t body = ALIGN_UP(n, 16);
	if (body + SECURE_LARGE_FRONT + 2 * PAGE_SIZE + (align > PAGE_SIZE ? align : 0) >
		    HUGE_THRESHOLD ||
	    unlikely(pcpm_nested())) {
		size_t hlen = ALIGN_UP(n, PAGE_SIZE) + PAGE_SIZE;
		if (pcpm_nested())
			return huge_arm(huge_alloc_nested(hlen, align), n);
		/* mappings handlers freed: quarantined, not cached where their old pointers point */
		huge_drain_deferred(huge_free_quarantined);
		return huge_arm(huge_alloc(hlen, align), n);
	}
	if (align > PAGE_SIZE)
		return run_alloc_at_start(n, align, run);
	/* the block's offset in the run: its end at the guard, its start aligned, at least
	 * SECURE_LARGE_FRONT bytes and less than a page and SECURE_LARGE_FRONT in */
	size_t dlen = ALIGN_UP(body + SECURE_LARGE_FRONT, PAGE_SIZE);
	size_t off = (dlen - body) & ~(align - 1);
	if (off < SECURE_LARGE_FRONT) {
		dlen += PAGE_SIZE;
		off += PAGE_SIZE;
	}
	char *base = large_alloc(dlen + PAGE_SIZE, 0, run);
	if (!base)
		return NULL;
	struct page *h = pcpm_page_of(base);
	char *p = base + off, *gp = base + dlen;
	uint64_t c = secure_canary(base);
	if (h->flags & PG_DIRTY)
		memset(p, 0, n);
	h->flags |= PG_DIRTY;
	h->req_size = n | (uint64_t)off << 32;
	arm_run(p, n, off, c, gp);
	pcpm_os_guard_install(gp, PAGE_SIZE);
	return p;
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
	if (off && (secure_load64(p - 16) != secure_size_word(p, n, off) ||
		    secure_load64(p - 8) != c || !canary_bytes_ok(c, p - SECURE_LARGE_FRONT, p - 16)))
		secure_underflow(p, call);
	char *gp = off ? guard_of(p, n) : p + ALIGN_UP(n, PAGE_SIZE);
	if (!canary_bytes_ok(c, p + n, MIN(gp, p + n + SECURE_CANARY_CHECK)) ||
	    (gp - (p + n) > SECURE_CANARY_CHECK && secure_load64(gp - 8) != c))
		secure_overflow(p, call);
	if (size != SECURE_NO_SIZE && size != n)
		secure_size_mismatch(p, size, n, call);
	return n;
}

void secure_large_free(void *ptr, const char *call, size_t size)
{
	char *p = ptr;
	struct page *pg = pcpm_page_of(p);
	if (pg) {
		struct page *h = run_of(p);
		if (!h || ((uintptr_t)p & 15))
			pcpm_bad_page_pointer(call, p, pg);
		size_t n = run_check(p, h, call, size);
		tcache_count(true);
		char *base = page_address(h);
		char *gp = p == base ? p + ALIGN_UP(n, PAGE_SIZE) : guard_of(p, n);
		if (unlikely(pcpm_nested())) { /* no lock: straight back, guard off */
			pcpm_os_guard_remove(gp, PAGE_SIZE);
			large_free_nested(h);
			return;
		}
		if (n < SECURE_DROP_MIN) {
			/* resident in the quarantine, its written bytes zeroed (a read after
			 * free finds nothing; the next malloc of the pages clears them again) */
			memset(p == base ? p : p - SECURE_LARGE_FRONT, 0,
			       n + (p == base ? 0 : SECURE_LARGE_FRONT));
			h->flags |= PG_SECURE_QUAR;
			lq_put(h);
			return;
		}
		/* the whole run guarded: its pages dropped, every access faults */
		if (!pcpm_os_guard_install(base, (size_t)(gp - base))) {
			memset(base, 0, (size_t)(gp - base)); /* (no guard: at least no data left) */
			pcpm_os_guard_remove(gp, PAGE_SIZE);
			large_free(h);
			return;
		}
		h->flags |= PG_SECURE_QUAR;
		lq_put(h);
		return;
	}
	struct region *r = pcpm_is_early(p) ? NULL : pcpm_region_of(p);
	if (r && r->kind == REGION_HUGE && huge_base(r) == p) {
		if (huge_state(r) != HUGE_LIVE)
			secure_double_free(p, call);
		secure_check_canary(p, huge_base(r) + r->req, huge_base(r) + r->len - PAGE_SIZE, call);
		if (size != SECURE_NO_SIZE && size != r->req)
			secure_size_mismatch(p, size, r->req, call);
		tcache_count(true);
		if (unlikely(pcpm_nested())) {
			/* deferred, then cached like any mapping: no guard page inside it */
			pcpm_os_guard_remove(huge_base(r) + r->len - PAGE_SIZE, PAGE_SIZE);
			huge_free_nested(r);
			return;
		}
		huge_drain_deferred(huge_free_quarantined);
		huge_free_quarantined(r);
		zone_note_free(); /* the decay worker, asleep, purges the cached mapping */
		return;
	}
	dfl_free_slow(p, NULL, call); /* an early block, or no block: abort */
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
	struct region *r = pcpm_region_of(p);
	if (!r || r->kind != REGION_HUGE || huge_base(r) != p)
		pcpm_bad_pointer(call, p);
	if (huge_state(r) != HUGE_LIVE)
		secure_double_free(p, call);
	return r->req;
}

void *secure_large_resize(void *ptr, size_t size)
{
	char *p = ptr;
	struct page *h = pcpm_page_of(p) ? run_of(p) : NULL;
	if (!h || pcpm_nested())
		return NULL;
	size_t n = run_check(p, h, "realloc", SECURE_NO_SIZE);
	char *base = page_address(h);
	if (p == base)
		return NULL; /* aligned to more than a page: moves */
	/* stays when the run's pages hold the new size and its guard page (malloc's
	 * placement: the end against the guard); the block moves inside the run, the guard
	 * with its end, and the pages it keeps need no fault */
	size_t body = ALIGN_UP(size, 16);
	size_t dlen = ALIGN_UP(body + SECURE_LARGE_FRONT, PAGE_SIZE), off = dlen - body;
	if (off < SECURE_LARGE_FRONT) {
		dlen += PAGE_SIZE;
		off += PAGE_SIZE;
	}
	if (dlen + PAGE_SIZE > run_bytes(h))
		return NULL;
	char *q = base + off, *gp = guard_of(p, n), *ngp = base + dlen;
	uint64_t c = secure_canary(base);
	if (ngp != gp) {
		pcpm_os_guard_remove(gp, PAGE_SIZE);
		if (ngp > gp && !(h->flags & PG_DIRTY))
			h->flags |= PG_DIRTY;
	}
	memmove(q, p, MIN(n, size));
	if (size > n)
		memset(q + n, 0, size - n);
	h->req_size = size | (uint64_t)off << 32;
	arm_run(q, size, off, c, ngp);
	if (ngp != gp)
		pcpm_os_guard_install(ngp, PAGE_SIZE);
	return q;
}
