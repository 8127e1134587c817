/*
 * free.h - the default mode's free (free.c): every pointer the inline fast path (free_fast.h)
 * does not take, the double-free check of a slab object, the classification of a non-slab
 * pointer, the usable size, and the one-line aborts on a bad pointer.  Same contracts as
 * api.h's pcpm_ functions, once the allocator has started; thread-safe.
 */
#ifndef PCPM_FREE_H
#define PCPM_FREE_H

#include "free_fast.h"

/* The default free paths: every pointer that is not a slab object with room in the thread
 * cache; the key-word check; the classification of a non-slab pointer. */
void dfl_free_generic(void *p, const char *call);
void dfl_free_slab_checked(void *p, const char *call);
void dfl_free_slow(void *p, struct page *pg, const char *call);
/* Sized free (free_sized, sized delete) of p: aborts when size exceeds the block's usable
 * size (pcpm_bad_size), else frees as dfl_free_generic. */
void dfl_free_sized(void *p, size_t size, const char *call);
/* The check of dfl_free_sized alone (junk and profiling mode run it before their own free):
 * aborts when p is a live block of fewer than size usable bytes; anything else passes. */
void dfl_check_size(const void *p, size_t size, const char *call);
/* The usable size (bytes) of p when it is a live slab object, page run, huge mapping or
 * early block; 0 for anything else (NULL, a freed or marked object, a foreign block, none):
 * never aborts (sized free's check, junk mode's fill).  Thread-safe. */
size_t dfl_live_size(const void *p);
/* Usable bytes of the live block p (not NULL); aborts naming call when p is no block. */
size_t dfl_usable_size(const void *p, const char *call);

/* Aborts: "pcpmalloc: CALL(): invalid pointer P" / "... double free P"; for a page that is
 * no live block, a double free when p is a page inside a free block, else an invalid
 * pointer. */
void pcpm_bad_pointer(const char *call, const void *p) __attribute__((noreturn, cold));
void pcpm_double_free(const char *call, const void *p) __attribute__((noreturn, cold));
/* "pcpmalloc: CALL(): size N for P, a block of M bytes": a sized free's size exceeds the
 * block's usable size M (secure mode's wording). */
void pcpm_bad_size(const char *call, const void *p, size_t size, size_t usable)
	__attribute__((noreturn, cold));
void pcpm_bad_page_pointer(const char *call, const void *p, struct page *pg)
	__attribute__((noreturn, cold));

/* A validated slab object the thread cache had no room for; bin8: its class x 2. */
void dfl_free_small(void *p, unsigned bin8);

static inline __attribute__((always_inline)) void dfl_free(void *p, const char *call)
{
	__pcpm_free_call(p, call, dfl_free_small, dfl_free_slab_checked, dfl_free_generic);
}

#endif
