/*
 * huge.c - the huge-mapping layer (see huge.h): blocks above 4 MiB in mappings of their own,
 * and the cache of freed mappings.  Calls the arena layer (radix map, region structs) and
 * os.c; called by the large-block and API layers, the quarantine and the periodic work.
 */
#define _GNU_SOURCE
#include "huge.h"
#include "config.h"
#include "lockstat.h"
#include "stat_counters.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_CACHE_SLOTS 16

uintptr_t pcpm_huge_base_mask PCPM_HOT; /* 0, or 1 << 63 in memcheck mode (see huge_base) */

/*
 * Freed mappings stay mapped and resident in a small cache (as glibc's heap keeps blocks up
 * to its dynamic mmap threshold), so a program that frees and allocates big blocks reuses
 * them without page faults; a larger cached mapping is shrunk in place with mremap.  The
 * periodic purge gives cached pages back once they stayed unused for PCPMALLOC_DECAY_MS.
 */
static pcpm_lock_t huge_lock = PCPM_LOCK_INIT;
static struct lock_stat huge_ls; /* its profile: huge_lock* in the statistics */

static inline void huge_lock_take(void)
{
	lockstat_lock(&huge_lock, &huge_ls);
}

static inline void huge_lock_drop(void)
{
	lockstat_unlock(&huge_lock, &huge_ls);
}
static struct region *huge_cache[HUGE_CACHE_SLOTS];
static size_t huge_cached_bytes; /* resident bytes in the cache, under huge_lock */
static _Atomic size_t huge_bytes, huge_count;
static _Atomic uint64_t huge_allocs, huge_hits;


/* The mapping of r (its radix entries cleared) back to the kernel, and out of the counts. */
static void huge_unmap_pages(struct region *r)
{
	pcpm_os_unmap(huge_base(r), r->len);
	atomic_fetch_sub_explicit(&huge_bytes, r->len, memory_order_relaxed);
	atomic_fetch_sub_explicit(&huge_count, 1, memory_order_relaxed);
}

/* Mappings freed by signal handlers (huge_free_nested, huge_defer), freed by the next
 * huge_alloc or huge_free outside a handler, malloc_trim or the periodic work.  An entry
 * whose len is 0 was unmapped already: only its struct is left (meta_lock was taken). */
static _Atomic(struct region *) huge_deferred;
/* the front end's free for them in the periodic work (huge_deferred_free_set) */
static void (*_Atomic deferred_free_fn)(struct region *r);

void huge_drain_deferred(void (*free_fn)(struct region *r))
{
	if (likely(!atomic_load_explicit(&huge_deferred, memory_order_relaxed)))
		return;
	struct region *r = atomic_exchange_explicit(&huge_deferred, NULL, memory_order_acquire);
	while (r) {
		struct region *next = r->deferred_next;
		r->next_free = NULL;
		if (r->len)
			free_fn(r);
		else
			pcpm_region_free(r);
		r = next;
	}
}

void huge_deferred_free_set(void (*free_fn)(struct region *r))
{
	atomic_store_explicit(&deferred_free_fn, free_fn, memory_order_release);
}

bool huge_deferred_pending(void)
{
	return atomic_load_explicit(&huge_deferred, memory_order_relaxed) != NULL;
}

void huge_drain_deferred_periodic(void)
{
	void (*fn)(struct region *) = atomic_load_explicit(&deferred_free_fn, memory_order_acquire);
	huge_drain_deferred(fn ? fn : huge_free);
}

void huge_defer(struct region *r)
{
	r->next_free = (struct region *)HUGE_DEFERRED;
	struct region *h = atomic_load_explicit(&huge_deferred, memory_order_relaxed);
	do
		r->deferred_next = h;
	while (!atomic_compare_exchange_weak_explicit(&huge_deferred, &h, r, memory_order_release,
						      memory_order_relaxed));
}

void huge_free_nested(struct region *r)
{
	/* Unmapped at once when the range's radix leaves can be cleared without waiting (they
	 * exist: the mapping is live): a handler that allocates and frees blocks of every
	 * size while it keeps interrupting the allocator makes no mappings that wait for a
	 * later call (they reached vm.max_map_count when nothing else ran).  Its struct goes
	 * back to the pool, or to the free list when meta_lock is free; else it waits. */
	if (!pcpm_map_set_try(huge_base(r), r->len, NULL)) {
		huge_defer(r);
		return;
	}
	huge_unmap_pages(r);
	if (pcpm_region_free_try(r))
		return;
	r->len = 0;
	huge_defer(r);
}

static struct region *__huge_cache_put(struct region *r, struct region **absorbed);
static void huge_cache_put_done(struct region *unmap, struct region *absorbed);

/* Describes a fresh mapping of len bytes at p in region r (secure mode: the caller arms it,
 * huge_secure_arm in the secure front end). */
static void huge_region_init(struct region *r, char *p, size_t len)
{
	r->kind = REGION_HUGE;
	huge_set_base(r, p);
	r->len = len;
	r->dirty = 0; /* fresh anonymous memory reads as zero */
	r->next_free = NULL;
}

void huge_shrink(struct region *r, size_t len)
{
	pcpm_map_set(huge_base(r), r->len, NULL);
	pcpm_os_unmap(huge_base(r) + len, r->len - len);
	atomic_fetch_sub_explicit(&huge_bytes, r->len - len, memory_order_relaxed);
	r->len = len;
	r->dirty = MIN(r->dirty, len);
	(void)pcpm_map_set(huge_base(r), len, r); /* leaves of a subrange exist: cannot fail */
}

/*
 * Splits a mapping taken from the cache at keep bytes (a multiple of
 * HUGE_ALIGN, less than r->len): r keeps the head, the tail goes back to the cache as a
 * mapping of its own, still resident, where huge_shrink would unmap it and the next larger
 * request would fault it in again.  The two halves merge again when both are cached
 * (__huge_cache_put).  Without a region struct for the tail it shrinks instead.
 */
static void huge_split(struct region *r, size_t keep)
{
	struct region *t = pcpm_region_new();
	if (!t) {
		huge_shrink(r, keep);
		return;
	}
	t->kind = REGION_HUGE;
	huge_set_base(t, huge_base(r) + keep);
	t->len = r->len - keep;
	t->dirty = r->dirty > keep ? r->dirty - keep : 0;
	r->dirty = MIN(r->dirty, keep);
	t->freed_ms = r->freed_ms;
	t->next_free = NULL;
	t->deferred_next = NULL;
	t->req = 0;
	(void)pcpm_map_set(huge_base(t), t->len, t); /* the leaves exist (r's): cannot fail */
	r->len = keep;
	atomic_fetch_add_explicit(&huge_count, 1, memory_order_relaxed);
	struct region *absorbed = NULL;
	huge_lock_take();
	struct region *unmap = __huge_cache_put(t, &absorbed);
	huge_lock_drop();
	huge_cache_put_done(unmap, absorbed);
}

/* Puts the mappings on a deferred_next list back into the cache. */
static void huge_cache_put_list(struct region *list)
{
	struct region *unmap = NULL, *absorbed = NULL;
	huge_lock_take();
	while (list) {
		struct region *next = list->deferred_next;
		struct region *u = __huge_cache_put(list, &absorbed);
		while (u) { /* append what this put evicted */
			struct region *un = u->deferred_next;
			u->deferred_next = unmap;
			unmap = u;
			u = un;
		}
		list = next;
	}
	huge_lock_drop();
	huge_cache_put_done(unmap, absorbed);
}

/*
 * No cached mapping is large enough for len bytes (huge_lock held, dropped
 * on return): build one block from several.  The resident cached mappings, largest first,
 * until they hold len bytes, are moved with mremap into one new 4 MiB-aligned mapping:
 * mremap moves page-table entries, so their pages come along resident, without a copy or a
 * fault, and a program whose large blocks change size reuses the memory it freed (as a page
 * heap reuses free spans) instead of faulting in fresh pages beside it.  The last mapping
 * gives only its tail and keeps its head in the cache; what the cache cannot cover is the
 * new mapping's own fresh pages (mapped accounted, so the kernel refuses what it could never
 * back, as for any fresh huge block).  The result may span several VMAs, which mremap cannot grow or move as
 * one: huge_realloc then fails and realloc copies.  NULL (everything back in the cache) when
 * nothing is resident or a system call fails before anything moved.
 */
static void *__huge_gather(size_t len)
{
	struct region *list = NULL, **tail = &list;
	size_t have = 0;
	while (have < len) {
		int big = -1;
		for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
			struct region *c = huge_cache[i];
			if (c && c->dirty && (big < 0 || c->len > huge_cache[big]->len))
				big = i;
		}
		if (big < 0)
			break;
		struct region *c = huge_cache[big];
		huge_cache[big] = NULL;
		huge_cached_bytes -= c->len;
		/* stays HUGE_CACHED: a double free of it meanwhile is still reported */
		c->deferred_next = NULL;
		*tail = c;
		tail = &c->deferred_next;
		have += c->len;
	}
	huge_lock_drop();
	if (!list)
		return NULL;
	struct region *r = pcpm_region_new();
	/* an accounted mapping, as every fresh huge block's: the kernel's overcommit check
	 * refuses a size it could never back (a NORESERVE reservation made writable by
	 * mprotect escaped it: malloc(64 GiB) succeeded once a 5 MiB block was cached) */
	char *dst = r ? pcpm_os_map(len, HUGE_ALIGN) : NULL;
	if (!dst || !pcpm_map_reserve(dst, len)) {
		if (dst)
			pcpm_os_unmap(dst, len);
		if (r)
			pcpm_region_free(r);
		huge_cache_put_list(list);
		return NULL;
	}
	size_t off = 0;
	struct region *back = NULL, *gone = NULL;
	bool failed = false;
	while (list) {
		struct region *c = list;
		list = c->deferred_next;
		size_t take = MIN(c->len, len - off);
		char *src = huge_base(c) + c->len - take;
		/* c keeps its head: the granules its tail fills alone are nobody's once it moved.
		 * Cleared before the move, as huge_unmap does: once the range is free the kernel
		 * may give it to another thread's mapping, whose granules must stay set. */
		char *g = (char *)ALIGN_UP((uintptr_t)src, HUGE_ALIGN);
		if (!failed && take && g < src + take)
			pcpm_map_set(g, (size_t)(src + take - g), NULL);
		if (failed || take == 0 || !pcpm_os_remap(src, take, take, dst + off)) {
			if (!failed && take && g < src + take) /* still c's */
				(void)pcpm_map_set(g, (size_t)(src + take - g), c);
			failed = true;
			c->deferred_next = back;
			back = c;
			continue;
		}
		off += take;
		atomic_fetch_sub_explicit(&huge_bytes, take, memory_order_relaxed);
		if (take < c->len) {
			c->len -= take;
			c->deferred_next = back;
			back = c;
		} else {
			c->deferred_next = gone;
			gone = c;
		}
	}
	if (r) { /* what the cache did not cover is dst's own fresh pages */
		huge_region_init(r, dst, len);
		r->dirty = off; /* the moved pages; the fresh ones after them read as zero */
		(void)pcpm_map_set(dst, len, r); /* reserved above: cannot fail */
		atomic_fetch_add_explicit(&huge_bytes, len, memory_order_relaxed);
		atomic_fetch_add_explicit(&huge_count, 1, memory_order_relaxed);
	}
	while (gone) {
		struct region *next = gone->deferred_next;
		atomic_fetch_sub_explicit(&huge_count, 1, memory_order_relaxed);
		pcpm_region_free(gone);
		gone = next;
	}
	huge_cache_put_list(back);
	return r ? dst : NULL;
}


void *huge_alloc(size_t len, size_t align)
{
	atomic_fetch_add_explicit(&huge_allocs, 1, memory_order_relaxed);
	if (align <= HUGE_ALIGN) {
		/* best fit among the cached mappings */
		huge_lock_take();
		int best = -1;
		for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
			struct region *r = huge_cache[i];
			if (r && r->len >= len && (best < 0 || r->len < huge_cache[best]->len))
				best = i;
		}
		if (best < 0) {
			void *p = __huge_gather(len); /* drops huge_lock */
			if (!p)
				goto fresh;
			atomic_fetch_add_explicit(&huge_hits, 1, memory_order_relaxed);
			return p;
		}
		struct region *r = huge_cache[best];
		huge_cache[best] = NULL;
		if (r->dirty)
			huge_cached_bytes -= r->len;
		r->next_free = NULL;
		huge_lock_drop();
		if (r->len > ALIGN_UP(len, HUGE_ALIGN))
			huge_split(r, ALIGN_UP(len, HUGE_ALIGN));
		else if (r->len > len + len / 4)
			huge_shrink(r, len);
		atomic_fetch_add_explicit(&huge_hits, 1, memory_order_relaxed);
		return huge_base(r);
	}
fresh:;
	char *p = pcpm_os_map(len, MAX(align, HUGE_ALIGN));
	if (!p) {
		pcpm_verbose("huge: mmap of %zu KiB (aligned to %zu KiB) failed: errno %d", len >> 10,
			     MAX(align, HUGE_ALIGN) >> 10, errno);
		return NULL;
	}
	struct region *r = pcpm_region_new();
	if (!r) {
		pcpm_os_unmap(p, len);
		return NULL;
	}
	huge_region_init(r, p, len);
	if (!pcpm_map_set(p, len, r)) { /* out of memory for the radix map */
		pcpm_map_set(p, len, NULL);
		pcpm_os_unmap(p, len);
		pcpm_region_free(r);
		return NULL;
	}
	atomic_fetch_add_explicit(&huge_bytes, len, memory_order_relaxed);
	atomic_fetch_add_explicit(&huge_count, 1, memory_order_relaxed);
	return p;
}

/* From a signal handler: a mapping of its own, registered with trylocks only; NULL when a
 * lock is taken (the nested-allocation fallback of kernel-pcp.md §12.2). */
void *huge_alloc_nested(size_t len, size_t align)
{
	char *p = pcpm_os_map(len, MAX(align, HUGE_ALIGN));
	if (!p)
		return NULL;
	struct region *r = pcpm_region_new_try();
	if (!r) {
		pcpm_os_unmap(p, len);
		return NULL;
	}
	huge_region_init(r, p, len);
	if (!pcpm_map_set_try(p, len, r)) {
		pcpm_os_unmap(p, len);
		return NULL; /* the region struct is lost (64 bytes; freeing it needs meta_lock) */
	}
	atomic_fetch_add_explicit(&huge_allocs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&huge_bytes, len, memory_order_relaxed);
	atomic_fetch_add_explicit(&huge_count, 1, memory_order_relaxed);
	return p;
}


void huge_unmap(struct region *r)
{
	pcpm_map_set(huge_base(r), r->len, NULL);
	huge_unmap_pages(r);
	pcpm_region_free(r);
}


/*
 * Puts the free mapping r into the cache, huge_lock held.  A cached
 * neighbour whose range touches r's (the other half of an earlier split, or the next
 * mapping) is merged into r first, as the buddy allocator merges a freed block with its
 * buddy, so pieces split off for smaller requests grow back into one mapping that a larger
 * request reuses without faults.  Makes room by evicting the oldest entries.  Returns what
 * the caller unmaps once the lock is dropped: the evicted entries and, when r does not fit
 * at all, r (on the list through deferred_next); the structs of merged neighbours go to
 * *absorbed (the same list) for pcpm_region_free.
 */
static struct region *__huge_cache_put(struct region *r, struct region **absorbed)
{
	struct region *unmap = NULL;
	for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
		struct region *c = huge_cache[i];
		if (!c || r->len + c->len > HUGE_CACHE_BYTES)
			continue;
		bool below = huge_base(c) + c->len == huge_base(r);
		if (!below && huge_base(r) + r->len != huge_base(c))
			continue;
		huge_cache[i] = NULL;
		if (c->dirty)
			huge_cached_bytes -= c->len;
		if (below)
			huge_set_base(r, huge_base(c));
		r->len += c->len;
		r->dirty = r->dirty || c->dirty ? r->len : 0;
		r->freed_ms = MAX(r->freed_ms, c->freed_ms);
		/* the merged range's leaves exist (both halves were published): cannot fail */
		(void)pcpm_map_set(huge_base(r), r->len, r);
		c->deferred_next = *absorbed;
		*absorbed = c;
		atomic_fetch_sub_explicit(&huge_count, 1, memory_order_relaxed);
		i = -1; /* the merged mapping may touch another entry */
	}
	size_t add = r->dirty ? r->len : 0;
	int slot = -1;
	for (int i = 0; i < HUGE_CACHE_SLOTS; i++)
		if (!huge_cache[i])
			slot = i;
	/* room: evict the oldest entries until a slot is free and the resident budget allows r */
	while (add <= HUGE_CACHE_BYTES && (slot < 0 || huge_cached_bytes + add > HUGE_CACHE_BYTES)) {
		int old = -1;
		for (int i = 0; i < HUGE_CACHE_SLOTS; i++)
			if (huge_cache[i] && (old < 0 || huge_cache[i]->freed_ms < huge_cache[old]->freed_ms))
				old = i;
		if (old < 0)
			break;
		struct region *v = huge_cache[old];
		huge_cache[old] = NULL;
		if (v->dirty)
			huge_cached_bytes -= v->len;
		v->deferred_next = unmap;
		unmap = v;
		slot = old;
	}
	if (slot >= 0 && huge_cached_bytes + add <= HUGE_CACHE_BYTES) {
		huge_cache[slot] = r;
		r->next_free = (struct region *)HUGE_CACHED;
		huge_cached_bytes += add;
	} else {
		r->deferred_next = unmap;
		unmap = r;
	}
	return unmap;
}

/* Unmaps what __huge_cache_put evicted and frees the structs it merged away. */
static void huge_cache_put_done(struct region *unmap, struct region *absorbed)
{
	while (unmap) {
		struct region *next = unmap->deferred_next;
		unmap->next_free = NULL;
		huge_unmap(unmap);
		unmap = next;
	}
	while (absorbed) {
		struct region *next = absorbed->deferred_next;
		pcpm_region_free(absorbed);
		absorbed = next;
	}
}


/* Puts the free mapping r (its pages resident) into the cache. */
void huge_cache_put(struct region *r)
{
	r->dirty = r->len;
	r->freed_ms = pcpm_now_ms();
	struct region *absorbed = NULL;
	huge_lock_take();
	struct region *unmap = __huge_cache_put(r, &absorbed);
	huge_lock_drop();
	huge_cache_put_done(unmap, absorbed);
}

void huge_free(struct region *r)
{
	if (r->len > HUGE_CACHE_MAX) {
		huge_unmap(r);
		return;
	}
	huge_cache_put(r);
}

void huge_cache_take_neighbours(char *old, size_t len, size_t max_bytes, struct region **below,
				struct region **above)
{
	*below = *above = NULL;
	huge_lock_take();
	for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
		struct region *c = huge_cache[i];
		size_t have = len + (*below ? (*below)->len : 0) + (*above ? (*above)->len : 0);
		if (!c || have + c->len > max_bytes)
			continue;
		bool b = !*below && huge_base(c) + c->len == old;
		if (!b && (*above || old + len != huge_base(c)))
			continue;
		huge_cache[i] = NULL;
		if (c->dirty)
			huge_cached_bytes -= c->len;
		/* stays HUGE_CACHED meanwhile: a double free of it is still reported */
		if (b)
			*below = c;
		else
			*above = c;
	}
	huge_lock_drop();
}

void huge_cache_put_back(struct region *below, struct region *above)
{
	if (above)
		above->deferred_next = NULL;
	if (below)
		below->deferred_next = above;
	if (below || above)
		huge_cache_put_list(below ? below : above);
}

void huge_account(long dcount, long dbytes)
{
	atomic_fetch_add_explicit(&huge_count, (size_t)dcount, memory_order_relaxed);
	atomic_fetch_add_explicit(&huge_bytes, (size_t)dbytes, memory_order_relaxed);
}

/* Unmaps every cached mapping; true when there was one. */
bool huge_cache_drain(void)
{
	bool any = false;
	for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
		/* racy look first, as huge_cache_decay: an empty slot costs no lock */
		if (!__atomic_load_n(&huge_cache[i], __ATOMIC_RELAXED))
			continue;
		huge_lock_take();
		struct region *r = huge_cache[i];
		huge_cache[i] = NULL;
		if (r && r->dirty)
			huge_cached_bytes -= r->len;
		huge_lock_drop();
		if (r)
			huge_unmap(r);
		any |= r != NULL;
	}
	return any;
}

/* Periodic work: cached mappings unused for half a period give their pages back (stay
 * mapped), as the zone purge does with free blocks. */
void huge_cache_decay(uint64_t now)
{
	/* Racy first look (relaxed loads of words written under huge_lock): only resident
	 * (dirty) mappings decay and huge_cached_bytes counts exactly those, so 0 means there
	 * is nothing to do, and an empty slot is skipped without the lock.  A mapping cached
	 * meanwhile is only seen at the next period, as one cached just after this pass. */
	if (!__atomic_load_n(&huge_cached_bytes, __ATOMIC_RELAXED))
		return;
	for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
		if (!__atomic_load_n(&huge_cache[i], __ATOMIC_RELAXED))
			continue;
		huge_lock_take();
		struct region *r = huge_cache[i];
		if (!r || !r->dirty || now - r->freed_ms < (uint64_t)pcpm_cfg.decay_ms / 2) {
			huge_lock_drop();
			continue;
		}
		huge_cache[i] = NULL; /* off the cache while the lock is dropped */
		huge_cached_bytes -= r->len;
		huge_lock_drop();
		if (pcpm_os_purge(huge_base(r), r->len))
			r->dirty = 0; /* else it stays dirty: calloc must clear it */
		else
			pcpm_verbose("purge: madvise of a cached %zu KiB mapping failed: errno %d",
				     r->len >> 10, pcpm_purge_errno);
		huge_lock_take();
		if (!huge_cache[i]) {
			huge_cache[i] = r;
			if (r->dirty)
				huge_cached_bytes += r->len;
			r = NULL;
		}
		huge_lock_drop();
		if (r)
			huge_unmap(r);
	}
}



/*
 * Grows or shrinks a huge mapping with mremap; the result stays 4 MiB aligned.  NULL when
 * it cannot (r unchanged), e.g. a mapping __huge_gather built from several VMAs.  Granules
 * the mapping leaves are cleared before the system call frees them: from then on the kernel
 * may hand the range to another thread's mapping, whose granules must stay set.
 */
static void *__huge_realloc(struct region *r, size_t len)
{
	if (len == r->len)
		return huge_base(r);
	char *old = huge_base(r);
	size_t oldlen = r->len;
	char *g = (char *)ALIGN_UP((uintptr_t)old + len, HUGE_ALIGN); /* first granule left */
	bool shrink = len < oldlen && g < old + oldlen;
	if (shrink)
		pcpm_map_set(g, (size_t)(old + oldlen - g), NULL);
	/* the map's leaves for the new range first: publishing it below then cannot fail */
	void *p = pcpm_map_reserve(old, len) ? pcpm_os_remap(old, oldlen, len, NULL) : NULL;
	if (!p) {
		if (shrink)
			(void)pcpm_map_set(g, (size_t)(old + oldlen - g), r);
		/* move: into an aligned reservation, so the pages are moved, not copied */
		char *dst = pcpm_os_reserve(len, HUGE_ALIGN);
		if (!dst)
			return NULL;
		if (!pcpm_map_reserve(dst, len)) {
			pcpm_os_unmap(dst, len);
			return NULL;
		}
		pcpm_map_set(old, oldlen, NULL);
		p = pcpm_os_remap(old, oldlen, len, dst);
		if (!p) {
			(void)pcpm_map_set(old, oldlen, r); /* the leaves exist: cannot fail */
			pcpm_os_unmap(dst, len);
			return NULL;
		}
	}
	huge_set_base(r, p);
	r->len = len;
	(void)pcpm_map_set(p, len, r); /* reserved above: cannot fail */
	if (len > oldlen)
		atomic_fetch_add_explicit(&huge_bytes, len - oldlen, memory_order_relaxed);
	else
		atomic_fetch_sub_explicit(&huge_bytes, oldlen - len, memory_order_relaxed);
	return p;
}

void *huge_realloc(struct region *r, size_t len)
{
	/* a failed mremap (ENOMEM: no room to grow in place; EFAULT: several VMAs) is no
	 * failure of realloc, which moves the block then: errno stays as the program left it */
	int e = errno;
	void *p = __huge_realloc(r, len);
	errno = e;
	return p;
}

void huge_init(bool hide_bases)
{
	pcpm_huge_base_mask = hide_bases ? (uintptr_t)1 << 63 : 0;
}

size_t huge_cache_resident(void)
{
	return __atomic_load_n(&huge_cached_bytes, __ATOMIC_RELAXED);
}

void huge_usage(size_t *count, size_t *bytes)
{
	*count = atomic_load_explicit(&huge_count, memory_order_relaxed);
	*bytes = atomic_load_explicit(&huge_bytes, memory_order_relaxed);
}

void huge_live_usage(bool nowait, size_t *count, size_t *bytes)
{
	size_t n = 0, b = 0;
	/* a signal handler waits for no lock: the cache then counts as in use */
	if (nowait ? !lockstat_trylock(&huge_lock, &huge_ls) : (huge_lock_take(), false)) {
		huge_usage(count, bytes);
		return;
	}
	for (unsigned i = 0; i < HUGE_CACHE_SLOTS; i++)
		if (huge_cache[i]) {
			n++;
			b += huge_cache[i]->len;
		}
	huge_usage(count, bytes);
	huge_lock_drop();
	*count = *count > n ? *count - n : 0;
	*bytes = *bytes > b ? *bytes - b : 0;
}

void huge_stats_add(struct pcpm_stats *s)
{
	s->huge_alloc += atomic_load_explicit(&huge_allocs, memory_order_relaxed);
	s->huge_cache_hits += atomic_load_explicit(&huge_hits, memory_order_relaxed);
	s->mapped_bytes += atomic_load_explicit(&huge_bytes, memory_order_relaxed);
	struct lock_sum ls = { 0 };
	lock_sum_add(&ls, &huge_ls);
	PCPM_STATS_LOCK(s, huge, &ls);
}

void huge_lock_all(void)
{
	pcpm_lock(&huge_lock);
}

void huge_unlock_all(void)
{
	pcpm_unlock(&huge_lock);
}

void huge_reset_locks(void)
{
	pcpm_lock_reset(&huge_lock);
}
