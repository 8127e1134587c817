/*
 * api.c - the allocation API below the inline fast paths (api.h): argument checks common
 * to every mode, then the one choice of front end per call - the default functions
 * (alloc.h, free.h, realloc.h, alloc-aligned.h, trim.h), secure, memcheck or junk mode
 * (secure_mode.h, vgmode.h, junk_mode.h), the heap profiler (prof_mode.h) - read from
 * pcpm_mode, which pcpm_init() writes once.  Until the allocator has started, the entries take
 * the start-up path: the early area while it serves, else pcpm_init(), then the choice.
 * Calls the front ends, the default functions, init and the early area; called by preload/.
 */
#include "api.h"
#include "alloc.h"
#include "alloc-aligned.h"
#include "free.h"
#include "realloc.h"
#include "trim.h"
#include "early.h"
#include "junk_mode.h"
#include "secure_mode.h"
#include "vgmode.h"
#include "init.h"
#include "prof_mode.h"
#include "vmstat.h"

#include <errno.h>
#include <string.h>

static inline int mode(void)
{
	return atomic_load_explicit(&pcpm_mode, memory_order_acquire);
}

/* The allocator has not started: start it (true), or stay with the default functions'
 * no-wait paths and the early area (false: a signal handler).  *failed: out of memory. */
static bool start(bool *failed)
{
	*failed = false;
	if (pcpm_nested() || pcpm_init_reentered())
		return false;
	PCPM_INSIDE_BEGIN();
	if (!pcpm_init()) {
		*failed = true;
		errno = ENOMEM;
	}
	PCPM_INSIDE_END();
	return !*failed;
}

/* ---- malloc ---------------------------------------------------------------------------- */

static PCPM_NOINLINE void *malloc_start(size_t n)
{
	bool failed;
	if (!pcpm_init_done()) {
		void *p = pcpm_early_alloc(n);
		if (p)
			return p;
	}
	if (!start(&failed)) {
		/* this thread's own initialisation called back (a preloaded wrapper of a libc
		 * function it calls): the early area's re-entry room, never a wait for itself */
		if (!failed && pcpm_init_reentered()) {
			void *p = pcpm_early_alloc_reentry(n);
			if (!p)
				errno = ENOMEM;
			return p;
		}
		/* a handler: the early area only, until another thread has chosen the mode (a
		 * default block handed out meanwhile would be foreign to a secure or memcheck
		 * front end) */
		if (failed || mode() == PCPM_MODE_START) {
			errno = ENOMEM;
			return NULL;
		}
	}
	return pcpm_malloc_slow(n);
}

void *pcpm_malloc_slow(size_t n)
{
	/* secure mode first: every one of its calls comes here (its stacks are not the fast
	 * path's), the default mode's only when its stack is empty; one compare, a tail call */
	int m = mode();
	if (m == PCPM_MODE_SECURE)
		return secure_malloc(n);
	switch (m) {
	case PCPM_MODE_DEFAULT:
		return dfl_malloc_slow(n);
	case PCPM_MODE_MEMCHECK:
		return vg_malloc(n);
	case PCPM_MODE_JUNK:
		return junk_malloc(n);
	case PCPM_MODE_PROF:
		return prof_malloc(n);
	default:
		return malloc_start(n);
	}
}

/* ---- free ------------------------------------------------------------------------------ */

void pcpm_free_generic(void *p, const char *call)
{
	/* secure mode first, as in pcpm_malloc_slow: a tail call (its free runs the periodic
	 * work's check itself) */
	int m = mode();
	if (m == PCPM_MODE_SECURE)
		return secure_free_generic(p, call);
	switch (m) {
	case PCPM_MODE_MEMCHECK:
		vg_free_generic(p, call);
		break;
	case PCPM_MODE_JUNK:
		junk_free_generic(p, call);
		break;
	case PCPM_MODE_PROF:
		prof_free_generic(p, call);
		break;
	default: /* before the start only early blocks exist */
		dfl_free_generic(p, call);
		break;
	}
	pcpm_vmstat_after_free();
}

void pcpm_free_sized_generic(void *p, size_t size, const char *call)
{
	switch (mode()) {
	case PCPM_MODE_SECURE:
		return secure_free_sized(p, size, call);
	case PCPM_MODE_DEFAULT:
		dfl_free_sized(p, size, call);
		pcpm_vmstat_after_free();
		return;
	case PCPM_MODE_JUNK:
	case PCPM_MODE_PROF: /* the default allocator below: its check (a sampled block is a
			      * page run, at least as large as what was asked) */
		dfl_check_size(p, size, call);
		return pcpm_free_generic(p, call);
	case PCPM_MODE_MEMCHECK: /* its own redzones: the size is not checked */
		return pcpm_free_generic(p, call);
	default: /* before the start only early blocks exist */
		if (pcpm_is_early(p))
			dfl_check_size(p, size, call);
		return pcpm_free_generic(p, call);
	}
}

void pcpm_free_small_slow(void *p, unsigned bin8)
{
	unsigned cls = bin8 / 2;
	if (likely(mode() == PCPM_MODE_DEFAULT))
		tcache_free_slow(p, cls);
	else if (mode() == PCPM_MODE_SECURE)
		secure_free_small(p, cls);
	else if (mode() == PCPM_MODE_PROF) /* slab objects are never sampled */
		tcache_free_slow(p, cls);
	else
		return pcpm_free_generic(p, "free");
	pcpm_vmstat_after_free();
}

void pcpm_free_slab_checked(void *p, const char *call)
{
	if (likely(mode() == PCPM_MODE_DEFAULT))
		dfl_free_slab_checked(p, call);
	else if (mode() == PCPM_MODE_SECURE)
		secure_free_slab_checked(p, call);
	else if (mode() == PCPM_MODE_PROF)
		dfl_free_slab_checked(p, call);
	else
		return pcpm_free_generic(p, call);
	pcpm_vmstat_after_free();
}

/* ---- calloc, realloc, usable size ------------------------------------------------------ */

void *pcpm_calloc_slow(size_t nmemb, size_t size)
{
	size_t n; /* the overflow check common to every mode */
	if (unlikely(__builtin_mul_overflow(nmemb, size, &n))) {
		errno = ENOMEM;
		return NULL;
	}
	switch (mode()) {
	case PCPM_MODE_DEFAULT:
		return dfl_calloc(n);
	case PCPM_MODE_SECURE:
		return secure_calloc(n);
	case PCPM_MODE_MEMCHECK:
		return vg_calloc(n);
	case PCPM_MODE_JUNK:
		return dfl_calloc(n); /* zeroes, no junk */
	case PCPM_MODE_PROF:
		return prof_calloc(n);
	}
	void *p = pcpm_malloc(n); /* the start-up path: early area, or the start */
	if (!p || mode() == PCPM_MODE_START)
		return p ? dfl_calloc_clear(p, n) : NULL;
	/* this call started the allocator: its block again, from the mode now chosen */
	pcpm_free_call(p, "calloc");
	return pcpm_calloc(n, 1);
}

static PCPM_NOINLINE void *realloc_start(void *p, size_t size)
{
	/* an early block: nothing else exists (pcpm_malloc and the early free never wait, so
	 * a handler takes this path too) */
	size_t usable = dfl_usable_size(p, "realloc");
	if (size <= usable)
		return p;
	void *q = pcpm_malloc(size);
	if (q) {
		memcpy(q, p, usable);
		pcpm_free_call(p, "realloc");
	}
	return q;
}

void *pcpm_realloc_slow(void *p, size_t size)
{
	/* the cases common to every mode (glibc's): realloc(NULL, n) is malloc, realloc(p, 0)
	 * frees p and returns NULL; the front ends see p != NULL, 0 < size <= PTRDIFF_MAX */
	if (!p)
		return pcpm_malloc(size);
	if (size == 0) {
		pcpm_free_call(p, "realloc");
		return NULL;
	}
	if (unlikely(size > PTRDIFF_MAX)) {
		errno = ENOMEM;
		return NULL;
	}
	switch (mode()) {
	case PCPM_MODE_DEFAULT:
		return dfl_realloc(p, size);
	case PCPM_MODE_SECURE:
		return secure_realloc(p, size);
	case PCPM_MODE_MEMCHECK:
		return vg_realloc(p, size);
	case PCPM_MODE_JUNK:
		return junk_realloc(p, size);
	case PCPM_MODE_PROF:
		return prof_realloc(p, size);
	default:
		return realloc_start(p, size);
	}
}

void *pcpm_reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return pcpm_realloc(p, n);
}

size_t pcpm_usable_size_slow(const void *p)
{
	if (!p)
		return 0;
	switch (mode()) {
	case PCPM_MODE_SECURE:
		return secure_usable_size(p);
	case PCPM_MODE_MEMCHECK:
		return vg_usable_size(p);
	default:
		return dfl_usable_size(p, "malloc_usable_size");
	}
}

/* ---- aligned allocation ---------------------------------------------------------------- */

/* align: a power of two >= 16; the fast path missed. */
static PCPM_NOINLINE void *aligned_slow(size_t align, size_t size)
{
	if (align <= 16)
		return pcpm_malloc(size);
	for (;;) {
		switch (mode()) {
		case PCPM_MODE_DEFAULT:
			return dfl_aligned_alloc(align, size);
		case PCPM_MODE_SECURE:
			return secure_aligned_alloc(align, size);
		case PCPM_MODE_MEMCHECK:
			return vg_aligned_alloc(align, size);
		case PCPM_MODE_JUNK:
			return junk_aligned_alloc(align, size);
		case PCPM_MODE_PROF:
			return prof_aligned_alloc(align, size);
		}
		bool failed;
		if (!start(&failed) && (failed || mode() == PCPM_MODE_START)) {
			/* out of memory; or a handler before any thread chose the mode: the early
			 * area serves no aligned block */
			errno = ENOMEM;
			return NULL;
		}
	}
}

/* align: a power of two (>= 16); the fast path inline, the rest out of line, so the fast
 * path saves no registers. */
static inline __attribute__((always_inline)) void *aligned_alloc_pow2(size_t align, size_t size)
{
	void *p = pcpm_aligned_fast(align, size);
	if (likely(p))
		return p;
	return aligned_slow(align, size);
}

void *pcpm_memalign(size_t align, size_t size)
{
	if (align > SIZE_MAX / 2 + 1) { /* glibc's limit; smaller impossible ones: ENOMEM */
		errno = EINVAL;
		return NULL;
	}
	if (align < 16)
		align = 16;
	if (align & (align - 1)) /* glibc rounds a non-power of two up */
		align = (size_t)1 << (64 - __builtin_clzl(align));
	return aligned_alloc_pow2(align, size);
}

/* posix_memalign past its fast path (align: a power of two >= 16).  Reached by a tail call,
 * and reaching the heap profiler's entry by one: its stack walk starts from the return
 * address it was called with, which must be the program's. */
static PCPM_NOINLINE int posix_memalign_slow(void **out, size_t align, size_t size)
{
	if (mode() == PCPM_MODE_PROF)
		return prof_posix_memalign(out, align, size);
	void *p = aligned_slow(align, size);
	if (!p) {
		/* glibc leaves ENOMEM in errno as well as returning it (its memalign sets
		 * it), and programs test errno after a failed call; EINVAL leaves errno */
		errno = ENOMEM;
		return ENOMEM;
	}
	*out = p;
	return 0;
}

int pcpm_posix_memalign(void **out, size_t align, size_t size)
{
	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	align = MAX(align, 16);
	void *p = pcpm_aligned_fast(align, size);
	if (unlikely(!p))
		return posix_memalign_slow(out, align, size);
	*out = p;
	return 0;
}

void *pcpm_aligned_alloc(size_t align, size_t size)
{
	if (align == 0 || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return aligned_alloc_pow2(MAX(align, 16), size);
}

void *pcpm_valloc(size_t size)
{
	return aligned_alloc_pow2(PAGE_SIZE, size);
}

void *pcpm_pvalloc(size_t size)
{
	size_t r = ALIGN_UP(size ? size : 1, PAGE_SIZE);
	if (r < size) {
		errno = ENOMEM;
		return NULL;
	}
	return aligned_alloc_pow2(PAGE_SIZE, r);
}

/* ---- trim ------------------------------------------------------------------------------ */

int pcpm_trim(size_t pad)
{
	(void)pad;
	bool failed;
	if (mode() == PCPM_MODE_START && !start(&failed))
		return 0; /* a handler: trimming takes every lock */
	if (pcpm_nested())
		return 0;
	if (mode() == PCPM_MODE_MEMCHECK) {
		PCPM_INSIDE_BEGIN();
		vg_trim();
		PCPM_INSIDE_END();
	} else if (mode() == PCPM_MODE_SECURE) {
		PCPM_INSIDE_BEGIN();
		secure_trim();
		PCPM_INSIDE_END();
	}
	return dfl_trim();
}
