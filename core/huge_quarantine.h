/*
 * huge_quarantine.h - the secure front end's free of huge mappings: pages moved away, the
 * old range kept reserved PROT_NONE in a bounded FIFO (see huge_quarantine.c).
 * Thread-safety: thread-safe (quar_lock, taken with no other allocator lock held).
 */
#ifndef PCPM_HUGE_QUARANTINE_H
#define PCPM_HUGE_QUARANTINE_H

#include "huge.h"

/* Frees the live mapping r (its guard page already removed by the caller or not: the move
 * takes it off): pages moved and cached, old range quarantined; when the pages cannot move,
 * they go and the range is quarantined; unmapped when even that fails.  errno is kept. */
void huge_free_quarantined(struct region *r);
/* Empties the quarantine; true when it held a range (address space reclaim). */
bool huge_quar_drain(void);
/* fork */
void huge_quar_lock(void);
void huge_quar_unlock(void);
void huge_quar_reset_lock(void);

#endif
