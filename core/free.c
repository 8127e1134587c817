/*
 * free.c - the default mode's free paths below the inline fast path (free_fast.h): classifies a
 * pointer that is not a thread-cacheable slab object - a slab object with the key word set
 * (double-free check), a page run, an early block, a huge mapping - and frees it or aborts
 * with one line naming the call and the address.  Also the usable size of a block, which
 * classifies the same way.  Calls tcache, slab, large, huge and the early area.
 */
#include "free.h"
#include "early.h"
#include "large.h"

void pcpm_bad_pointer(const char *call, const void *p)
{
	pcpm_fatal("%s(): invalid pointer %p", call, p);
}

void pcpm_double_free(const char *call, const void *p)
{
	pcpm_fatal("%s(): double free %p", call, p);
}

void pcpm_bad_size(const char *call, const void *p, size_t size, size_t usable)
{
	pcpm_fatal("%s(): size %zu for %p, a block of %zu bytes", call, size, p, usable);
}

/* Is the page inside a free block, on a pcp list or in the buddy free_area?  A free block's
 * head carries its order; pg is inside it when one of its aligned ancestors is such a head.
 * Racy without the zone lock: only used to word an abort message. */
static bool page_in_free_block(const void *p)
{
	struct arena *a = pcpm_arena_of(p); /* (p's page may be a tail: no arena byte) */
	size_t pfn = (size_t)((uintptr_t)p - (uintptr_t)a->base) >> PAGE_SHIFT;
	for (unsigned o = 0; o <= MAX_PAGE_ORDER; o++) {
		struct page *h = a->desc + (pfn & ~((1UL << o) - 1));
		if ((h->state == PG_BUDDY || h->state == PG_PCP) && h->order >= o)
			return true;
	}
	return false;
}

/* p is in arena memory but is no live block: a page-aligned pointer into a free block (back
 * on a pcp list or in the zone, merged with its buddies or not) is a double free, anything
 * else an invalid pointer. */
void pcpm_bad_page_pointer(const char *call, const void *p, struct page *pg)
{
	if (!((uintptr_t)p & (PAGE_SIZE - 1)) && pg->state != PG_SLAB && pg->state != PG_LARGE &&
	    page_in_free_block(p))
		pcpm_double_free(call, p);
	pcpm_bad_pointer(call, p);
}

/* Classifies a pointer that is not a slab object: frees it, or aborts. */
void dfl_free_slow(void *p, struct page *pg, const char *call)
{
	if (pg) {
		if (pg->state == PG_LARGE && p == page_address(pg)) {
			tcache_count(true);
			if (unlikely(pcpm_nested()))
				large_free_nested(pg);
			else
				large_free(pg);
			return;
		}
		pcpm_bad_page_pointer(call, p, pg);
	}
	if (pcpm_is_early(p)) {
		pcpm_early_free(p, call);
		return;
	}
	struct region *r = pcpm_region_of(p);
	if (r && r->kind == REGION_HUGE && huge_base(r) == p) {
		if (huge_state(r) != HUGE_LIVE)
			pcpm_double_free(call, p);
		tcache_count(true);
		if (unlikely(pcpm_nested())) {
			huge_free_nested(r);
			return;
		}
		huge_drain_deferred(huge_free);
		huge_free(r);
		zone_note_free(); /* the decay worker, asleep, purges the cached mapping */
		return;
	}
	if (!pcpm_owns(p)) { /* glibc's block (RTLD_DEEPBIND plugin, __libc_malloc) */
		pcpm_foreign_free(p, call);
		return;
	}
	pcpm_bad_pointer(call, p);
}

void dfl_free_small(void *p, unsigned bin8)
{
	tcache_free_slow(p, bin8 / 2);
}

/* The key word matched: confirm or rule out a double free, then free normally. */
void dfl_free_slab_checked(void *p, const char *call)
{
	PCPM_INSIDE_BEGIN();
	struct page *head = pcpm_page_of(p)->slab_head; /* p is a validated slab object */
	tcache_check_double_free(p, head, call);
	if (!tcache_push(p, head->cls))
		tcache_free_slow(p, head->cls);
	PCPM_INSIDE_END();
}

/* Frees the slab object p of the slab whose head descriptor is head: validation, then the
 * thread cache. */
static inline __attribute__((always_inline)) void free_slab(void *p, struct page *head,
							    const char *call)
{
	if (unlikely(slab_obj_index(head, p) < 0))
		pcpm_bad_pointer(call, p);
	__pcpm_free_push(p, tcache_self(), head->bin8, call, dfl_free_small,
			 dfl_free_slab_checked);
}

void dfl_free_generic(void *p, const char *call)
{
	if (!p)
		return;
	PCPM_INSIDE_BEGIN();
	struct page *pg = pcpm_page_of(p);
	if (pg && pg->state == PG_SLAB)
		free_slab(p, pg->slab_head, call);
	else
		dfl_free_slow(p, pg, call);
	PCPM_INSIDE_END();
}

size_t dfl_live_size(const void *p)
{
	if (!p)
		return 0;
	struct page *pg = pcpm_page_of(p);
	if (pg && pg->state == PG_SLAB) {
		struct page *head = pg->slab_head;
		if (slab_obj_index(head, p) < 0 || ((uintptr_t *)p)[1] == PCPM_FREE_KEY)
			return 0;
		return slab_cache_of(head)->size;
	}
	if (pg)
		return pg->state == PG_LARGE && p == page_address(pg)
			       ? (size_t)pg->npages << PAGE_SHIFT
			       : 0;
	if (pcpm_is_early(p))
		return pcpm_early_live_size(p);
	struct region *r = pcpm_region_of(p);
	if (r && r->kind == REGION_HUGE && huge_base(r) == p && huge_state(r) == HUGE_LIVE)
		return r->len;
	return 0;
}

void dfl_check_size(const void *p, size_t size, const char *call)
{
	size_t usable = dfl_live_size(p);
	if (unlikely(usable && size > usable))
		pcpm_bad_size(call, p, size, usable);
}

void dfl_free_sized(void *p, size_t size, const char *call)
{
	dfl_check_size(p, size, call);
	dfl_free_generic(p, call);
}

size_t dfl_usable_size(const void *p, const char *call)
{
	struct page *pg = pcpm_page_of(p);
	if (pg) {
		if (pg->state == PG_SLAB) {
			struct page *head = pg->slab_head;
			if (slab_obj_index(head, p) < 0)
				pcpm_bad_pointer(call, p);
			return slab_cache_of(head)->size;
		}
		if (pg->state == PG_LARGE && p == page_address(pg))
			return (size_t)pg->npages << PAGE_SHIFT;
		pcpm_bad_pointer(call, p);
	}
	if (pcpm_is_early(p))
		return pcpm_early_usable(p, call);
	struct region *r = pcpm_region_of(p);
	if (!r && !pcpm_owns(p))
		return pcpm_foreign_usable(p, call);
	if (!r || r->kind != REGION_HUGE || huge_base(r) != p || huge_state(r) != HUGE_LIVE)
		pcpm_bad_pointer(call, p);
	return r->len;
}
