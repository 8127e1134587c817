/*
 * secure_runs.c - secure mode's guarded page runs: a FIFO quarantine of freed runs and a
 * cache of clean runs per order, both keeping their guard pages (see secure_runs.h).
 *
 * Before, each block installed a guard page at malloc and removed it at free (two madvise
 * per block, each a TLB shootdown once threads run: 46,153 madvise for 300k operations of
 * wl-glibc-thread) and its run was zeroed twice (at free, then at malloc as PG_DIRTY).  Here
 * a run's guards sit at fixed places - its first and last page - so any run of the order
 * serves any block of it, and a run is zeroed once (at free, by the caller) and checked zero
 * once (when it leaves the quarantine); the cache hands it out as is.
 *
 * Calls large.c (runs from and back to the pcp and zone) and os.c.  Lock: runs_lock, a leaf.
 */
#include "secure_runs.h"

#include "os.h"

#include <string.h>

/* Freed runs wait here, oldest out first: a freed address comes back after at least
 * LQ_SLOTS more frees of runs (or LQ_BYTES of them). */
#define LQ_SLOTS 16
#define LQ_BYTES (16UL << 20)
/* Clean runs kept per order, and in all: enough for a working set of blocks that churn in
 * one size range (wl-glibc-thread: 16-32 KiB, order 3), little beside the default mode's
 * own pcp lists (RC_BYTES of resident zero pages at most). */
#define RC_SLOTS 64
#define RC_BYTES (16UL << 20)
/* Runs of order COLD_MAX_ORDER and below that the cache cannot hold: kept clean with their
 * guards on per-order lists ("cold" runs), up to COLD_BYTES of address space, of which
 * COLD_RES_BYTES resident (the newest); past that, the oldest of the order have their pages
 * dropped (one madvise) and wait on a second list.  Giving them back to the zone took two
 * madvise to remove the guards, two to install them again when a run of the order came back
 * from the zone, and a pass clearing it (wl-burst: 64 MiB of 16-32 KiB runs per thread and
 * burst, 33,667 madvise a run; the zone keeps freed pages resident up to the peak in use).
 * Dropping every cold run's pages at once cost more in page faults than the calls saved
 * (wl-burst: +19k faults, +15 % CPU time).  Larger runs go back to the zone: their guard
 * calls are few for their bytes. */
#define COLD_MAX_ORDER 5
#define COLD_BYTES (256UL << 20)
#define COLD_RES_BYTES (128UL << 20)

static pcpm_lock_t runs_lock = PCPM_LOCK_INIT;
static struct page *lq[LQ_SLOTS]; /* FIFO ring, under runs_lock */
static unsigned lq_next;	  /* the oldest entry, the next slot */
static size_t lq_bytes;
static struct page *rc[NR_PAGE_ORDERS][RC_SLOTS]; /* clean runs, rc_nr[o] of them */
static unsigned rc_nr[NR_PAGE_ORDERS];
static size_t rc_bytes;
static uint64_t rc_rand; /* xorshift64 state, under runs_lock */
/* cold runs on lru, newest first: [o][0] resident, [o][1] pages dropped; under runs_lock */
static struct list_head cold[COLD_MAX_ORDER + 1][2];
static unsigned cold_nr[COLD_MAX_ORDER + 1][2];
static size_t cold_bytes, cold_res; /* all cold runs (and those being dropped); resident */

static inline size_t run_bytes(const struct page *h)
{
	return (size_t)h->npages << PAGE_SHIFT;
}

/* The guards of the run at base of len bytes: its first and last page. */
static bool guards_install(char *base, size_t len)
{
	if (!pcpm_os_guard_install(base, PAGE_SIZE))
		return false;
	if (!pcpm_os_guard_install(base + len - PAGE_SIZE, PAGE_SIZE)) {
		pcpm_os_guard_remove(base, PAGE_SIZE);
		return false;
	}
	return true;
}

static void guards_remove(char *base, size_t len)
{
	pcpm_os_guard_remove(base, PAGE_SIZE);
	pcpm_os_guard_remove(base + len - PAGE_SIZE, PAGE_SIZE);
}

/* A run back to the zone: guards off (those pages then read zero), the rest was written. */
static void run_release(struct page *h)
{
	guards_remove(page_address(h), run_bytes(h));
	h->flags = (uint8_t)((h->flags & ~PG_SECURE_RUN_FLAGS) | PG_DIRTY);
	h->run_clean = 0; /* (slab_owner's word: a routing hint, 0 is none) */
	large_free(h);
}

void secure_run_free_nested(struct page *h)
{
	guards_remove(page_address(h), run_bytes(h));
	h->flags = (uint8_t)((h->flags & ~PG_SECURE_RUN_FLAGS) | PG_DIRTY);
	h->run_clean = 0; /* (slab_owner's word: a routing hint, 0 is none) */
	large_free_nested(h);
}

static unsigned rand_below(unsigned n)
{
	if (!rc_rand)
		rc_rand = pcpm_random64() | 1;
	rc_rand ^= rc_rand << 13;
	rc_rand ^= rc_rand >> 7;
	rc_rand ^= rc_rand << 17;
	return (unsigned)(rc_rand % n);
}

/* Pages whose residency one mincore call asks for (the vector lives on the stack). */
#define RES_CHUNK 128
/* Below this many whole pages a range is cleared or checked byte by byte: with 4 (16 KiB),
 * wl-glibc-thread (runs of 16-32 KiB, one byte written) ran x1.9 slower for its mincore
 * and madvise calls than with the passes (quick suite, side by side); at 64 KiB and more
 * the passes cost more than the calls. */
#define RES_MIN_PAGES 16

/*
 * Runs of pages of [a, b) (page aligned) by residency: fn(from, to, resident) for each
 * stretch, in order; false when fn returned false.  Not resident: purged first (a page
 * swapped out reads zero after it); a failed mincore takes every page as resident, a
 * failed purge (mlock'ed pages) the stretch as resident.
 */
static bool by_residency(char *a, char *b, bool (*fn)(char *, char *), bool *all)
{
	unsigned char vec[RES_CHUNK];
	while (a < b) {
		size_t np = MIN((size_t)(b - a) >> PAGE_SHIFT, RES_CHUNK);
		if (!pcpm_os_resident(a, np << PAGE_SHIFT, vec))
			memset(vec, 1, np);
		for (size_t i = 0; i < np;) {
			size_t j = i + 1;
			while (j < np && (vec[j] & 1) == (vec[i] & 1))
				j++;
			char *s = a + (i << PAGE_SHIFT), *e = a + (j << PAGE_SHIFT);
			*all &= vec[i] & 1;
			if (((vec[i] & 1) || !pcpm_os_purge(s, (size_t)(e - s))) && !fn(s, e))
				return false;
			i = j;
		}
		a += np << PAGE_SHIFT;
	}
	return true;
}

static bool zero_fn(char *from, char *to)
{
	memset(from, 0, (size_t)(to - from));
	return true;
}

static bool is_zero_fn(char *from, char *to)
{
	return secure_is_zero(from, to);
}

/* [from, to) with its whole pages by residency, the partial pages at its ends by fn; *all
 * cleared when some page was not resident. */
static bool run_range(char *from, char *to, bool (*fn)(char *, char *), bool *all)
{
	char *a = (char *)ALIGN_UP((uintptr_t)from, PAGE_SIZE);
	char *b = (char *)((uintptr_t)to & ~(uintptr_t)(PAGE_SIZE - 1));
	if (b <= a || (size_t)(b - a) < ((size_t)RES_MIN_PAGES << PAGE_SHIFT))
		return fn(from, to);
	return fn(from, a) && fn(b, to) && by_residency(a, b, fn, all);
}

bool secure_run_zero(char *from, char *to)
{
	bool all = true;
	run_range(from, to, zero_fn, &all);
	return all;
}

bool secure_run_is_zero(char *from, char *to)
{
	bool all = true;
	return run_range(from, to, is_zero_fn, &all);
}

void secure_run_clean(struct page *h, size_t from)
{
	if (from < h->run_clean && secure_on(SECURE_P_ZERO)) {
		secure_run_zero(page_address(h) + from, page_address(h) + h->run_clean);
		h->run_clean = (uint32_t)from;
	}
}

struct page *secure_run_get(unsigned order, size_t from, size_t drop)
{
	pcpm_lock(&runs_lock);
	if (rc_nr[order]) {
		/* a random one of the cache: the next address is not predictable */
		unsigned i = rand_below(rc_nr[order]);
		struct page *h = rc[order][i];
		rc[order][i] = rc[order][--rc_nr[order]];
		rc_bytes -= run_bytes(h);
		pcpm_unlock(&runs_lock);
		h->flags &= (uint8_t)~PG_SECURE_RUN_FLAGS;
		secure_run_clean(h, from);
		return h;
	}
	for (unsigned d = 0; order <= COLD_MAX_ORDER && d < 2; d++) {
		if (!cold_nr[order][d])
			continue;
		/* one of the newest few: the list's order is the frees', not the program's */
		struct list_head *e = cold[order][d].next;
		for (unsigned k = rand_below(MIN(cold_nr[order][d], 8U)); k; k--)
			e = e->next;
		list_del(e);
		cold_nr[order][d]--;
		struct page *h = (struct page *)e; /* (lru: the first field) */
		cold_bytes -= run_bytes(h);
		if (!d)
			cold_res -= run_bytes(h);
		pcpm_unlock(&runs_lock);
		h->flags &= (uint8_t)~PG_SECURE_RUN_FLAGS;
		secure_run_clean(h, from); /* (clean: nothing to do) */
		return h;
	}
	pcpm_unlock(&runs_lock);
	bool run;
	char *base = large_alloc(PAGE_SIZE << order, 0, &run);
	if (!base)
		return NULL;
	struct page *h = pcpm_page_of(base);
	size_t len = run_bytes(h);
	/* a dirty run from the zone reads zero nowhere yet; cleared from the block's front on
	 * only (a 64 KiB block aligned to 64 KiB takes a 256 KiB run: the whole run cleared
	 * made every page of it resident, wl-ruby's peak RSS x4.9 the default mode's) */
	h->run_clean = (uint32_t)(h->flags & PG_DIRTY ? len - PAGE_SIZE : PAGE_SIZE);
	h->flags &= (uint8_t)~PG_DIRTY;
	if (!guards_install(base, len)) {
		large_free(h);
		return NULL;
	}
	/* the room above a growing block: its pages dropped, not written (wl-realloc writes a
	 * byte of each growth: 207 M of its 1,226 M instructions cleared those pages) */
	if (drop > from && drop < h->run_clean &&
	    h->run_clean - drop >= ((size_t)RES_MIN_PAGES << PAGE_SHIFT) &&
	    pcpm_os_purge(base + drop, h->run_clean - drop))
		h->run_clean = (uint32_t)drop;
	secure_run_clean(h, from);
	return h;
}

/* A run out of the quarantine: its block's bytes must still read zero, and the rest of it
 * up to the tail guard (a growing block's: through the page its guard was on; the run above
 * it was clean and behind that guard).  A block whose pages were all resident when it was
 * zeroed is read whole (no mincore: it was written densely); its tail past what it wrote and
 * a sparse block's pages by residency (secure_run_is_zero). */
static void lq_check(struct page *h, const char *call)
{
	char *base = page_address(h), *p = base + (h->req_size >> 32);
	char *gp = base + run_bytes(h) - PAGE_SIZE, *from = p - SECURE_LARGE_FRONT;
	if (h->flags & PG_SECURE_GROW)
		gp = MIN(gp, secure_run_guard(h) + PAGE_SIZE);
	char *e = h->flags & PG_SECURE_SPARSE ? from : secure_run_written_end(p, h);
	if (unlikely(!secure_is_zero(from, e) || !secure_run_is_zero(e, gp)))
		secure_uaf(p, call);
}

static void cold_add(struct page *h, unsigned o, unsigned d)
{
	if (!cold[o][d].next)
		list_init(&cold[o][d]);
	list_add(&h->lru, &cold[o][d]); /* PG_SECURE_QUAR stays: a double free is seen */
	cold_nr[o][d]++;
}

/* The clean run h of order o that the cache could not hold, among the cold runs (their room
 * taken: cold_bytes); returns the oldest resident cold run of the order, off its list, when
 * the resident ones are over COLD_RES_BYTES (the caller drops its pages: cold_drop), else
 * NULL.  runs_lock held. */
static struct page *__cold_put(struct page *h, unsigned o)
{
	cold_add(h, o, 0);
	cold_res += run_bytes(h);
	if (cold_res <= COLD_RES_BYTES)
		return NULL;
	struct page *v = (struct page *)cold[o][0].prev;
	list_del(&v->lru);
	cold_nr[o][0]--;
	cold_res -= run_bytes(v);
	return v;
}

/* The cold run h, off the lists: its pages dropped, it joins the dropped ones of its order
 * (or, when they cannot be dropped: mlock, goes back to the zone).  No lock held. */
static void cold_drop(struct page *h)
{
	bool ok = pcpm_os_purge(page_address(h) + PAGE_SIZE, run_bytes(h) - 2 * PAGE_SIZE);
	pcpm_lock(&runs_lock);
	if (ok) {
		h->run_clean = PAGE_SIZE; /* the guards aside, it reads zero */
		cold_add(h, (unsigned)ilog2_ceil(h->npages), 1);
	} else {
		cold_bytes -= run_bytes(h);
	}
	pcpm_unlock(&runs_lock);
	if (!ok)
		run_release(h);
}

void secure_run_put(struct page *h, const char *call)
{
	struct page *out[LQ_SLOTS + 1], *rel[LQ_SLOTS + 1], *drop[LQ_SLOTS + 1];
	unsigned nout = 0, nrel = 0, ndrop = 0;
	pcpm_lock(&runs_lock);
	if (!secure_on(SECURE_P_QUAR)) { /* no quarantine: the run is clean (or unchecked) */
		out[nout++] = h;
		goto cache;
	}
	if (lq[lq_next]) {
		out[nout++] = lq[lq_next];
		lq_bytes -= run_bytes(lq[lq_next]);
	}
	lq[lq_next] = h;
	lq_bytes += run_bytes(h);
	lq_next = (lq_next + 1) % LQ_SLOTS;
	for (unsigned i = 1; i < LQ_SLOTS && lq_bytes > LQ_BYTES; i++) {
		unsigned k = (lq_next + i - 1) % LQ_SLOTS; /* oldest first, h last */
		if (lq[k] && lq[k] != h) {
			out[nout++] = lq[k];
			lq_bytes -= run_bytes(lq[k]);
			lq[k] = NULL;
		}
	}
	pcpm_unlock(&runs_lock);
	if (secure_on(SECURE_P_ZERO)) {
		for (unsigned i = 0; i < nout; i++)
			lq_check(out[i], call); /* outside the lock: a read pass of the block */
	}
	pcpm_lock(&runs_lock);
cache:
	for (unsigned i = 0; i < nout; i++) {
		struct page *r = out[i];
		unsigned o = (unsigned)ilog2_ceil(r->npages);
		if (rc_nr[o] < RC_SLOTS && rc_bytes + run_bytes(r) <= RC_BYTES) {
			rc[o][rc_nr[o]++] = r; /* PG_SECURE_QUAR stays: a double free is seen */
			rc_bytes += run_bytes(r);
		} else if (o <= COLD_MAX_ORDER && cold_bytes + run_bytes(r) <= COLD_BYTES) {
			cold_bytes += run_bytes(r);
			struct page *v = __cold_put(r, o);
			if (v)
				drop[ndrop++] = v;
		} else {
			rel[nrel++] = r;
		}
	}
	pcpm_unlock(&runs_lock);
	for (unsigned i = 0; i < ndrop; i++)
		cold_drop(drop[i]);
	for (unsigned i = 0; i < nrel; i++)
		run_release(rel[i]);
}

/* Moves every cold run of order o on list d (0: resident, 1: pages dropped) onto *to;
 * returns their bytes.  runs_lock held. */
static size_t cold_take_all(unsigned o, unsigned d, struct list_head *to)
{
	size_t bytes = 0;
	while (cold_nr[o][d]) {
		struct list_head *e = cold[o][d].next;
		list_del(e);
		list_add(e, to);
		cold_nr[o][d]--;
		bytes += run_bytes((struct page *)e);
	}
	return bytes;
}

void secure_runs_drain(void)
{
	struct page *out[LQ_SLOTS + NR_PAGE_ORDERS * RC_SLOTS];
	unsigned nout = 0;
	pcpm_lock(&runs_lock);
	for (unsigned k = 0; k < LQ_SLOTS; k++) {
		if (lq[k])
			out[nout++] = lq[k];
		lq[k] = NULL;
	}
	for (unsigned o = 0; o < NR_PAGE_ORDERS; o++) {
		while (rc_nr[o])
			out[nout++] = rc[o][--rc_nr[o]];
	}
	lq_bytes = 0;
	rc_bytes = 0;
	struct list_head all;
	list_init(&all);
	for (unsigned o = 0; o <= COLD_MAX_ORDER; o++)
		for (unsigned d = 0; d < 2; d++) /* (runs being dropped keep their room) */
			cold_bytes -= cold_take_all(o, d, &all);
	cold_res = 0;
	pcpm_unlock(&runs_lock);
	for (unsigned i = 0; i < nout; i++)
		run_release(out[i]);
	while (!list_empty(&all)) {
		struct list_head *e = all.next;
		list_del(e);
		run_release((struct page *)e);
	}
}

void secure_runs_trim(void)
{
	struct list_head res;
	list_init(&res);
	pcpm_lock(&runs_lock);
	for (unsigned o = 0; o <= COLD_MAX_ORDER; o++)
		cold_res -= cold_take_all(o, 0, &res);
	pcpm_unlock(&runs_lock);
	while (!list_empty(&res)) {
		struct list_head *e = res.next;
		list_del(e);
		cold_drop((struct page *)e);
	}
}

void secure_runs_lock(void)
{
	pcpm_lock(&runs_lock);
}

void secure_runs_unlock(void)
{
	pcpm_unlock(&runs_lock);
}

void secure_runs_reset_lock(void)
{
	pcpm_lock_reset(&runs_lock);
}
