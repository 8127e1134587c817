/*
 * init.h - start-up of the allocator proper (init.c): configuration, the mode, then every
 * layer from the bottom up (topology, zone, pcp, slab, tcache, huge).  Runs at the first call
 * the early area cannot serve, under init_lock; never calls malloc.
 * Thread-safety: pcpm_init() is idempotent and thread-safe.
 */
#ifndef PCPM_INIT_H
#define PCPM_INIT_H

#include "os.h"

/*
 * The mode, chosen once at start-up (PCPMALLOC_SECURE, PCPMALLOC_JUNK, PCPMALLOC_VALGRIND and memcheck's
 * presence): api.c makes the one choice of front end per slow-path call on it.  Before the
 * allocator has started it reads PCPM_MODE_START, which sends the entries through the
 * start-up path; it is written once, last, by pcpm_init().
 */
enum pcpm_mode { PCPM_MODE_DEFAULT = 0, PCPM_MODE_SECURE = 1, PCPM_MODE_MEMCHECK = 2,
		 PCPM_MODE_START = 3, PCPM_MODE_JUNK = 4,
		 PCPM_MODE_PROF = 5 };
extern _Atomic int pcpm_mode PCPM_HIDDEN;

/* False when memory for the allocator's own metadata cannot be mapped (the caller fails
 * with ENOMEM; a later call tries again). */
bool pcpm_init(void);
/* Is this thread inside pcpm_init() already (a libc function the initialisation calls,
 * wrapped by a preloaded tool, allocated)?  Then pcpm_init() returns false at once and the
 * allocation is served from the early area (pcpm_early_alloc_reentry), never waits for the
 * initialisation this thread itself holds. */
bool pcpm_init_reentered(void);
/* Has pcpm_init() completed (acquire)? */
bool pcpm_init_done(void);

/* fork: the init lock, first in the allocator's lock order. */
void pcpm_init_lock(void);
void pcpm_init_unlock(void);
void pcpm_init_reset_lock(void);

#endif
