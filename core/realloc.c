/*
 * realloc.c - the default mode's realloc: a slab object stays when its class still fits, a
 * page run shrinks or grows in place (large_resize), a huge mapping grows or shrinks with
 * mremap, an early block stays while it fits; everything else moves (malloc, copy, free).
 * Calls the default malloc and free (alloc.h, free.h), large, huge and the early area.
 */
#include "alloc.h"
#include "free.h"
#include "realloc.h"
#include "early.h"
#include "large.h"

#include <errno.h>
#include <string.h>

static void *realloc_move(void *p, size_t old_usable, size_t size)
{
	void *q = dfl_malloc(size);
	if (!q)
		return NULL;
	memcpy(q, p, MIN(old_usable, size));
	dfl_free(p, "realloc");
	return q;
}

/* p != NULL, 0 < size <= PTRDIFF_MAX (api.c's pcpm_realloc checked) */
static void *__realloc(void *p, size_t size)
{
	struct page *pg = pcpm_page_of(p);
	if (unlikely(pcpm_nested())) {
		/* a signal handler: every realloc moves, with the checks of malloc and free */
		if (pg && pg->state == PG_SLAB && slab_obj_index(pg->slab_head, p) >= 0 &&
		    ((uintptr_t *)p)[1] == PCPM_FREE_KEY)
			tcache_check_double_free(p, pg->slab_head, "realloc");
		/* a freed page run or huge mapping: a double free, as the default mode says */
		if (pg && pg->state != PG_SLAB && (pg->state != PG_LARGE || p != page_address(pg)))
			pcpm_bad_page_pointer("realloc", p, pg);
		if (!pg) {
			struct region *r = pcpm_region_of(p);
			if (r && r->kind == REGION_HUGE && huge_base(r) == p && huge_state(r) != HUGE_LIVE)
				pcpm_double_free("realloc", p);
		}
		return realloc_move(p, dfl_usable_size(p, "realloc"), size);
	}
	if (pg && pg->state == PG_SLAB) {
		struct page *head = pg->slab_head;
		if (slab_obj_index(head, p) < 0)
			pcpm_bad_pointer("realloc", p);
		if (((uintptr_t *)p)[1] == PCPM_FREE_KEY)
			tcache_check_double_free(p, head, "realloc");
		size_t usable = slab_cache_of(head)->size;
		/* same class, or shrinking by less than half: stay */
		if (size <= usable && (size > SLAB_MAX_SIZE || size_to_class(size) == head->cls ||
				       size >= usable / 2))
			return p;
		return realloc_move(p, usable, size);
	}
	if (pg) {
		if (pg->state != PG_LARGE || p != page_address(pg))
			pcpm_bad_page_pointer("realloc", p, pg);
		size_t usable = (size_t)pg->npages << PAGE_SHIFT;
		size_t nnp = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
		if (size > SLAB_MAX_SIZE && size <= HUGE_THRESHOLD && large_resize(pg, nnp))
			return p;
		return realloc_move(p, usable, size);
	}
	if (pcpm_is_early(p)) {
		size_t usable = pcpm_early_usable(p, "realloc");
		return size <= usable ? p : realloc_move(p, usable, size);
	}
	struct region *r = pcpm_region_of(p);
	if (!r && !pcpm_owns(p)) /* glibc's block stays glibc's */
		return pcpm_foreign_realloc(p, size);
	if (!r || r->kind != REGION_HUGE || huge_base(r) != p)
		pcpm_bad_pointer("realloc", p);
	if (huge_state(r) == HUGE_CACHED)
		pcpm_double_free("realloc", p);
	if (size > HUGE_THRESHOLD) {
		/* mremap fails on a mapping gathered from several (several VMAs): copy */
		void *q = huge_realloc(r, ALIGN_UP(size, PAGE_SIZE));
		return q ? q : realloc_move(p, r->len, size);
	}
	return realloc_move(p, r->len, size);
}

void *dfl_realloc(void *p, size_t size)
{
	PCPM_INSIDE_BEGIN();
	void *q = __realloc(p, size);
	PCPM_INSIDE_END();
	return q;
}
