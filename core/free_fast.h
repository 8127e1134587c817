/*
 * free_fast.h - the free fast path, inline: one descriptor line read, the slab object
 * validated, its double-free key checked, then the thread cache's push.  Shared by the API
 * (api.h: pcpm_free_call, whose slow parts are api.c's entries) and the default functions
 * (free.h: dfl_free, whose slow parts are free.c's and tcache.c's): the slow parts
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

/* A validated slab object p on page pg (any page of its slab) into the stack at r (pg's
 * bin8) of the thread cache tc, with the class only for the slow parts. */
static inline __attribute__((always_inline)) void
__pcpm_free_push(void *p, struct page *pg, struct tcache *tc, size_t r, const char *call,
		 pcpm_free_small_fn *small, pcpm_free_checked_fn *checked)
{
	if (unlikely(((uintptr_t *)p)[1] == PCPM_FREE_KEY))
		return checked(p, pg->slab_head, call);
	if (likely(tcache_push_at(tc, r, p)))
		return;
	return small(p, pg->cls);
}

/* The same into the calling thread's cache. */
static inline __attribute__((always_inline)) void
__pcpm_free_to_cache(void *p, struct page *pg, const char *call, pcpm_free_small_fn *small,
		     pcpm_free_checked_fn *checked)
{
	return __pcpm_free_push(p, pg, tcache_self(), pg->bin8, call, small, checked);
}

/*
 * The fast path's validation: the descriptor of p's page when p is the start of a slab object
 * the fast path may free, else NULL (NULL included).  One descriptor line read: every page
 * of a slab carries addr, reciprocal, fast_lim and bin8 (no slab_head load, no second
 * line for slabs of 2+ pages), and one compare checks "object start" and "carved" together
 * (slab_fast_lim; fast_lim is 0 on a page that is no slab's).  p's offset from addr is below
 * 2^17 on a slab's page, so its low 32 bits are the offset.
 */
static inline __attribute__((always_inline)) size_t __arena0_committed_racy(void)
{
	/* A racy read, as the relaxed load it stands for (the arena grows and shrinks under
	 * the zone lock; a free of memory committed or given back meanwhile is no valid free
	 * of a block this thread got): a plain one, so the compare reads it from memory
	 * without a load of its own; the atomic load in TSan builds. */
#ifdef __SANITIZE_THREAD__
	return atomic_load_explicit(&pcpm_arena0.committed, memory_order_relaxed);
#else
	return *(const size_t *)&pcpm_arena0.committed;
#endif
}

static inline __attribute__((always_inline)) struct page *__pcpm_free_fast_page(void *p)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)pcpm_arena0.base;
	if (likely(off < __arena0_committed_racy())) {
		struct page *pg = pcpm_arena0.desc + (off >> PAGE_SHIFT);
		uint32_t soff = (uint32_t)((uintptr_t)p - (uintptr_t)pg->addr);
		if (likely(soff * pg->reciprocal < pg->fast_lim))
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
	struct page *pg = __pcpm_free_fast_page(p);
	if (likely(pg))
		return __pcpm_free_to_cache(p, pg, call, small, checked);
	return generic(p, call);
}

#endif
