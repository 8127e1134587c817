/*
 * large.h - blocks above the slab range (28 KiB) up to HUGE_THRESHOLD: whole blocks of 2^order
 * pages from the pcp (orders 0..3) or the zone, as alloc_pages(); larger or more aligned
 * requests go to the huge layer.  realloc may turn a block into a run of any length (shrunk
 * or extended in place: large_resize); runs go back with zone_free_run.
 *
 * Sizes are bytes; blocks are page aligned (or to align, a power of two).  The block's head
 * descriptor is PG_LARGE with npages set.  Calls below: pcp, zone, huge.  Thread-safety:
 * thread-safe; a signal handler gets a huge mapping of its own (large_alloc) and frees
 * through the zone's no-wait path.
 */
#ifndef PCPM_LARGE_H
#define PCPM_LARGE_H

#include "huge.h"
#include "pcp.h"

/* A block of at least size bytes aligned to align; NULL (errno ENOMEM or mmap's) when
 * memory is exhausted.  Above HUGE_THRESHOLD (size or align): a huge mapping. */
/* *run: a page run was made (false for a huge mapping), for the per-thread counter. */
void *large_alloc(size_t size, size_t align, bool *run);
/* Frees the live page-run block whose head descriptor is pg. */
void large_free(struct page *pg);
/* The same from a signal handler (no lock waited for). */
void large_free_nested(struct page *pg);
/*
 * Resizes the run pg in place to nnp pages: shrinking gives a tail worth giving back (half
 * or more) to the zone, growing takes the following free pages (zone_extend_run).  False
 * when it cannot grow there (pg unchanged).
 */
bool large_resize(struct page *pg, size_t nnp);

#endif
