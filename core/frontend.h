/*
 * frontend.h - the front ends api.c may choose instead of the default functions, each in
 * files of its own: secure mode (secure_mode.c and secure_large.c, PCPMALLOC_SECURE=1:
 * canaries, zeroed and quarantined free memory, guard pages, checked sizes), memcheck mode
 * (vgmode.c: every block described to valgrind's memcheck) and junk mode (junk_mode.c,
 * PCPMALLOC_JUNK=1).  Same contracts as alloc.h's pcpm_ functions; called only once the
 * allocator has started in that mode.  Thread-safe.
 */
#ifndef PCPM_FRONTEND_H
#define PCPM_FRONTEND_H

#include "slab.h"

void *secure_malloc(size_t n);
void secure_free_generic(void *p, const char *call);
/* free with the caller's size (sized delete, free_sized): aborts when it is not the block's */
void secure_free_sized(void *p, size_t size, const char *call);
void secure_free_small(void *p, unsigned cls);
void secure_free_slab_checked(void *p, struct page *head, const char *call);
void *secure_calloc(size_t n); /* calloc of n bytes: api.c checked the product */
/* realloc: p != NULL, 0 < size <= PTRDIFF_MAX (api.c handles the other cases for all modes) */
void *secure_realloc(void *p, size_t size);
void *secure_aligned_alloc(size_t align, size_t size); /* align: power of two >= 16 */
size_t secure_usable_size(const void *p);
/* malloc_trim's secure part, before the default one: the huge mappings signal handlers
 * freed go through the quarantine (the default trim would cache and unmap them). */
void secure_trim(void);

/* Junk mode (junk_mode.c, PCPMALLOC_JUNK=1): the default functions, with new blocks filled
 * with JUNK_ALLOC and freed ones with JUNK_FREE (jemalloc's opt.junk). */
#define JUNK_ALLOC 0xa5
#define JUNK_FREE 0x5a
void *junk_malloc(size_t n);
void junk_free_generic(void *p, const char *call);
void *junk_realloc(void *p, size_t size);
void *junk_aligned_alloc(size_t align, size_t size); /* align: power of two >= 16 */

void *vg_malloc(size_t n);
void vg_free_generic(void *p, const char *call);
void *vg_calloc(size_t n);
void *vg_realloc(void *p, size_t size);
void *vg_aligned_alloc(size_t align, size_t size); /* align: power of two >= 16 */
size_t vg_usable_size(const void *p);
void vg_trim(void); /* empties the quarantine (malloc_trim) */
/* fork: the quarantine lock */
void vg_fork_prepare(void);
void vg_fork_parent(void);
void vg_fork_child(void);

#endif
