/*
 * vgmode.h - the memcheck front end (vgmode.c): every block described to valgrind's memcheck
 * (vg.h has the mode's flag, probe and annotations, which every layer uses), freed blocks held
 * in a FIFO quarantine of VG_QUARANTINE_BYTES.  api.c chooses it instead of the default
 * functions when pcpm_vg is set; same contracts as api.h's pcpm_ functions (sizes in bytes,
 * 16-byte alignment, NULL + ENOMEM / EINVAL, one-line abort on a bad pointer).  Thread-safe:
 * the quarantine has its own lock.
 */
#ifndef PCPM_VGMODE_H
#define PCPM_VGMODE_H

#include <stddef.h>

void *vg_malloc(size_t n);
void vg_free_generic(void *p, const char *call);
void *vg_calloc(size_t n); /* calloc of n bytes: api.c checked the product */
/* realloc: p != NULL, 0 < size <= PTRDIFF_MAX (api.c handles the other cases for all modes) */
void *vg_realloc(void *p, size_t size);
void *vg_aligned_alloc(size_t align, size_t size); /* align: power of two >= 16 */
size_t vg_usable_size(const void *p);
void vg_trim(void); /* empties the quarantine (malloc_trim) */
/* fork: the quarantine lock */
void vg_fork_prepare(void);
void vg_fork_parent(void);
void vg_fork_child(void);

#endif
