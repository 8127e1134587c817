/*
 * secure_mode.c - the secure front end (PCPMALLOC_SECURE=1; the checks are secure.h's): what
 * api.c calls in secure mode instead of the default functions.  Small blocks take a slot of
 * at least n + 8 bytes with a canary and a trailer, come from the thread's own stacks (sbins)
 * or whole, randomly ordered slabs (SLAB_FREELIST_RANDOM) and are junk-filled when freed;
 * page runs of 64 KiB and more and huge mappings end in a guard page; freed huge mappings go
 * through the quarantine (huge_quarantine.c).  Calls the default functions for what has no
 * check of its own (early blocks, foreign pointers, calloc's clearing), tcache, slab, large,
 * huge, the quarantine, the periodic work and the address-space reclaim.
 */
#include "alloc_default.h"
#include "early.h"
#include "frontend.h"
#include "huge_quarantine.h"
#include "large.h"
#include "secure.h"
#include "topology.h"
#include "vmstat.h"

#include <errno.h>
#include <string.h>

/* ---- small blocks: the thread's own stacks, checks inlined --------------------------- */

/* Pops an object of class cls from the thread's secure stack and arms it as a block of n
 * bytes; NULL when the stack is empty or a signal handler runs.  Inline and free of calls
 * on the common path: no pcpm_inside flag needed (a signal handler recognises pcpmalloc's
 * code by the program counter).  The full junk check comes on one pop in SECURE_JUNK_SAMPLE
 * (per thread: the cache's malloc counter). */
static inline __attribute__((always_inline)) void *secure_pop_small(unsigned cls, size_t n,
								     const char *call)
{
	struct tcache *tc = tcache_self();
	struct tcache_bin *b = &tc->sbins[cls];
	if (unlikely(!b->head || pcpm_nested()))
		return NULL;
	void *p = tcache_bin_pop(tc, b);
	return __secure_arm_small(p, pcpm_class_size[cls], n,
				  (unsigned)tc->malloc_calls % SECURE_JUNK_SAMPLE, call);
}

/* An unarmed object of class cls: the thread's secure stack (refilled from the slab), or one
 * object from the slab when the thread has no cache; NULL when memory is exhausted. */
static void *small_object(unsigned cls)
{
	if (unlikely(pcpm_nested()))
		return slab_alloc_nested(cls);
	tcache_ensure();
	struct tcache *tc = tcache_self();
	if (tcache_mode_ready(tc, cls)) {
		struct tcache_bin *sb = &tc->sbins[cls];
		if (!sb->head && !tcache_mode_refill(tc, cls))
			return NULL;
		return tcache_bin_pop(tc, sb);
	}
	return tcache_alloc_slow(cls); /* no cache: one object straight from the slab */
}

/* A validated, live small block p of class cls being freed: checks, junk, the stack. */
static void __free_small(void *p, unsigned cls)
{
	__secure_free_small(p, pcpm_class_size[cls], "free");
	if (unlikely(pcpm_nested())) {
		((uintptr_t *)p)[1] = pcpm_free_key;
		slab_free_nested(p, pcpm_page_of(p)->slab_head);
		return;
	}
	tcache_ensure();
	struct tcache *tc = tcache_self();
	if (tcache_mode_ready(tc, cls)) {
		if (!tc->sbins[cls].avail)
			tcache_mode_flush(tc, cls);
		tcache_bin_push(tc, &tc->sbins[cls], p);
		return;
	}
	tcache_free_slow(p, cls); /* no cache: straight to the slab */
}

static PCPM_NOINLINE void free_small_inside(void *p, unsigned cls)
{
	PCPM_INSIDE_BEGIN();
	__free_small(p, cls);
	PCPM_INSIDE_END();
}

void secure_free_small(void *p, unsigned cls)
{
	/* room on the thread's own stack: checks, junk, push - no lock, no call, so no
	 * pcpm_inside flag either; the rest in a function of its own */
	struct tcache *tc = tcache_self();
	struct tcache_bin *b = &tc->sbins[cls];
	if (likely(b->avail && !pcpm_nested())) {
		__secure_free_small(p, pcpm_class_size[cls], "free");
		tcache_bin_push(tc, b, p);
		return;
	}
	free_small_inside(p, cls);
}

void secure_free_slab_checked(void *p, struct page *head, const char *call)
{
	PCPM_INSIDE_BEGIN();
	tcache_check_double_free(p, head, call);
	__free_small(p, head->cls);
	PCPM_INSIDE_END();
}

/* ---- large blocks and huge mappings: canary up to a guard page ----------------------- */

/* The last page of the mapping is a guard (no VMA split where the kernel has
 * MADV_GUARD_INSTALL, so mremap still sees one mapping), the bytes between the request and
 * the guard carry the canary. */
static void *huge_arm(void *p, size_t size)
{
	if (!p)
		return NULL;
	struct region *r = pcpm_region_of(p);
	r->req = size;
	pcpm_os_guard_install(huge_base(r) + r->len - PAGE_SIZE, PAGE_SIZE);
	secure_fill_canary(huge_base(r) + size, huge_base(r) + r->len - PAGE_SIZE);
	return p;
}

/* A page run or huge mapping of at least req bytes with the guard page and canary. */
static void *large_alloc_checked(size_t req, size_t align, bool *run)
{
	*run = false;
	size_t hlen = ALIGN_UP(req, PAGE_SIZE) + PAGE_SIZE;
	if (unlikely(pcpm_nested()))
		return huge_arm(huge_alloc_nested(hlen, align), req);
	/* mappings handlers freed: quarantined, not cached where their old pointers point */
	huge_drain_deferred(huge_free_quarantined);
	size_t size = req + (req >= SECURE_GUARD_MIN ? PAGE_SIZE : 0); /* room for the guard */
	if (size > HUGE_THRESHOLD || align > HUGE_THRESHOLD)
		return huge_arm(huge_alloc(hlen, align), req);
	char *p = large_alloc(size, align, run);
	if (!p)
		return NULL;
	/* guard page right after the request's last page; canary up to it */
	struct page *pg = pcpm_page_of(p);
	size_t gp = ALIGN_UP(req, PAGE_SIZE);
	pg->req_size = req;
	pg->flags |= PG_DIRTY;
	secure_fill_canary(p + req, p + gp);
	if (req >= SECURE_GUARD_MIN)
		pcpm_os_guard_install(p + gp, PAGE_SIZE);
	return p;
}

/* A large block being freed: canary check, guard page off, junk fill. */
static void large_release(char *p, struct page *pg, const char *call)
{
	size_t req = pg->req_size, gp = ALIGN_UP(req, PAGE_SIZE);
	secure_check_canary(p, p + req, p + gp, call);
	if (req >= SECURE_GUARD_MIN)
		pcpm_os_guard_remove(p + gp, PAGE_SIZE);
	/* junk over the first SECURE_JUNK_MAX bytes: enough to spoil stale pointers and
	 * headers a dangling reader would use, without a pass over the whole block */
	memset(p, SECURE_JUNK, MIN(req, (size_t)SECURE_JUNK_MAX));
}

/*
 * realloc of the large block p to size bytes (SLAB_MAX_SIZE < size): in place when the run
 * can shrink or grow there (large_resize), as the default mode does, so a growing buffer is
 * not copied at every step.  The old canary is checked, the guard page moves only when the
 * request's last page changes, the canary is rewritten up to the new last page.  NULL when
 * the run cannot stay (the caller moves the block).
 */
static void *large_realloc(char *p, struct page *pg, size_t size)
{
	size_t req = pg->req_size, gp = ALIGN_UP(req, PAGE_SIZE), ngp = ALIGN_UP(size, PAGE_SIZE);
	secure_check_canary(p, p + req, p + gp, "realloc");
	bool guard = req >= SECURE_GUARD_MIN, nguard = size >= SECURE_GUARD_MIN;
	size_t nnp = (ngp >> PAGE_SHIFT) + (nguard ? 1 : 0);
	if ((nnp << PAGE_SHIFT) > HUGE_THRESHOLD)
		return NULL;
	bool same = guard && nguard && gp == ngp;
	if (nnp > pg->npages && !large_resize(pg, nnp))
		return NULL;
	if (guard && !same)
		pcpm_os_guard_remove(p + gp, PAGE_SIZE);
	if (nnp <= pg->npages)
		large_resize(pg, nnp); /* shrinking: cannot fail */
	pg->req_size = size;
	secure_fill_canary(p + size, p + ngp);
	if (nguard && !same)
		pcpm_os_guard_install(p + ngp, PAGE_SIZE);
	return p;
}

/* ---- malloc ---------------------------------------------------------------------------- */

/* From a signal handler (kernel-pcp.md §12.2): a slab object when its cache lock is free
 * and a partial slab has room, else a mapping of its own.  align: power of two. */
static void *malloc_nested(size_t n, size_t align)
{
	void *p = NULL;
	if (n > PTRDIFF_MAX)
		goto out;
	size_t need = n + SECURE_TRAILER;
	if (align <= 16 && need <= SLAB_MAX_SIZE) {
		unsigned c = size_to_class(need);
		p = slab_alloc_nested(c);
		if (p) {
			secure_arm_small(p, pcpm_class_size[c], n, "malloc");
			tcache_count(false);
			goto out;
		}
	}
	bool run;
	p = large_alloc_checked(MAX(n, 1), align, &run);
	if (p)
		tcache_count(false);
out:
	if (!p)
		errno = ENOMEM;
	return p;
}

static void *__malloc(size_t n)
{
	if (unlikely(pcpm_nested()))
		return malloc_nested(n, 0);
	tcache_ensure();
	pcpm_vmstat_maybe_start();
	void *p;
	for (bool retried = false;; retried = true) {
		if (n <= SLAB_MAX_SIZE - SECURE_TRAILER) {
			unsigned c = size_to_class(n + SECURE_TRAILER);
			p = small_object(c);
			if (p)
				secure_arm_small(p, pcpm_class_size[c], n, "malloc");
		} else if (n > PTRDIFF_MAX) {
			p = NULL;
		} else {
			bool run;
			p = large_alloc_checked(n, 0, &run);
			if (p)
				pcpm_count_malloc(run);
		}
		if (likely(p) || retried || n > PTRDIFF_MAX || !pcpm_reclaim_address_space())
			break;
	}
	if (unlikely(!p)) {
		errno = ENOMEM;
		return NULL;
	}
	pcpm_vmstat_maybe_run();
	pcpm_topology_maybe_discover();
	return p;
}

static PCPM_NOINLINE void *malloc_inside(size_t n)
{
	PCPM_INSIDE_BEGIN();
	void *p = __malloc(n);
	PCPM_INSIDE_END();
	return p;
}

void *secure_malloc(size_t n)
{
	void *p;
	/* small blocks straight from the thread's own stack when it has one; the rest in a
	 * function of its own, so this part needs no stack frame */
	if (likely(n <= SLAB_MAX_SIZE - SECURE_TRAILER) &&
	    likely(p = secure_pop_small(size_to_class(n + SECURE_TRAILER), n, "malloc")))
		return p;
	return malloc_inside(n);
}

void *secure_calloc(size_t nmemb, size_t size)
{
	size_t n;
	if (unlikely(__builtin_mul_overflow(nmemb, size, &n))) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = secure_malloc(n);
	return p ? dfl_calloc_clear(p, n) : NULL;
}

/* ---- aligned --------------------------------------------------------------------------- */

static void *aligned_core(size_t align, size_t size)
{
	if (size > PTRDIFF_MAX || align > PTRDIFF_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	size_t need = MAX(size + SECURE_TRAILER, align);
	if (need <= SLAB_MAX_SIZE) {
		for (unsigned c = size_to_class(need); c < NR_SIZE_CLASSES; c++) {
			if (pcpm_class_size[c] & (align - 1))
				continue;
			struct kmem_cache *s = kmem_cache_of(c);
			if (align <= (PAGE_SIZE << s->order)) {
				void *p = small_object(c);
				if (!p)
					errno = ENOMEM;
				else
					secure_arm_small(p, s->size, size, "memalign");
				return p;
			}
		}
	}
	bool run;
	void *p = large_alloc_checked(MAX(size, SLAB_MAX_SIZE + 1), align, &run);
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	pcpm_count_malloc(run);
	return p;
}

void *secure_aligned_alloc(size_t align, size_t size)
{
	/* small blocks from the thread's own stack: the first class of at least size + 8
	 * bytes whose objects are multiples of align (slabs are page aligned) */
	if (size <= SLAB_MAX_SIZE - SECURE_TRAILER && align <= PAGE_SIZE) {
		size_t need = MAX(size + SECURE_TRAILER, align);
		for (unsigned cls = size_to_class(need); cls < NR_SIZE_CLASSES; cls++) {
			if (pcpm_class_size[cls] & (align - 1))
				continue;
			void *p = secure_pop_small(cls, size, "memalign");
			if (p)
				return p;
			break;
		}
	}
	PCPM_INSIDE_BEGIN();
	void *p = unlikely(pcpm_nested()) ? malloc_nested(size, align) : aligned_core(align, size);
	PCPM_INSIDE_END();
	return p;
}

/* ---- free, usable size ----------------------------------------------------------------- */

/* Classifies a pointer that is not a slab object: checks and frees it, or aborts. */
static void free_slow(void *p, struct page *pg, const char *call)
{
	if (pg) {
		if (pg->state == PG_LARGE && p == page_address(pg)) {
			tcache_count(true);
			large_release(p, pg, call);
			if (unlikely(pcpm_nested()))
				large_free_nested(pg);
			else
				large_free(pg);
			return;
		}
		pcpm_bad_page_pointer(call, p, pg);
	}
	struct region *r = pcpm_is_early(p) ? NULL : pcpm_region_of(p);
	if (r && r->kind == REGION_HUGE && huge_base(r) == p) {
		if (huge_state(r) != HUGE_LIVE)
			pcpm_double_free(call, p);
		tcache_count(true);
		secure_check_canary(p, huge_base(r) + r->req, huge_base(r) + r->len - PAGE_SIZE, call);
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
	dfl_free_slow(p, pg, call); /* an early block, or no block: abort */
}

void secure_free_generic(void *p, const char *call)
{
	if (!p)
		return;
	PCPM_INSIDE_BEGIN();
	struct page *pg = pcpm_page_of(p);
	if (pg && pg->state == PG_SLAB) {
		struct page *head = pg->slab_head;
		if (unlikely(slab_obj_index(head, p) < 0))
			pcpm_bad_pointer(call, p);
		if (unlikely(((uintptr_t *)p)[1] == pcpm_free_key))
			tcache_check_double_free(p, head, call);
		__free_small(p, head->cls);
	} else {
		free_slow(p, pg, call);
	}
	PCPM_INSIDE_END();
}

static size_t usable_size(const void *p, const char *call)
{
	struct page *pg = pcpm_page_of(p);
	if (pg) {
		if (pg->state == PG_SLAB) {
			struct page *head = pg->slab_head;
			if (slab_obj_index(head, p) < 0)
				pcpm_bad_pointer(call, p);
			return secure_small_size(p, head->slab_cache->size, call);
		}
		if (pg->state == PG_LARGE && p == page_address(pg))
			return pg->req_size;
		pcpm_bad_pointer(call, p);
	}
	if (pcpm_is_early(p))
		return pcpm_early_usable(p, call);
	struct region *r = pcpm_region_of(p);
	if (!r || r->kind != REGION_HUGE || huge_base(r) != p || huge_state(r) != HUGE_LIVE)
		pcpm_bad_pointer(call, p);
	return r->req;
}

size_t secure_usable_size(const void *p)
{
	return usable_size(p, "malloc_usable_size");
}

void secure_trim(void)
{
	huge_drain_deferred(huge_free_quarantined);
}

/* ---- realloc --------------------------------------------------------------------------- */

static void *__realloc(void *p, size_t size)
{
	struct page *pg = pcpm_page_of(p);
	bool nested = pcpm_nested();
	if (pg && pg->state == PG_SLAB && slab_obj_index(pg->slab_head, p) >= 0) {
		struct page *head = pg->slab_head;
		if (((uintptr_t *)p)[1] == pcpm_free_key)
			tcache_check_double_free(p, head, "realloc");
		/* a small block stays when its slot still fits (canary and trailer checked and
		 * moved) */
		size_t slot = head->slab_cache->size;
		if (!nested && size <= slot - SECURE_TRAILER &&
		    (size_to_class(size + SECURE_TRAILER) == head->cls || size >= slot / 2)) {
			secure_resize_small(p, slot, size, "realloc");
			return p;
		}
	}
	if (!nested && pg && pg->state == PG_LARGE && p == page_address(pg) &&
	    size > SLAB_MAX_SIZE - SECURE_TRAILER && large_realloc(p, pg, size))
		return p;
	/* a freed page run or huge mapping: a double free, as the default mode says */
	if (pg && pg->state != PG_SLAB && (pg->state != PG_LARGE || p != page_address(pg)))
		pcpm_bad_page_pointer("realloc", p, pg);
	if (!pg && !pcpm_is_early(p)) {
		struct region *r = pcpm_region_of(p);
		if (r && r->kind == REGION_HUGE && huge_base(r) == p && huge_state(r) != HUGE_LIVE)
			pcpm_double_free("realloc", p);
	}
	/* every other realloc moves, with the checks of malloc and free */
	size_t old = usable_size(p, "realloc");
	void *q = secure_malloc(size);
	if (!q)
		return NULL;
	memcpy(q, p, MIN(old, size));
	secure_free_generic(p, "realloc");
	return q;
}

void *secure_realloc(void *p, size_t size)
{
	if (!p)
		return secure_malloc(size);
	if (size == 0) { /* glibc: realloc(p, 0) frees p and returns NULL */
		secure_free_generic(p, "realloc");
		return NULL;
	}
	if (unlikely(size > PTRDIFF_MAX)) {
		errno = ENOMEM;
		return NULL;
	}
	PCPM_INSIDE_BEGIN();
	void *q = __realloc(p, size);
	PCPM_INSIDE_END();
	return q;
}
