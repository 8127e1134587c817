/*
 * secure_runs.h - secure mode's page runs with their guards laid out once (secure_runs.c).
 *
 * A secure run is a buddy block of 2^order pages (order <= MAX_PAGE_ORDER) whose first and
 * last pages are guards (MADV_GUARD_INSTALL, mprotect where the kernel lacks it) and whose
 * other bytes read zero whenever it is not handed out.  Guards are installed when a run
 * first comes from the zone and removed only when it goes back to it, so the runs a program
 * reuses cost no system call (hardened_malloc's cached empty slabs; GUARD_SLABS).  Freed runs
 * wait in a FIFO quarantine, are checked zero when they leave it (a write after free), then
 * join a cache per order from which allocation picks at random.
 *
 * Sizes are bytes or pages as named; thread-safe (one lock, secure_runs_lock, no other lock
 * held under it); not for signal handlers (the caller gives them mappings of their own).
 */
#ifndef PCPM_SECURE_RUNS_H
#define PCPM_SECURE_RUNS_H

#include "large.h"
#include "secure.h"

/* A clean, guarded run of 2^order pages, its head descriptor PG_LARGE (npages set); NULL
 * when memory is exhausted.  Every byte between the guards reads zero. */
struct page *secure_run_get(unsigned order);
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
/* fork: the lock taken before fork, released in the parent, reset in the child (a thread
 * that held it across fork() is gone there). */
void secure_runs_lock(void);
void secure_runs_unlock(void);
void secure_runs_reset_lock(void);

#endif
