/*
 * secure_large.h - secure mode's page runs, huge mappings and zero-size blocks (secure_large.c),
 * which the secure front end's entries (secure_mode.c) call for every block that is not a
 * small one.  Private to the front end.  Sizes are bytes; thread-safe.
 */
#ifndef PCPM_SECURE_LARGE_H
#define PCPM_SECURE_LARGE_H

#include "secure.h"
#include "slab.h"

/* Largest small block (slab object): the slot holds 24 bytes more. */
#define SECURE_SMALL_MAX (SLAB_MAX_SIZE - SECURE_SMALL_EXTRA)

/* No size given to free (free, delete without a size); else the caller's size is checked. */
#define SECURE_NO_SIZE ((size_t)-1)

/*
 * Zero-size blocks: malloc(0) gets a distinct address in a reserved PROT_NONE range (any
 * access faults), handed out in order and reused only after the range's 4 million others;
 * free of one does nothing.  secure_zero_block: NULL when the range cannot be reserved.
 */
void *secure_zero_block(void);
bool secure_is_zero_block(const void *p);

/*
 * A large block of n bytes (n > SECURE_SMALL_MAX, or align > PAGE_SIZE), zeroed, aligned to
 * align (a power of two; 0 or 16 for malloc), its end against a guard page; NULL on
 * exhaustion (errno ENOMEM or mmap's).  *run: a page run (not a huge mapping), for the
 * counters.  Page runs: canary and header in front, canary from the end to the guard;
 * huge mappings: at the mapping's start, canary up to the guard page.
 */
void *secure_large_alloc(size_t n, size_t align, bool *run);
/* Frees the large block or huge mapping p (pg: pcpm_page_of(p)), checking canaries, header
 * and the size the caller gave (or SECURE_NO_SIZE); aborts on a bad pointer. */
void secure_large_free(void *p, const char *call, size_t size);
/* The request size of the live large block or huge mapping p; aborts on a bad pointer. */
size_t secure_large_size(const void *p, const char *call);
/* realloc of the live large block p to size bytes (> SECURE_SMALL_MAX) where it can stay
 * in its run (same pages); NULL when it must move (the caller moves it). */
void *secure_large_resize(void *p, size_t size);
/* A large block of n bytes (> SECURE_SMALL_MAX) that realloc moves: at the front of a run
 * with room to grow in place (secure_large_resize moves its tail guard with its end; no
 * copy while the run holds it), zeroed; NULL where no run holds it (huge, a signal handler,
 * exhaustion: the caller takes secure_large_alloc's block). */
void *secure_large_alloc_grow(size_t n);
/* Does p belong to a page run or huge mapping (live or quarantined)? */
bool secure_is_large(const void *p);
/* Empties the quarantine of page runs (malloc_trim, address space exhausted). */
void secure_large_drain(void);

#endif
