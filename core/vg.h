/*
 * vg.h - vg.c's part of memcheck mode: pcpmalloc described to valgrind's memcheck with client
 * requests.  vg.c and this header are the leaf every layer's annotations use (the flag, the
 * probe, the no-op-outside-valgrind client requests), as the kernel's slab calls kasan's hooks;
 * the front end that runs the mode is vgmode.c (vgmode.h).
 *
 * Under `valgrind --tool=memcheck --soname-synonyms=somalloc=nouserintercepts` pcpmalloc's own
 * malloc runs (memcheck would otherwise replace it), and memcheck knows nothing of its blocks.
 * pcpm_init() asks once whether memcheck is watching (PCPMALLOC_VALGRIND=auto); if so,
 * pcpm_vg is set and, for the life of the process:
 *  - the thread caches have no room, so every malloc and free takes the slow path (the fast
 *    paths are unchanged: no test is added to them), and the first arena is not the one the
 *    free fast path recognises, so every free reaches pcpm_free_generic();
 *  - every block handed out is a MALLOCLIKE_BLOCK of the size asked for (the rest of its
 *    object or run no-access), every free a FREELIKE_BLOCK; calloc marks its block defined,
 *    realloc moves (as memcheck's own realloc), malloc_usable_size answers the size asked for;
 *  - arena memory that is no live block is no-access, and the allocator's words inside free
 *    slab objects (freelist link, free key) are opened only while the allocator uses them
 *    (vg_open_obj / vg_close_obj), so they never show as errors, and stale pointers in free
 *    memory never hide a leak;
 *  - no page descriptor or arena header points at the first byte of a live block (object 0
 *    of a slab and page 0 of an arena are never handed out), so a leaked block is "definitely
 *    lost", not "still reachable";
 *  - freed blocks wait in a FIFO quarantine (VG_QUARANTINE_BYTES) before they are reused, so
 *    a use after free is still caught after later allocations of the same size.
 * Without valgrind/memcheck.h at build time (meson option valgrind) all of it compiles out.
 * Thread-safety: pcpm_vg is written once in pcpm_init() before any block exists; the
 * quarantine has its own lock (taken with no other allocator lock held).
 */
#ifndef PCPM_VG_H
#define PCPM_VG_H

#include "os.h"

#ifdef PCPM_HAVE_VALGRIND
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#define VALGRIND_MALLOCLIKE_BLOCK(addr, size, rz, zeroed) ((void)(addr), (void)(size))
#define VALGRIND_FREELIKE_BLOCK(addr, rz) ((void)(addr))
#define VALGRIND_MAKE_MEM_NOACCESS(addr, len) ((void)(addr), (void)(len))
#define VALGRIND_MAKE_MEM_UNDEFINED(addr, len) ((void)(addr), (void)(len))
#define VALGRIND_MAKE_MEM_DEFINED(addr, len) ((void)(addr), (void)(len))
#endif

/* 1 while memcheck is watching and PCPMALLOC_VALGRIND allows the mode; read-only after init. */
extern bool pcpm_vg;

/* Decides pcpm_vg (PCPMALLOC_VALGRIND, then the memcheck probe); once, in pcpm_init(). */
void pcpm_vg_init(void);

/* The free key and link words at the start of a free slab object (16 bytes). */
#define VG_OBJ_META (2 * sizeof(void *))

static inline void vg_open_obj(void *o)
{
	if (unlikely(pcpm_vg))
		VALGRIND_MAKE_MEM_DEFINED(o, VG_OBJ_META);
}

static inline void vg_close_obj(void *o)
{
	if (unlikely(pcpm_vg))
		VALGRIND_MAKE_MEM_NOACCESS(o, VG_OBJ_META);
}

/* Fresh arena memory: no-access until a block is handed out there. */
static inline void vg_fresh(void *p, size_t len)
{
	if (unlikely(pcpm_vg))
		VALGRIND_MAKE_MEM_NOACCESS(p, len);
}

/*
 * p (usable bytes) was just handed out for a request of n bytes: [p, p+n) becomes a heap
 * block, the rest of the object no-access.  zeroed: the caller guarantees zeros (calloc).
 */
void pcpm_vg_alloced(void *p, size_t n, size_t usable, bool zeroed);

/* The size memcheck holds for the live block p (usable bytes at most): the length of its
 * addressable prefix, found without reporting an error. */
size_t pcpm_vg_block_size(const void *p, size_t usable);

/* Bytes of freed blocks the front end (vgmode.c) holds back from reuse (FIFO). */
#define VG_QUARANTINE_BYTES (16UL << 20)
#define VG_QUARANTINE_SLOTS 4096

#endif
