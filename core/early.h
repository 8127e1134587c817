/*
 * early.h - the early allocator: a process's first small allocations, made before the
 * allocator proper has started, come from a 16 KiB static area.  Mirrors the kernel's
 * memblock, which serves boot-time allocations until mem_init() hands memory over to the
 * buddy allocator: a short process (a shell running `:`, most of a build's processes) never
 * reserves an arena, maps metadata or sets up a pcp, which costs it more than all its
 * allocations (issue 3's start-up target).  The first request the area cannot serve
 * (larger than EARLY_MAX, the area full, an aligned allocation, any allocator call that
 * needs the zone) starts the allocator proper, and from then on every allocation comes
 * from it.
 *
 * Blocks: a 16-byte header (a check word bound to the block's address, its usable size,
 * its state) then the block, 16-byte aligned, usable size a multiple of 16 up to
 * EARLY_MAX.  A freed early block is never reused (at most 16 KiB per process stays
 * allocated); a double free or a pointer that is not an early block's start aborts with
 * the usual one-line report.  Lock-free (one atomic add per allocation), so signal
 * handlers may use it too.  Not used under valgrind (memcheck mode annotates every block)
 * nor when a PCPMALLOC_* variable made the constructor start the allocator.
 */
#ifndef PCPM_EARLY_H
#define PCPM_EARLY_H

#include "os.h"

#define EARLY_BYTES (16u << 10)
/* Room beyond EARLY_BYTES that only allocations re-entering the initialisation may use
 * (pcpm_early_alloc_reentry): .bss, no page of it touched unless they come. */
#define EARLY_REENTRY_BYTES (64u << 10)
#define EARLY_MAX 1024u /* largest request served, bytes */

/* The area: EARLY_BYTES (EARLY_REENTRY_BYTES for re-entry) from its first page boundary on, so that a short process's blocks
 * share one page (the array is only cache-line aligned: see zone.c on .bss alignment). */
extern char pcpm_early_area[EARLY_REENTRY_BYTES + PAGE_SIZE] PCPM_HIDDEN;

/* A block of at least n bytes (n <= EARLY_MAX), or NULL: too large, area full, valgrind. */
void *pcpm_early_alloc(size_t n);
/*
 * The same for an allocation that re-entered the initialisation on the thread running it (a
 * preloaded wrapper around a libc function the initialisation calls): up to
 * EARLY_REENTRY_MAX bytes.  Such a block, freed while it is the area's last, gives its
 * space back (the only early blocks whose space is reused).
 */
#define EARLY_REENTRY_MAX (8u << 10)
void *pcpm_early_alloc_reentry(size_t n);

/* Is p inside the early area (not necessarily a block)? */
static inline bool pcpm_is_early(const void *p)
{
	return (uintptr_t)p - (uintptr_t)pcpm_early_area < sizeof(pcpm_early_area);
}

/* For p inside the area: its usable bytes; aborts ("pcpmalloc: CALL(): invalid pointer")
 * when p is not a live early block. */
size_t pcpm_early_usable(const void *p, const char *call);
/* For p inside the area: its usable bytes when it is a live early block, else 0 (never
 * aborts: sized free's check, which leaves the diagnosis to the free). */
size_t pcpm_early_live_size(const void *p);
/* Frees the early block p (marks it free; the space is not reused); aborts on an invalid
 * pointer or a double free. */
void pcpm_early_free(void *p, const char *call);
/* Bytes of the area handed out so far (headers included). */
size_t pcpm_early_used(void);
/* Usable bytes of the early blocks still live (mallinfo: in use; the area's other bytes
 * are free).  A walk of the headers, lock-free: safe in signal handlers, a snapshot. */
size_t pcpm_early_live_bytes(void);
/* Blocks the area handed out and took back (the statistics count them as calls). */
void pcpm_early_calls(uint64_t *allocs, uint64_t *frees);

#endif
