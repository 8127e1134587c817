/*
 * preload.c - the exported allocation API of libpcpmalloc.so: the C functions of glibc's
 * malloc.h and stdlib.h, free_sized/free_aligned_sized (C23), and the pcpmalloc_* calls of
 * pcpmalloc.h.  Each is a thin wrapper over core/api.h; the malloc and free fast paths
 * are inlined here.  No dlsym, no constructor needed: the first call initialises.
 */
#define _GNU_SOURCE
#include "api.h"
#include "fork.h"
#include "trim.h"
#include "config.h"
#include "prof_dump.h"
#include "pcpmalloc.h"
#include "live.h"
#include "stat.h"
#include "vmstat.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT void *malloc(size_t n)
{
	return pcpm_malloc(n);
}

EXPORT void free(void *p)
{
	pcpm_free(p);
}

EXPORT void cfree(void *p)
{
	pcpm_free(p);
}

EXPORT void *calloc(size_t nmemb, size_t size)
{
	return pcpm_calloc(nmemb, size);
}

EXPORT void *realloc(void *p, size_t size)
{
	return pcpm_realloc(p, size);
}

EXPORT void *reallocarray(void *p, size_t nmemb, size_t size)
{
	return pcpm_reallocarray(p, nmemb, size);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	return pcpm_posix_memalign(out, align, size);
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	return pcpm_aligned_alloc(align, size);
}

EXPORT void *memalign(size_t align, size_t size)
{
	return pcpm_memalign(align, size);
}

EXPORT void *valloc(size_t size)
{
	return pcpm_valloc(size);
}

EXPORT void *pvalloc(size_t size)
{
	return pcpm_pvalloc(size);
}

EXPORT size_t malloc_usable_size(void *p)
{
	return pcpm_usable_size(p);
}

/* C23: the size must be the one requested; the default mode aborts on a size larger than
 * the block (api.h: pcpm_free_sized_call), secure mode on any other than the request. */
EXPORT void free_sized(void *p, size_t size)
{
	pcpm_free_sized_call(p, size, "free_sized");
}

EXPORT void free_aligned_sized(void *p, size_t align, size_t size)
{
	(void)align;
	pcpm_free_sized_call(p, size, "free_aligned_sized");
}

/*
 * glibc's own entry points (GLIBC_2.2.5), which some programs and libraries call directly
 * (debugging wrappers, old interposers): served by pcpmalloc as well, so that a block from
 * __libc_malloc freed with free() - or the reverse - never mixes two allocators (before,
 * free() aborted on such a block as an invalid pointer).
 */
#define LIBC_ALIAS(name, target) \
	EXPORT extern __typeof(target) name __attribute__((alias(#target), copy(target)))
LIBC_ALIAS(__libc_malloc, malloc);
LIBC_ALIAS(__libc_free, free);
LIBC_ALIAS(__libc_calloc, calloc);
LIBC_ALIAS(__libc_realloc, realloc);
LIBC_ALIAS(__libc_memalign, memalign);
LIBC_ALIAS(__libc_valloc, valloc);
LIBC_ALIAS(__libc_pvalloc, pvalloc);

EXPORT int malloc_trim(size_t pad)
{
	return pcpm_trim(pad);
}

static inline int clamp_int(size_t v)
{
	return v > 0x7fffffff ? 0x7fffffff : (int)v;
}

/*
 * pcpm_init() for the introspection calls below, under the "inside pcpmalloc" flag as from
 * the slow paths: a signal handler that interrupts the set-up (init lock held across libc
 * calls) runs in the no-wait mode of kernel-pcp.md §12.2.  (The counters' own lock hold is
 * flagged in tcache_stats_add; formatting holds no lock and is left unflagged, so a handler
 * that interrupts it keeps the fast paths.)
 */
static bool init_flagged(void)
{
	PCPM_INSIDE_BEGIN();
	bool ok = pcpm_init();
	PCPM_INSIDE_END();
	return ok;
}

EXPORT struct mallinfo2 mallinfo2(void)
{
	struct pcpm_mallinfo m;
	struct mallinfo2 r;
	pcpm_mallinfo(&m);
	memset(&r, 0, sizeof(r));
	r.arena = m.arena;
	r.ordblks = m.ordblks;
	r.hblks = m.hblks;
	r.hblkhd = m.hblkhd;
	r.uordblks = m.uordblks;
	r.fordblks = m.fordblks;
	return r;
}

EXPORT struct mallinfo mallinfo(void)
{
	struct mallinfo2 m = mallinfo2();
	struct mallinfo r;
	memset(&r, 0, sizeof(r));
	r.arena = clamp_int(m.arena);
	r.ordblks = clamp_int(m.ordblks);
	r.hblks = clamp_int(m.hblks);
	r.hblkhd = clamp_int(m.hblkhd);
	r.uordblks = clamp_int(m.uordblks);
	r.fordblks = clamp_int(m.fordblks);
	return r;
}

EXPORT void malloc_stats(void)
{
	if (init_flagged()) /* (false: out of memory before the first block; nothing to print) */
		pcpm_stats_print();
}

/* glibc's options are accepted and ignored (1 = success, as glibc answers for a known
 * parameter); an unknown parameter gets 0, as from glibc. */
EXPORT int mallopt(int param, int value)
{
	(void)value;
	switch (param) {
	case M_MXFAST: case M_TRIM_THRESHOLD: case M_TOP_PAD: case M_MMAP_THRESHOLD:
	case M_MMAP_MAX: case M_CHECK_ACTION: case M_PERTURB: case M_ARENA_TEST: case M_ARENA_MAX:
		return 1;
	default:
		return 0;
	}
}

EXPORT const char *pcpmalloc_version(void)
{
	return PCPM_VERSION;
}

EXPORT size_t pcpmalloc_stats_json(char *buf, size_t len)
{
	if (!init_flagged()) { /* out of memory before the first block: no counters yet */
		if (len)
			buf[0] = 0;
		return 0;
	}
	return pcpm_stats_json(buf, len);
}

EXPORT long long pcpmalloc_stat(const char *name)
{
	struct pcpm_stats s;
	if (!init_flagged())
		return -1;
	pcpm_stats_read(&s);
	return pcpm_stats_get(&s, name);
}

EXPORT int pcpmalloc_prof_dump(const char *path)
{
	return pcpm_prof_dump(path, 'u');
}

/*
 * Runs when the library is loaded: registers the fork handlers (they do nothing until the
 * allocator is initialised).  The allocator itself starts on the first allocation, as it
 * must anyway when ld.so or libc allocate before any constructor ran: a process that never
 * allocates (/bin/true) pays for no set-up at all.  Only when a PCPMALLOC_* variable is set
 * does it start here, so that such a process too reports its statistics, prints the verbose
 * sizing line or warns about a malformed value, and the stats keep their copy of stderr from
 * the start.  pthread_atfork may allocate; that initialises the allocator the normal way.
 * With PCPMALLOC_LIVE=1 the background worker starts here too, and publishes the live page
 * (live.h) from the start; the page goes at exit.
 */
/*
 * glibc's stdio list lock (a recursive lock; public symbols of glibc since 2.2.5, weak so
 * another libc just skips them).  glibc's fork takes it after the prepare handlers and its
 * own malloc locks after it; an allocator that took its locks in a prepare handler first
 * would deadlock against a fflush(NULL) thread (list lock held, waiting for a FILE lock)
 * and a getline thread (that FILE lock held, waiting in realloc for the allocator).  So the
 * prepare handler takes the list lock before the allocator's, in glibc's order; the parent
 * handler releases it; in the child it is reset (glibc resets it itself when the parent had
 * threads, and the child has only this one).
 */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));
extern void _IO_list_resetlock(void) __attribute__((weak));

static void fork_prepare(void)
{
	if (_IO_list_lock)
		_IO_list_lock();
	pcpm_fork_prepare();
}

static void fork_parent(void)
{
	pcpm_fork_parent();
	if (_IO_list_unlock)
		_IO_list_unlock();
}

static void fork_child(void)
{
	pcpm_fork_child();
	if (_IO_list_resetlock)
		_IO_list_resetlock();
}

__attribute__((constructor)) static void pcpmalloc_load(void)
{
	const char *v[1];
	atomic_store_explicit(&pcpm_vmstat_publish, pcpm_live_publish, memory_order_release);
	if (pcpm_env_prefixed("PCPMALLOC_", v, 1) && pcpm_init()) {
		pcpm_stats_init();
		if (pcpm_cfg.live)
			pcpm_vmstat_maybe_start();
	}
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

__attribute__((destructor)) static void pcpmalloc_unload(void)
{
	pcpm_live_exit();
	pcpm_prof_at_exit();
	pcpm_stats_dump_at_exit();
}
