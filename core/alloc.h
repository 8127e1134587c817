/*
 * alloc.h - pcpmalloc's allocation API on top of the layers (tcache -> slab -> pcp -> zone
 * -> arena), with pcpm_ names so the core can be linked into tests as a normal library;
 * preload/ exports them under the standard names.
 *
 * Sizes are bytes.  Every result is 16-byte aligned (16 KiB+ requests are page aligned).
 * Sizes up to 16 KiB come from slab size classes through the thread cache, up to 28 KiB from
 * the paged slab classes (slow path, no thread cache), larger ones are page runs from the
 * pcp/zone, above 4 MiB a mapping of their own.  Errors follow glibc:
 * NULL with errno = ENOMEM for impossible sizes or exhausted memory, EINVAL for bad
 * alignments.  Bad frees (pointer not the start of a live pcpmalloc block, double free,
 * foreign pointer) abort with one line "pcpmalloc: CALL(): invalid pointer|double free 0x...".
 * All functions are thread-safe; the first call initialises the allocator without calling
 * malloc itself, so the dynamic loader and libc may call in before any constructor ran.
 */
#ifndef PCPM_ALLOC_H
#define PCPM_ALLOC_H

#include "tcache.h"

#define HUGE_THRESHOLD (4UL << 20) /* above one MAX_PAGE_ORDER block: own mapping */

void *pcpm_malloc_slow(size_t n);
void pcpm_free_slow(void *p, struct page *pg, const char *call);
void pcpm_bad_pointer(const char *call, const void *p) __attribute__((noreturn, cold));

static inline __attribute__((always_inline)) void *pcpm_malloc(size_t n)
{
	if (likely(n <= SLAB_MAX_SIZE)) {
		void *p = tcache_pop(size_to_class(n));
		if (likely(p))
			return p;
	}
	return pcpm_malloc_slow(n);
}

/* Every free that is not a slab object in the first arena with room in the cache. */
void pcpm_free_generic(void *p, const char *call);
void pcpm_free_slab_checked(void *p, struct page *head, const char *call);

/* A validated slab object p on page pg (any page of its slab) into the thread cache: the
 * double-free check when the key word matches, then the push.  Tail calls only. */
static inline __attribute__((always_inline)) void pcpm_free_to_cache(void *p, struct page *pg,
								    const char *call)
{
	if (unlikely(((uintptr_t *)p)[1] == pcpm_free_key))
		return pcpm_free_slab_checked(p, pg->slab_head, call);
	if (likely(tcache_push(p, pg->cls)))
		return;
	return tcache_free_slow(p, pg->cls);
}

/* Frees the slab object p of the slab whose head descriptor is head: validation, then the
 * thread cache. */
static inline __attribute__((always_inline)) void pcpm_free_slab(void *p, struct page *head,
								const char *call)
{
	if (unlikely(slab_obj_index(head, p) < 0))
		pcpm_bad_pointer(call, p);
	return pcpm_free_to_cache(p, head, call);
}

/*
 * free() with the name of the API call for the abort message.  Only tail calls leave the
 * fast path, so it needs no stack frame; NULL fails the range check and is handled there.
 */
static inline __attribute__((always_inline)) void pcpm_free_call(void *p, const char *call)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)pcpm_arena0.base;
	if (likely(off < atomic_load_explicit(&pcpm_arena0.committed, memory_order_relaxed))) {
		/* Reads one descriptor line, the object's page's own (every page of a slab
		 * carries addr, reciprocal, cls and fast_lim, the objects carved so far): no
		 * slab_head load, no second line for slabs of 2+ pages.  A page that is no
		 * slab's has fast_lim 0: the slow path classifies the pointer. */
		struct page *pg = pcpm_arena0.desc + (off >> PAGE_SHIFT);
		size_t soff = (size_t)((const char *)p - pg->addr);
		size_t idx = (soff * pg->reciprocal) >> 32;
		if (likely(idx < pg->fast_lim) && likely(idx * pcpm_class_size[pg->cls] == soff))
			return pcpm_free_to_cache(p, pg, call);
	}
	return pcpm_free_generic(p, call);
}

static inline __attribute__((always_inline)) void pcpm_free(void *p)
{
	pcpm_free_call(p, "free");
}

void *pcpm_calloc(size_t nmemb, size_t size);
void *pcpm_realloc(void *p, size_t size);
void *pcpm_reallocarray(void *p, size_t nmemb, size_t size);
/* align: power of two (memalign rounds others up); NULL + EINVAL when unusable. */
void *pcpm_memalign(size_t align, size_t size);
int pcpm_posix_memalign(void **out, size_t align, size_t size);
void *pcpm_aligned_alloc(size_t align, size_t size);
void *pcpm_valloc(size_t size);
void *pcpm_pvalloc(size_t size);
/* Usable bytes of a live block; 0 for NULL; aborts on a pointer that is not a block. */
size_t pcpm_usable_size(const void *p);
/* Drains pcps, flushes this thread's cache, frees empty slabs, purges free memory.
 * Returns 1 when memory went back to the OS. */
int pcpm_trim(size_t pad);

struct pcpm_mallinfo {
	size_t arena, ordblks, hblks, hblkhd, uordblks, fordblks;
};
void pcpm_mallinfo(struct pcpm_mallinfo *mi);

/* Initialisation (idempotent) and fork handlers (pthread_atfork).  pcpm_init() is false
 * when memory for the allocator's own metadata cannot be mapped (the caller fails with
 * ENOMEM; a later call tries again). */
bool pcpm_init(void);
void pcpm_fork_prepare(void);
void pcpm_fork_parent(void);
void pcpm_fork_child(void);

#endif
