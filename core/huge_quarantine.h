/*
 * huge_quarantine.h - the secure front end's free of huge mappings: pages moved away, the
 * old range kept reserved PROT_NONE in a bounded FIFO (see huge_quarantine.c).
 * Thread-safety: thread-safe (quar_lock, taken with no other allocator lock held).
 */
#ifndef PCPM_HUGE_QUARANTINE_H
#define PCPM_HUGE_QUARANTINE_H

#include "huge.h"

/*
 * Secure mode's huge mappings: a guard of 2^k bytes (a page, or the alignment asked when it
 * is larger) at the mapping's start, the block after it, the canary from the block's end to
 * the guard page at the mapping's end.  r->req holds the request size and k:
 * size | k << HUGE_FRONT_SHIFT.
 */
#define HUGE_FRONT_SHIFT 58
static inline size_t huge_req_size(const struct region *r)
{
	return (size_t)(r->req & ((1ULL << HUGE_FRONT_SHIFT) - 1));
}
/* Bytes of the front guard (the block's offset in its mapping). */
static inline size_t huge_front(const struct region *r)
{
	return (size_t)1 << (r->req >> HUGE_FRONT_SHIFT);
}
/* The request size set to size, the front guard's kept. */
static inline void huge_set_req_size(struct region *r, size_t size)
{
	r->req = size | (r->req & ~((1ULL << HUGE_FRONT_SHIFT) - 1));
}
/* The guard page at the mapping's end (the canary runs up to it). */
static inline char *huge_tail_guard(const struct region *r)
{
	return huge_base(r) + r->len - PAGE_SIZE;
}

/* Frees the live mapping r (its guards already removed by the caller or not: the move
 * takes them off): pages moved and cached, old range quarantined; when the pages cannot move,
 * they go and the range is quarantined; unmapped when even that fails.  errno is kept. */
void huge_free_quarantined(struct region *r);
/* Empties the quarantine; true when it held a range (address space reclaim). */
bool huge_quar_drain(void);
/* fork */
void huge_quar_lock(void);
void huge_quar_unlock(void);
void huge_quar_reset_lock(void);

#endif
