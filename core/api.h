/*
 * api.h - pcpmalloc's allocation API on top of the layers (tcache -> slab -> pcp -> zone
 * -> arena), with pcpm_ names so the core can be linked into tests as a normal library;
 * preload/ exports them under the standard names: api.c's entries and their inline fast
 * paths.
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
#ifndef PCPM_API_H
#define PCPM_API_H

#include "free_fast.h"
#include "init.h"

#include <string.h>

/*
 * The entries below the inline fast paths (api.c): each makes the one choice of mode -
 * default, secure (secure_mode.c) or memcheck (vgmode.c), decided once at start-up - and
 * calls that front end.  The default mode's functions are in alloc.h, free.h, realloc.h,
 * alloc-aligned.h and trim.h.
 */
void *pcpm_malloc_slow(size_t n);

static inline __attribute__((always_inline)) void *pcpm_malloc(size_t n)
{
	void *p = tcache_pop_size(n);
	if (likely(p))
		return p;
	return pcpm_malloc_slow(n);
}

/* Every free that is not a slab object in the first arena with room in the cache. */
void pcpm_free_generic(void *p, const char *call);
/* A validated slab object that the thread cache had no room for; bin8: its class x 2. */
void pcpm_free_small_slow(void *p, unsigned bin8);
/* A validated slab object whose key word matched: double-free check, then freed. */
void pcpm_free_slab_checked(void *p, const char *call);

static inline __attribute__((always_inline)) void pcpm_free_call(void *p, const char *call)
{
	__pcpm_free_call(p, call, pcpm_free_small_slow, pcpm_free_slab_checked, pcpm_free_generic);
}

/*
 * Sized deallocation (operator delete(p, size), free_sized, free_aligned_sized): free's fast
 * path, and the size checked against the object's class - it may not exceed the class size
 * (a block never had more than its usable size; less is legitimate: realloc keeps an object
 * that shrinks by less than half, an aligned request gets a larger class).  Up to 1 KiB one
 * byte compare: the size's direct table entry (its class x 2) at most the descriptor's bin8
 * (classes grow with their index); above, the class-size table.  Any other case, and a size
 * too large, in pcpm_free_sized_generic: the default mode aborts ("pcpmalloc: CALL(): size N
 * for P, a block of M bytes"), secure mode checks the size requested.
 */
void pcpm_free_sized_generic(void *p, size_t size, const char *call);

static inline __attribute__((always_inline)) void pcpm_free_sized_call(void *p, size_t size,
								       const char *call)
{
	struct page_fast *fp = __pcpm_free_fast_page(p);
	if (likely(fp)) {
		struct tcache *tc = tcache_self();
		size_t r = fp->bin8;
		if (likely(size <= SMALL_LOOKUP_MAX ? tc->direct[size] <= r
						    : size <= pcpm_class_size[fp->cls]))
			return __pcpm_free_push(p, tc, r, call, pcpm_free_small_slow,
						pcpm_free_slab_checked);
	}
	return pcpm_free_sized_generic(p, size, call);
}

static inline __attribute__((always_inline)) void pcpm_free(void *p)
{
	pcpm_free_call(p, "free");
}

/*
 * The aligned fast path, as pcpm_malloc's: align a power of two, up to a page, size up to
 * SLAB_MAX_SIZE: the first class of at least max(size, align) bytes whose objects are
 * multiples of align (then every object is aligned: slabs are page aligned) from the
 * thread cache.  NULL when that stack is empty, and always in secure and memcheck mode
 * (their caches have no fast stacks): the caller takes the slow path.
 */
static inline __attribute__((always_inline)) void *pcpm_aligned_fast(size_t align, size_t size)
{
	if (likely(size <= SLAB_MAX_SIZE && align <= PAGE_SIZE)) {
		for (unsigned c = size_to_class(MAX(size, align)); c < NR_SIZE_CLASSES; c++)
			if (!(pcpm_class_size[c] & (align - 1)))
				return tcache_pop(c);
	}
	return NULL;
}

/*
 * calloc: a request of up to SMALL_LOOKUP_MAX bytes from the thread cache.  Up to 64 bytes
 * the object is zeroed inline with 16-byte stores over its class (1 to 4 x 16 bytes), placed
 * by the direct table's entry r = 2 x cls: the classes of up to 128 bytes are 16 x (cls + 1)
 * bytes, so the last 16 start at r x 8 (slab_order.c; test_api checks every size) - two
 * stores up to 32 bytes, four up to 64, no size rounding; by memset above.  The pop leaves
 * the free mark: the first store clears it.  Everything else (overflow, larger sizes, an
 * empty stack, the other modes, whose fast stacks are empty) in pcpm_calloc_slow.
 */
void *pcpm_calloc_slow(size_t nmemb, size_t size);

static inline __attribute__((always_inline)) void *pcpm_calloc(size_t nmemb, size_t size)
{
	typedef char v16 __attribute__((vector_size(16), may_alias, aligned(16)));
	size_t n;
	char *p;
	if (likely(!__builtin_mul_overflow(nmemb, size, &n))) {
		struct tcache *tc = tcache_self();
		size_t r;
		if (likely(n <= 32)) {
			r = tc->direct[n];
			if (likely(tcache_take_at(tc, &r, (void **)&p))) {
				*(v16 *)p = (v16){0};
				*(v16 *)(p + r * 8) = (v16){0};
				return p;
			}
		} else if (n <= 64) {
			r = tc->direct[n];
			if (likely(tcache_take_at(tc, &r, (void **)&p))) {
				*(v16 *)p = (v16){0};
				*(v16 *)(p + 16) = (v16){0};
				*(v16 *)(p + r * 8 - 16) = (v16){0};
				*(v16 *)(p + r * 8) = (v16){0};
				return p;
			}
		} else if (n <= SMALL_LOOKUP_MAX) {
			if (likely(tcache_take_at(tc, &(size_t){tc->direct[n]}, (void **)&p)))
				return memset(p, 0, n);
		}
	}
	return pcpm_calloc_slow(nmemb, size);
}

/*
 * realloc: a valid slab object whose new size keeps its class stays where it is, inline
 * (the free fast path's checks, the size's direct table entry against the descriptor's
 * bin8, the free mark: a freed object goes to the slow path's double-free check), in the
 * default mode only (the front ends see every realloc); everything else in
 * pcpm_realloc_slow.
 */
void *pcpm_realloc_slow(void *p, size_t size);

static inline __attribute__((always_inline)) void *pcpm_realloc(void *p, size_t size)
{
	struct page_fast *fp = __pcpm_free_fast_page(p);
	if (likely(fp) && likely(size - 1 < SMALL_LOOKUP_MAX) &&
	    likely(tcache_self()->direct[size] == fp->bin8) &&
	    likely(((uintptr_t *)p)[1] != PCPM_FREE_KEY) &&
	    likely(atomic_load_explicit(&pcpm_mode, memory_order_relaxed) == PCPM_MODE_DEFAULT))
		return p;
	return pcpm_realloc_slow(p, size);
}

void *pcpm_reallocarray(void *p, size_t nmemb, size_t size);
/* align: power of two (memalign rounds others up); NULL + EINVAL when unusable. */
void *pcpm_memalign(size_t align, size_t size);
int pcpm_posix_memalign(void **out, size_t align, size_t size);
void *pcpm_aligned_alloc(size_t align, size_t size);
void *pcpm_valloc(size_t size);
void *pcpm_pvalloc(size_t size);
/* Usable bytes of a live block; 0 for NULL; aborts on a pointer that is not a block.  A
 * slab object inline (the free fast path's checks, then its class size), except in secure
 * mode (its usable size is the request's). */
size_t pcpm_usable_size_slow(const void *p);

static inline __attribute__((always_inline)) size_t pcpm_usable_size(const void *p)
{
	struct page_fast *fp = __pcpm_free_fast_page((void *)p);
	if (likely(fp) &&
	    likely(atomic_load_explicit(&pcpm_mode, memory_order_relaxed) != PCPM_MODE_SECURE))
		return pcpm_class_size[fp->cls];
	return pcpm_usable_size_slow(p);
}
/* Drains pcps, flushes this thread's cache, frees empty slabs, purges free memory.
 * Returns 1 when memory went back to the OS. */
int pcpm_trim(size_t pad);

/* mallinfo: pcpm_mallinfo() in trim.h; initialisation: pcpm_init() in init.h; the fork
 * handlers: fork.h. */

#endif
