/*
 * alloc-aligned.h - the default mode's aligned allocation (alloc-aligned.c), below api.c's
 * argument checks and its inline fast path (pcpm_aligned_fast): memalign, posix_memalign,
 * aligned_alloc, valloc and pvalloc end here.  Sizes in bytes; NULL + ENOMEM; thread-safe.
 */
#ifndef PCPM_ALLOC_ALIGNED_H
#define PCPM_ALLOC_ALIGNED_H

#include <stddef.h>

/* align: a power of two >= 16. */
void *dfl_aligned_alloc(size_t align, size_t size);

#endif
