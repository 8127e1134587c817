/*
 * secure_mode.h - the secure front end's API entries (secure_mode.c, PCPMALLOC_SECURE=1:
 * canaries, zeroed and quarantined free memory, guard pages, checked sizes), which api.c
 * chooses instead of the default functions.  Same contracts as api.h's pcpm_ functions (sizes
 * in bytes, 16-byte alignment, NULL + ENOMEM / EINVAL, one-line abort on a bad pointer);
 * called only once the allocator has started in secure mode.  Thread-safe.
 */
#ifndef PCPM_SECURE_MODE_H
#define PCPM_SECURE_MODE_H

#include "slab.h"

void *secure_malloc(size_t n);
void secure_free_generic(void *p, const char *call);
/* free with the caller's size (sized delete, free_sized): aborts when it is not the block's */
void secure_free_sized(void *p, size_t size, const char *call);
void secure_free_small(void *p, unsigned cls);
void secure_free_slab_checked(void *p, const char *call);
void *secure_calloc(size_t n); /* calloc of n bytes: api.c checked the product */
/* realloc: p != NULL, 0 < size <= PTRDIFF_MAX (api.c handles the other cases for all modes) */
void *secure_realloc(void *p, size_t size);
void *secure_aligned_alloc(size_t align, size_t size); /* align: power of two >= 16 */
size_t secure_usable_size(const void *p);
/* malloc_trim's secure part, before the default one: the huge mappings signal handlers
 * freed go through the quarantine (the default trim would cache and unmap them). */
void secure_trim(void);

#endif
