/*
 * prof_mode.h - the heap profiler's front end (prof_mode.c, PCPMALLOC_PROF=1 or
 * PCPMALLOC_LEAKS=1): the default functions with a sampling decision on their slow paths.
 * Same contracts as api.h's pcpm_ functions; called by api.c only once the allocator has
 * started in this mode.  Thread-safe; from a signal handler that interrupted pcpmalloc they
 * take the default no-wait paths and sample nothing.
 */
#ifndef PCPM_PROF_MODE_H
#define PCPM_PROF_MODE_H

#include <stddef.h>

void *prof_malloc(size_t n); /* the fast stack of n's class was empty, or n is not cached */
void prof_free_generic(void *p, const char *call);
void *prof_calloc(size_t n); /* calloc of n bytes: api.c checked the product */
/* p != NULL, 0 < size <= PTRDIFF_MAX (api.c handles the other cases for all modes) */
void *prof_realloc(void *p, size_t size);
void *prof_aligned_alloc(size_t align, size_t size); /* align: power of two >= 16 */
/* posix_memalign whose fast path missed (align: power of two >= 16): 0, or ENOMEM (errno
 * set too).  Reached by tail calls only, as the others: the program's call site is the
 * return address it sees. */
int prof_posix_memalign(void **out, size_t align, size_t size);

#endif
