/*
 * free_fast.h - the free fast path, inline: one descriptor line read, the slab object
 * validated, its double-free key checked, then the thread cache's push.  Shared by the API
 * (alloc.h: pcpm_free_call, whose slow parts are api.c's entries) and the default functions
 * (alloc_default.h: dfl_free, whose slow parts are free.c's and tcache.c's): the slow parts
 * come in as constants, so with the helpers always inlined the calls are direct tail calls.
 * Thread-safety: the calling thread's cache only.
 */
#ifndef PCPM_FREE_FAST_H
#define PCPM_FREE_FAST_H

#include "tcache.h"

/* Slow parts: a validated object the cache has no room for; a validated object whose key
 * word matched; every other pointer (NULL included). */
typedef void pcpm_free_small_fn(void *p, unsigned cls);
typedef void pcpm_free_checked_fn(void *p, struct page *head, const char *call);
typedef void pcpm_free_generic_fn(void *p, const char *call);

/* A validated slab object p of class cls on page pg (any page of its slab) into the thread
 * cache. */
static inline __attribute__((always_inline)) void
__pcpm_free_to_cache(void *p, struct page *pg, size_t cls, const char *call,
		     pcpm_free_small_fn *small, pcpm_free_checked_fn *checked)
{
	if (unlikely(((uintptr_t *)p)[1] == pcpm_free_key))
		return checked(p, pg->slab_head, call);
	if (likely(tcache_push(p, (unsigned)cls)))
		return;
	return small(p, (unsigned)cls);
}

/*
 * The fast path's validation: the descriptor of p's page when p is the start of a slab object
 * the fast path may free (one descriptor line read: every page of a slab carries addr,
 * reciprocal, cls and fast_lim, the objects carved so far: no slab_head load, no second line
 * for slabs of 2+ pages; a page that is no slab's has fast_lim 0), else NULL (NULL included).
 * *cls: the object's class when the page is returned.
 */
static inline __attribute__((always_inline)) struct page *__pcpm_free_fast_page(void *p,
										    size_t *cls)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)pcpm_arena0.base;
	if (likely(off < atomic_load_explicit(&pcpm_arena0.committed, memory_order_relaxed))) {
		struct page *pg = pcpm_arena0.desc + (off >> PAGE_SHIFT);
		size_t soff = (size_t)((const char *)p - pg->addr);
		size_t idx = (soff * pg->reciprocal) >> 32;
		size_t c = pg->cls; /* read once: one register for the size lookup and the bin */
		*cls = c;
		if (likely(idx < pg->fast_lim) && likely(idx * pcpm_class_size[c] == soff))
			return pg;
	}
	return NULL;
}

/*
 * free() with the name of the API call for the abort message.  Only tail calls leave the
 * fast path, so it needs no stack frame; NULL fails the range check and is handled there.
 */
static inline __attribute__((always_inline)) void
__pcpm_free_call(void *p, const char *call, pcpm_free_small_fn *small,
		 pcpm_free_checked_fn *checked, pcpm_free_generic_fn *generic)
{
	size_t cls;
	struct page *pg = __pcpm_free_fast_page(p, &cls);
	if (likely(pg))
		return __pcpm_free_to_cache(p, pg, cls, call, small, checked);
	return generic(p, call);
}

#endif
