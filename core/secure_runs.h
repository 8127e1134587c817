/*
 * secure_runs.h - secure mode's page runs with their guards laid out once (secure_runs.c).
 *
 * A secure run is a buddy block of 2^order pages (order <= MAX_PAGE_ORDER) whose first and
 * last pages are guards (MADV_GUARD_INSTALL, mprotect where the kernel lacks it) and whose
 * other bytes read zero whenever it is not handed out.  Guards are installed when a run
 * first comes from the zone and removed only when it goes back to it, so the runs a program
 * reuses cost no system call (hardened_malloc's cached empty slabs; GUARD_SLABS).  Freed runs
 * wait in a FIFO quarantine, are checked zero when they leave it (a write after free), then
 * join a cache per order from which allocation picks at random; runs of 128 KiB and less
 * past the cache stay as cold runs with their guards (the oldest with their pages dropped),
 * larger ones go back to the zone.
 *
 * Sizes are bytes or pages as named; thread-safe (one lock, secure_runs_lock, no other lock
 * held under it); not for signal handlers (the caller gives them mappings of their own).
 */
#ifndef PCPM_SECURE_RUNS_H
#define PCPM_SECURE_RUNS_H

#include "large.h"
#include "secure.h"

/* A guarded run of 2^order pages for a block whose front canary starts from bytes into it
 * (from >= PAGE_SIZE), its head descriptor PG_LARGE (npages set); NULL when memory is
 * exhausted.  With SECURE_P_ZERO every byte from there to the tail guard reads zero: only
 * those are cleared, so a run's pages that no block reached stay untouched (not resident).
 * drop (page aligned, > from; 0: none): from there on, 64 KiB or more of pages that a run
 * from the zone still holds written are dropped (one madvise) rather than cleared - the room
 * above a block laid out to grow, which the program may never touch. */
struct page *secure_run_get(unsigned order, size_t from, size_t drop);
/*
 * Zeroes [from, to) of a run (SECURE_P_ZERO's passes over blocks of a page or more): only
 * the pages that are resident are written; the others read zero already, or are purged
 * (swapped out).  A block the program touched sparsely - one byte of a 64 KiB block
 * (wl-ruby's heap pages), of a 16-32 KiB one (wl-glibc-thread) - costs a mincore and
 * perhaps a madvise instead of a pass over its bytes, and its untouched pages stay out of
 * the resident set.  secure_run_is_zero: whether [from, to) reads zero, reading resident
 * pages only (the others are purged the same way, so the range reads zero after it).
 */
bool secure_run_zero(char *from, char *to); /* true: every page was resident */
bool secure_run_is_zero(char *from, char *to);

/* The tail guard of the run h's block: the run's last page, or for a block laid out to grow
 * (PG_SECURE_GROW, realloc's: at the run's front) the page after the block's end, which
 * secure_large.c moves with the block (it is the last page when the block reaches it). */
static inline char *secure_run_guard(struct page *h)
{
	char *base = page_address(h);
	if (h->flags & PG_SECURE_GROW)
		return base + ALIGN_UP((h->req_size >> 32) + (uint32_t)h->req_size, PAGE_SIZE);
	return base + ((size_t)h->npages << PAGE_SHIFT) - PAGE_SIZE;
}
/* The end of what the live block p of the run h and its canary wrote (16-byte aligned, at
 * most the tail guard; the word before the guard aside): secure_large.c's arm_run. */
static inline char *secure_run_written_end(char *p, struct page *h)
{
	char *gp = secure_run_guard(h);
	char *e = (char *)ALIGN_UP((uintptr_t)(p + (uint32_t)h->req_size) + SECURE_CANARY_CHECK, 16);
	return e < gp ? e : gp;
}
/* Clears what is left to clear of the live run h from byte offset from to its tail guard
 * (a block moving down inside it: realloc), so that range reads zero (SECURE_P_ZERO). */
void secure_run_clean(struct page *h, size_t from);
/*
 * Quarantines the freed run h: the caller zeroed what its block wrote, [from, to), and set
 * PG_SECURE_QUAR (a second free finds it).  A run that leaves the quarantine is checked to
 * read zero over its block's bytes (else: write after free, reported naming the block and
 * call) before it joins the cache; what the cache cannot hold goes back to the zone.
 */
void secure_run_put(struct page *h, const char *call);
/* Removes the guards of the run h (not in the quarantine or cache) and frees it, from a
 * signal handler (no lock waited for). */
void secure_run_free_nested(struct page *h);
/* Empties the quarantine and the cache back to the zone (malloc_trim, address space). */
void secure_runs_drain(void);
/* malloc_trim: the resident cold runs' pages dropped (one madvise each); the runs stay
 * secure mode's, with their guards, so a double free after the trim is still reported. */
void secure_runs_trim(void);
/* fork: the lock taken before fork, released in the parent, reset in the child (a thread
 * that held it across fork() is gone there). */
void secure_runs_lock(void);
void secure_runs_unlock(void);
void secure_runs_reset_lock(void);

#endif
