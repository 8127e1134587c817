/*
 * free_fast.h - the free fast path, inline: one fast descriptor read (struct page_fast, 16
 * bytes, four pages to a line), the slab object
 * validated, its double-free key checked, then the thread cache's push.  Shared by the API
 * (api.h: pcpm_free_call, whose slow parts are api.c's entries) and the default functions
 * (free.h: dfl_free, whose slow parts are free.c's and tcache.c's): the slow parts
 * come in as constants, so with the helpers always inlined the calls are direct tail calls.
 * Thread-safety: the calling thread's cache only.
 */
#ifndef PCPM_FREE_FAST_H
#define PCPM_FREE_FAST_H

#include "tcache.h"

/* Slow parts: a validated object the cache has no room for, with its pages' bin8 (the
 * class x 2: the fast path's register, passed as it is; a load of the descriptor's cls or
 * a shift of bin8 would cost the fast path one instruction more); a validated object whose
 * key word matched (it finds its slab's descriptors itself: the fast path reads none);
 * every other pointer (NULL included). */
typedef void pcpm_free_small_fn(void *p, unsigned bin8);
typedef void pcpm_free_checked_fn(void *p, const char *call);
typedef void pcpm_free_generic_fn(void *p, const char *call);

/* A validated slab object p into the stack at r (its pages' bin8: the class x 2) of the
 * thread cache tc. */
static inline __attribute__((always_inline)) void
__pcpm_free_push(void *p, struct tcache *tc, size_t r, const char *call,
		 pcpm_free_small_fn *small, pcpm_free_checked_fn *checked)
{
	if (unlikely(((uintptr_t *)p)[1] == PCPM_FREE_KEY))
		return checked(p, call);
	if (likely(tcache_push_at(tc, &r, p)))
		return;
	return small(p, (unsigned)r);
}

/*
 * The fast path's validation: the fast descriptor of p's page when p is the start of a slab
 * object the fast path may free, else NULL (NULL included).  One 16-byte fast descriptor
 * read (arena.h: struct page_fast, four pages to a cache line, where a struct page is one
 * line per page): every page of a slab carries addr_lo, reciprocal, fast_lim, bin8 and cls
 * (no slab_head load, no second line for slabs of 2+ pages), and one compare checks
 * "object start" and "carved" together (slab_fast_lim; fast_lim is 0 on a page that is no
 * slab's).  p's offset from the slab's start is below 2^17, so the low 32 bits of p less
 * addr_lo are the offset.
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

static inline __attribute__((always_inline)) struct page_fast *__pcpm_free_fast_page(void *p)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)pcpm_arena0.base;
	if (likely(off < __arena0_committed_racy())) {
		struct page_fast *fp = pcpm_arena0.fast + (off >> PAGE_SHIFT);
		uint32_t soff = (uint32_t)(uintptr_t)p - fp->addr_lo;
		if (likely(soff * fp->reciprocal < fp->fast_lim))
			return fp;
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
	struct page_fast *fp = __pcpm_free_fast_page(p);
	if (likely(fp))
		return __pcpm_free_push(p, tcache_self(), fp->bin8, call, small, checked);
	return generic(p, call);
}

#endif
