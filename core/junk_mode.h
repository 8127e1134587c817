/*
 * junk_mode.h - the junk front end (junk_mode.c, PCPMALLOC_JUNK=1): the default functions,
 * with new blocks filled with JUNK_ALLOC and freed ones with JUNK_FREE (jemalloc's opt.junk).
 * api.c chooses it instead of the default functions; same contracts as api.h's pcpm_
 * functions (sizes in bytes, 16-byte alignment, NULL + ENOMEM / EINVAL, one-line abort on a
 * bad pointer).  Thread-safe.
 */
#ifndef PCPM_JUNK_MODE_H
#define PCPM_JUNK_MODE_H

#include <stddef.h>

#define JUNK_ALLOC 0xa5
#define JUNK_FREE 0x5a

void *junk_malloc(size_t n);
void junk_free_generic(void *p, const char *call);
/* realloc: p != NULL, 0 < size <= PTRDIFF_MAX (api.c handles the other cases for all modes) */
void *junk_realloc(void *p, size_t size);
void *junk_aligned_alloc(size_t align, size_t size); /* align: power of two >= 16 */

#endif
