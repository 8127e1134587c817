/*
 * huge_quarantine.c - the secure front end's free of huge mappings (see huge.h).
 *
 * A freed mapping's pages are not left where the program's pointers point.
 * huge_quarantine moves them (mremap: page tables, no copy, no fault) to a fresh 4 MiB
 * aligned address no pointer knows, where they are cached as in the default mode (split,
 * merged, gathered), and leaves the old range reserved PROT_NONE and empty: a use after free
 * faults as on an unmapped range, and a second free of the address finds a region struct in
 * the cached state (double free).  Two system calls whatever the size, where mprotect of
 * the whole mapping (PROT_NONE at free, read/write again at reuse) costs one page-table
 * update per page each way.  The quarantined ranges (address space only: no pages, no
 * commit charge) are kept in a FIFO of HUGE_QUAR_SLOTS within HUGE_QUAR_BYTES, the oldest
 * unmapped first, and all of them when address space runs out (huge_quar_drain).
 * Calls the huge layer's cache (huge.c), the arena layer and os.c; called by the secure
 * front end.  Thread-safety: the ring is under quar_lock (taken with no other lock held).
 */
#define _GNU_SOURCE
#include "huge_quarantine.h"

#include <errno.h>

#define HUGE_QUAR_SLOTS 32
#define HUGE_QUAR_BYTES (1UL << 30)
static pcpm_lock_t quar_lock = PCPM_LOCK_INIT;
static struct region *huge_quar[HUGE_QUAR_SLOTS]; /* a ring, under quar_lock */
static unsigned huge_quar_next;			  /* the oldest entry / the next slot */
static size_t huge_quar_bytes;

/* Unmaps a quarantined range and frees its struct (no lock held). */
static void huge_quar_release(struct region *q)
{
	pcpm_map_set(huge_base(q), q->len, NULL);
	pcpm_os_unmap(huge_base(q), q->len);
	pcpm_region_free(q);
}

/* The quarantine's oldest entries while over its bounds (all of them when drain), on a
 * deferred_next list; quar_lock held. */
static struct region *__huge_quar_evict(bool drain)
{
	struct region *out = NULL;
	for (unsigned k = 0; k < HUGE_QUAR_SLOTS; k++) {
		unsigned i = (huge_quar_next + k) % HUGE_QUAR_SLOTS;
		struct region *q = huge_quar[i];
		if (!q)
			continue;
		if (!drain && huge_quar_bytes <= HUGE_QUAR_BYTES)
			break;
		huge_quar[i] = NULL;
		huge_quar_bytes -= q->len;
		q->deferred_next = out;
		out = q;
	}
	return out;
}

static void huge_quar_release_list(struct region *q)
{
	while (q) {
		struct region *next = q->deferred_next;
		huge_quar_release(q);
		q = next;
	}
}

/* Empties the quarantine; true when it held a range. */
bool huge_quar_drain(void)
{
	pcpm_lock(&quar_lock);
	struct region *q = __huge_quar_evict(true);
	pcpm_unlock(&quar_lock);
	huge_quar_release_list(q);
	return q != NULL;
}

/* Puts the reserved range described by q (base, len) into the quarantine; the oldest
 * ranges go when it is over its bounds.  A free of its address reports a double free. */
static void huge_quar_add(struct region *q)
{
	q->dirty = 0;
	huge_set_req_size(q, 0); /* the front guard's size stays: free(p) of the old block
				  * finds it (double free) */
	q->deferred_next = NULL;
	q->next_free = (struct region *)HUGE_CACHED; /* free(old) again: a double free */
	(void)pcpm_map_set(huge_base(q), q->len, q); /* the leaves exist (the mapping's) */
	pcpm_lock(&quar_lock);
	struct region *v = huge_quar[huge_quar_next];
	if (v) {
		huge_quar_bytes -= v->len;
		v->deferred_next = NULL;
	}
	huge_quar[huge_quar_next] = q;
	huge_quar_next = (huge_quar_next + 1) % HUGE_QUAR_SLOTS;
	huge_quar_bytes += q->len;
	struct region *more = __huge_quar_evict(false);
	pcpm_unlock(&quar_lock);
	if (v)
		huge_quar_release(v);
	huge_quar_release_list(more);
}

static bool __huge_quarantine(struct region *r);
/* Moves the freed mapping r's pages away (r then describes them at their new address, ready
 * for the cache) and quarantines its old range.  Cached neighbours that touch r's range (the
 * other half of an earlier split) move with it in the same mremap and come out merged with
 * it, as __huge_cache_put merges in the default mode; their old ranges (never a freed
 * block's: every freed mapping moved) are unmapped.  False when the pages could not move (r
 * unchanged: the caller drops them, huge_discard).  errno is kept. */
static bool huge_quarantine(struct region *r)
{
	int e = errno; /* free() keeps errno */
	bool ok = __huge_quarantine(r);
	errno = e;
	return ok;
}

static bool __huge_quarantine(struct region *r)
{
	char *old = huge_base(r);
	size_t len = r->len;
	struct region *q = pcpm_region_new();
	if (!q)
		return false;
	struct region *below = NULL, *above = NULL;
	bool alone = false;
again:
	if (!alone)
		huge_cache_take_neighbours(old, len, HUGE_CACHE_BYTES, &below, &above);
	char *from = below ? huge_base(below) : old;
	size_t lo = (size_t)(old - from), hi = above ? above->len : 0, total = lo + len + hi;
	char *dst = pcpm_os_reserve(total, HUGE_ALIGN);
	if (!dst || !pcpm_map_reserve(dst, total))
		goto fail;
	/* the live block's guards go: the cache hands out plain read/write mappings */
	pcpm_os_guard_remove(old, huge_front(r));
	pcpm_os_guard_remove(old + len - PAGE_SIZE, PAGE_SIZE);
	/* granules cleared before the range may become free (as huge_unmap does) */
	pcpm_map_set(from, total, NULL);
	int moved = pcpm_os_move_away(from, total, dst);
	if (moved < 0) { /* the leaves exist: none of these can fail */
		(void)pcpm_map_set(old, len, r);
		if (below)
			(void)pcpm_map_set(from, lo, below);
		if (above)
			(void)pcpm_map_set(old + len, hi, above);
		pcpm_os_guard_install(old, huge_front(r));
		pcpm_os_guard_install(old + len - PAGE_SIZE, PAGE_SIZE);
		goto fail;
	}
	if (moved && lo) /* the neighbours' old ranges: plain free address space */
		pcpm_os_unmap(from, lo);
	if (moved && hi)
		pcpm_os_unmap(old + len, hi);
	bool dirty = r->dirty;
	for (int k = 0; k < 2; k++) {
		struct region *c = k ? above : below;
		if (!c)
			continue;
		dirty |= c->dirty != 0;
		huge_account(-1, 0);
		pcpm_region_free(c);
	}
	huge_set_base(r, dst);
	r->len = total;
	r->dirty = dirty ? total : 0;
	(void)pcpm_map_set(dst, total, r); /* reserved above: cannot fail */
	if (!moved) { /* the old range is free address space again */
		pcpm_region_free(q);
		return true;
	}
	q->kind = REGION_HUGE;
	q->req = r->req;
	huge_set_base(q, old);
	q->len = len;
	huge_quar_add(q);
	return true;
fail:
	if (dst)
		pcpm_os_unmap(dst, total);
	if (below || above) { /* back to the cache; then r alone (one VMA more likely) */
		huge_cache_put_back(below, above);
		below = above = NULL;
		alone = true;
		goto again;
	}
	pcpm_region_free(q);
	return false;
}

/* Secure mode, a mapping that is not cached (too large, or its pages could not move): its
 * pages go, its range stays reserved PROT_NONE in the quarantine (MAP_FIXED replaces the
 * mapping in one call); unmapped when even that fails. */
static void huge_discard(struct region *r)
{
	if (!pcpm_os_reserve_over(huge_base(r), r->len)) {
		huge_unmap(r);
		return;
	}
	huge_account(-1, -(long)r->len);
	huge_quar_add(r);
}


void huge_free_quarantined(struct region *r)
{
	/* (a quarantined mapping may come out larger: merged with its neighbours) */
	if (r->len > HUGE_CACHE_MAX || !huge_quarantine(r)) {
		huge_discard(r);
		return;
	}
	huge_cache_put(r);
}

void huge_quar_lock(void)
{
	pcpm_lock(&quar_lock);
}

void huge_quar_unlock(void)
{
	pcpm_unlock(&quar_lock);
}

void huge_quar_reset_lock(void)
{
	pcpm_lock_reset(&quar_lock);
}
