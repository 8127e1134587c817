/*
 * junk_mode.c - PCPMALLOC_JUNK=1, jemalloc's opt.junk: the default functions, with every new
 * block filled with JUNK_ALLOC (0xa5, its usable size) and every freed one with JUNK_FREE
 * (0x5a), so a program that reads memory it never wrote or uses memory it freed sees the
 * pattern (a debugging aid; secure mode zeroes freed memory instead).  The mode turns the
 * fast stacks off, so every call reaches api.c's choice of front end; the default mode's
 * paths do not change.  A freed slab object keeps its first 16 bytes for the free list and
 * the free mark (the default functions' double-free check reads them).  Calls the default
 * functions (alloc.h, free.h, realloc.h, alloc-aligned.h) and the huge layer's lookup.  Thread-safety: the block being
 * allocated or freed only.
 */
#include "alloc.h"
#include "alloc-aligned.h"
#include "free.h"
#include "huge.h"
#include "realloc.h"
#include "early.h"
#include "junk_mode.h"

#include <errno.h>
#include <string.h>

/* Bytes of the pcpmalloc block p that may be filled, or 0 when p is not a live block of its
 * own (a foreign pointer, or one the default functions will report); *skip: the slab
 * object's link and free mark, left alone. */
static size_t fillable(void *p, size_t *skip)
{
	size_t n = dfl_live_size(p);
	struct page *pg = n ? pcpm_page_of(p) : NULL;
	*skip = pg && pg->state == PG_SLAB ? 16 : 0;
	return n;
}

/* A new block: all its usable bytes (a realloc that grows in place shows them). */
static void *fill_new(void *p)
{
	if (p)
		memset(p, JUNK_ALLOC, dfl_usable_size(p, "malloc"));
	return p;
}

void *junk_malloc(size_t n)
{
	return fill_new(dfl_malloc_slow(n));
}

void junk_free_generic(void *p, const char *call)
{
	if (!p)
		return;
	size_t skip, n = fillable(p, &skip);
	if (n > skip)
		memset((char *)p + skip, JUNK_FREE, n - skip);
	dfl_free_generic(p, call);
}

void *junk_realloc(void *p, size_t size)
{
	size_t old = dfl_usable_size(p, "realloc");
	if (size <= old)
		return dfl_realloc(p, size); /* in place or smaller */
	void *q = junk_malloc(size);
	if (!q)
		return NULL;
	memcpy(q, p, old);
	junk_free_generic(p, "realloc");
	return q;
}

void *junk_aligned_alloc(size_t align, size_t size)
{
	return fill_new(dfl_aligned_alloc(align, size));
}
