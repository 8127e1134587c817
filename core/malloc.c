/*
 * malloc.c - the allocation API: initialisation, size dispatch, large page runs, huge
 * mappings, realloc, aligned allocation, trim and fork (see malloc.h).
 */
#define _GNU_SOURCE
#include "alloc.h"
#include "config.h"
#include "early.h"
#include "secure.h"
#include "topology.h"
#include "vmstat.h"
#include "vgmode.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void huge_cache_decay(uint64_t now);

static pcpm_lock_t init_lock PCPM_HOT = PCPM_LOCK_INIT;
static uintptr_t huge_base_mask PCPM_HOT; /* 0, or 1 << 63 in memcheck mode (see huge_base) */
static _Atomic int init_done PCPM_HOT;

/*
 * PCPMALLOC_VERBOSE=1: the configuration in force, as one block written with one write(2)
 * (built in a static buffer under init_lock: no malloc, nothing on a small stack).
 */
static char config_block[8192];

static void print_configuration(void)
{
	static const char *const cpu_src[] = {"rseq", "sched_getcpu", "thread-id hash"};
	static const char *const topo[] = {"lazy", "now", "off"};
	char *b = config_block;
	size_t len = sizeof(config_block), n = 0;
	n = pcpm_bappend(b, len, n, "pcpmalloc: pcpmalloc %s in pid %d: configuration in force\n",
			 PCPM_VERSION, (int)getpid());
	n = pcpm_config_describe(b, len, n);
	const struct pcpm_cpu_cache *cc = pcpm_cpu_cache(0);
	const struct per_cpu_pages *pcp = &pcpm_pcp[0];
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   cpus: %d pcp slots, %d CPUs usable; current CPU from %s\n",
			 pcpm_nr_cpus, pcpm_nr_online,
			 pcp_uses_rseq() ? "rseq" : cpu_src[pcpm_cfg.cpu_source == CPU_TID ? 2 : 1]);
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   caches (cpu 0): L2 %zu KiB, LLC %zu KiB shared by %d, slice %zu KiB "
			 "(provisional; hwloc discovery: %s)\n",
			 cc->l2_bytes >> 10, cc->llc_bytes >> 10, cc->llc_shared, cc->slice_bytes >> 10,
			 topo[pcpm_cfg.topology]);
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   pcp (cpu 0): batch %d, high_min %d, high_max %d pages, "
			 "free_high_batch %s, high policy %s\n",
			 pcp->batch, pcp->high_min, pcp->high_max,
			 (pcp->flags & PCPF_FREE_HIGH_BATCH) ? "on" : "off",
			 pcpm_cfg.high_policy ? "heap" : "cache");
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   slab: %d size classes, 16 B .. %d KiB; thread caches %s, %u objects "
			 "per refill/flush\n",
			 NR_SIZE_CLASSES, SLAB_PAGED_MAX >> 10,
			 pcpm_tcache_cap[0] ? "on" : "off", tcache_fbatch());
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   arena: %zu MiB of address space reserved per arena (when the first "
			 "is needed), committed %d MiB at a time; own mappings above %lu MiB\n",
			 pcpm_arena_reserve_bytes() >> 20, pcpm_cfg.arena_chunk_mb, HUGE_THRESHOLD >> 20);
	n = pcpm_bappend(b, len, n,
			 "pcpmalloc:   purge: free memory unused for %d ms, or beyond %d%% of the recent "
			 "peak in use (at least %d MiB); decay thread %s\n",
			 pcpm_cfg.decay_ms, pcpm_cfg.dirty_pct, pcpm_cfg.dirty_min_mb,
			 pcpm_cfg.decay_thread ? "on (started at the first allocation)" : "off");
	n = pcpm_bappend(b, len, n, "pcpmalloc:   valgrind: memcheck mode %s\n",
			 pcpm_vg ? "on" : "off");
	n = pcpm_bappend(b, len, n, "pcpmalloc: end of configuration\n");
	pcpm_write_stderr(b, n);
}

bool pcpm_init(void)
{
	if (likely(atomic_load_explicit(&init_done, memory_order_acquire)))
		return true;
	pcpm_lock(&init_lock);
	if (!atomic_load_explicit(&init_done, memory_order_relaxed)) {
		pcpm_config_init();
		pcpm_secure = pcpm_cfg.secure;
		pcpm_vg_init();
		/* memcheck mode describes every block to memcheck; secure mode's canaries, junk
		 * and whole-slab carving write where it has said "no access" (false reports), and
		 * its slabs hand out object 0, which memcheck mode keeps back (valid frees
		 * aborted as invalid): memcheck, which sees more, wins */
		if (pcpm_vg && pcpm_secure) {
			pcpm_secure = false;
			pcpm_warn("PCPMALLOC_SECURE=1 ignored: memcheck mode is on (PCPMALLOC_VALGRIND)");
		}
		huge_base_mask = pcpm_vg ? (uintptr_t)1 << 63 : 0;
		pcpm_topology_init();
		pcpm_zone_init(&pcpm_zone);
		/* the one step that can fail (out of memory): nothing before it needs undoing,
		 * so a later call simply starts over */
		if (!pcpm_pcp_init()) {
			pcpm_unlock(&init_lock);
			return false;
		}
		pcpm_slab_init();
		pcpm_tcache_init();
		pcpm_vmstat_wanted = pcpm_cfg.decay_thread;
		pcpm_periodic_hook = huge_cache_decay;
		pcpm_stats_init();
		if (pcpm_cfg.verbose)
			print_configuration();
		atomic_store_explicit(&init_done, 1, memory_order_release);
	}
	pcpm_unlock(&init_lock);
	return true;
}

void pcpm_bad_pointer(const char *call, const void *p)
{
	pcpm_fatal("%s(): invalid pointer %p", call, p);
}

static PCPM_COLD void double_free(const char *call, const void *p)
{
	pcpm_fatal("%s(): double free %p", call, p);
}

/* Is the page inside a free block, on a pcp list or in the buddy free_area?  A free block's
 * head carries its order; pg is inside it when one of its aligned ancestors is such a head.
 * Racy without the zone lock: only used to word an abort message. */
static bool page_in_free_block(struct page *pg)
{
	struct arena *a = arena_of_page(pg);
	size_t pfn = page_pfn(pg);
	for (unsigned o = 0; o <= MAX_PAGE_ORDER; o++) {
		struct page *h = a->desc + (pfn & ~((1UL << o) - 1));
		if ((h->state == PG_BUDDY || h->state == PG_PCP) && h->order >= o)
			return true;
	}
	return false;
}

/* p is in arena memory but is no live block: a page-aligned pointer into a free block (back
 * on a pcp list or in the zone, merged with its buddies or not) is a double free, anything
 * else an invalid pointer. */
static PCPM_COLD __attribute__((noreturn)) void bad_page_pointer(const char *call, const void *p,
								 struct page *pg)
{
	if (!((uintptr_t)p & (PAGE_SIZE - 1)) && pg->state != PG_SLAB && pg->state != PG_LARGE &&
	    page_in_free_block(pg))
		double_free(call, p);
	pcpm_bad_pointer(call, p);
}

static inline void count_malloc(void)
{
	tcache_count(false);
}

/* ---- huge: mappings of their own, registered in the radix map ----------------------- */

#define HUGE_ALIGN (4UL << 20) /* one granule per mapping start: no two share a granule */
#define HUGE_CACHE_SLOTS 16
#define HUGE_CACHE_MAX (64UL << 20)	  /* larger mappings are unmapped at once */
#define HUGE_CACHE_BYTES (256UL << 20) /* resident bytes the cache may hold */

/*
 * Freed mappings stay mapped and resident in a small cache (as glibc's heap keeps blocks up
 * to its dynamic mmap threshold), so a program that frees and allocates big blocks reuses
 * them without page faults; a larger cached mapping is shrunk in place with mremap.  The
 * periodic purge gives cached pages back once they stayed unused for PCPMALLOC_DECAY_MS.
 */
static pcpm_lock_t huge_lock = PCPM_LOCK_INIT;
static struct region *huge_cache[HUGE_CACHE_SLOTS];
static size_t huge_cached_bytes; /* resident bytes in the cache, under huge_lock */
static _Atomic size_t huge_bytes, huge_count;
static _Atomic uint64_t huge_allocs, huge_hits;

enum { HUGE_LIVE = 0, HUGE_CACHED = 1, HUGE_DEFERRED = 2 };
#define huge_state(r) ((int)(uintptr_t)(r)->next_free)

/* Mappings freed by signal handlers (huge_free_nested), freed by the next huge_alloc or
 * huge_free outside a handler. */
static _Atomic(struct region *) huge_deferred;
static void huge_free(struct region *r);

static void huge_drain_deferred(void)
{
	if (likely(!atomic_load_explicit(&huge_deferred, memory_order_relaxed)))
		return;
	struct region *r = atomic_exchange_explicit(&huge_deferred, NULL, memory_order_acquire);
	while (r) {
		struct region *next = r->deferred_next;
		r->next_free = NULL;
		huge_free(r);
		r = next;
	}
}

static inline char *huge_base(const struct region *r);

static void huge_free_nested(struct region *r)
{
	/* A mapping whose region struct came from the lock-free pool goes at once: its radix
	 * leaves exist (no map_lock) and the pool takes the struct back with one atomic op, so
	 * a handler that keeps interrupting a lock holder does not run the pool dry. */
	if (pcpm_region_in_pool(r) && pcpm_map_set_try(huge_base(r), r->len, NULL)) {
		pcpm_os_unmap(huge_base(r), r->len);
		atomic_fetch_sub_explicit(&huge_bytes, r->len, memory_order_relaxed);
		atomic_fetch_sub_explicit(&huge_count, 1, memory_order_relaxed);
		pcpm_region_free(r);
		return;
	}
	r->next_free = (struct region *)HUGE_DEFERRED;
	struct region *h = atomic_load_explicit(&huge_deferred, memory_order_relaxed);
	do
		r->deferred_next = h;
	while (!atomic_compare_exchange_weak_explicit(&huge_deferred, &h, r, memory_order_release,
						      memory_order_relaxed));
}

static inline char *huge_base(const struct region *r);

/* Secure mode: the last page of the mapping is a guard (no VMA split where the kernel has
 * MADV_GUARD_INSTALL, so mremap still sees one mapping), the bytes between the request and
 * the guard carry the canary. */
static void huge_secure_arm(struct region *r, size_t size)
{
	r->req = size;
	pcpm_os_guard_install(huge_base(r) + r->len - PAGE_SIZE, PAGE_SIZE);
	secure_fill_canary(huge_base(r) + size, huge_base(r) + r->len - PAGE_SIZE);
}

static void huge_unmap(struct region *r);
static void *huge_realloc(struct region *r, size_t size);
static struct region *__huge_cache_put(struct region *r, struct region **absorbed);
static void huge_cache_put_done(struct region *unmap, struct region *absorbed);

/*
 * The user pointer of a huge mapping.  In memcheck mode it is stored with its top bit set
 * (not a pointer memcheck's leak check would follow), so that a leaked huge block shows as
 * "definitely lost", not as reachable from pcpmalloc's region table.
 */

static inline char *huge_base(const struct region *r)
{
	return (char *)((uintptr_t)r->base ^ huge_base_mask);
}

static inline void huge_set_base(struct region *r, char *p)
{
	r->base = (char *)((uintptr_t)p ^ huge_base_mask);
}

/* Describes a fresh mapping of len bytes at p in region r (secure mode: the caller arms it,
 * huge_secure_arm). */
static void huge_region_init(struct region *r, char *p, size_t len)
{
	r->kind = REGION_HUGE;
	huge_set_base(r, p);
	r->len = len;
	r->dirty = 0; /* fresh anonymous memory reads as zero */
	r->next_free = NULL;
}

/* Shrinks a mapping in place to len bytes (len < r->len). */
static void huge_shrink(struct region *r, size_t len)
{
	pcpm_map_set(huge_base(r), r->len, NULL);
	pcpm_os_unmap(huge_base(r) + len, r->len - len);
	atomic_fetch_sub_explicit(&huge_bytes, r->len - len, memory_order_relaxed);
	r->len = len;
	(void)pcpm_map_set(huge_base(r), len, r); /* leaves of a subrange exist: cannot fail */
}

static bool reclaim_address_space(void);
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
	t->dirty = r->dirty;
	t->freed_ms = r->freed_ms;
	t->next_free = NULL;
	t->deferred_next = NULL;
	t->req = 0;
	(void)pcpm_map_set(huge_base(t), t->len, t); /* the leaves exist (r's): cannot fail */
	r->len = keep;
	atomic_fetch_add_explicit(&huge_count, 1, memory_order_relaxed);
	struct region *absorbed = NULL;
	pcpm_lock(&huge_lock);
	struct region *unmap = __huge_cache_put(t, &absorbed);
	pcpm_unlock(&huge_lock);
	huge_cache_put_done(unmap, absorbed);
}

/* Puts the mappings on a deferred_next list back into the cache. */
static void huge_cache_put_list(struct region *list)
{
	struct region *unmap = NULL, *absorbed = NULL;
	pcpm_lock(&huge_lock);
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
	pcpm_unlock(&huge_lock);
	huge_cache_put_done(unmap, absorbed);
}

/*
 * No cached mapping is large enough for len bytes (huge_lock held, dropped
 * on return): build one block from several.  The resident cached mappings, largest first,
 * until they hold len bytes, are moved with mremap into one new 4 MiB-aligned reservation:
 * mremap moves page-table entries, so their pages come along resident, without a copy or a
 * fault, and a program whose large blocks change size reuses the memory it freed (as a page
 * heap reuses free spans) instead of faulting in fresh pages beside it.  The last mapping
 * gives only its tail and keeps its head in the cache; what the cache cannot cover is
 * committed fresh.  The result may span several VMAs, which mremap cannot grow or move as
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
	pcpm_unlock(&huge_lock);
	if (!list)
		return NULL;
	struct region *r = pcpm_region_new();
	char *dst = r ? pcpm_os_reserve(len, HUGE_ALIGN) : NULL;
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
	if (off < len && !pcpm_os_commit(dst + off, len - off)) {
		/* the moved pages go with the reservation */
		pcpm_os_unmap(dst, len);
		pcpm_region_free(r);
		r = NULL;
	}
	if (r) {
		huge_region_init(r, dst, len);
		r->dirty = 1;
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

static void *huge_alloc(size_t size, size_t align)
{
	size_t len = ALIGN_UP(size, PAGE_SIZE) + (pcpm_secure ? PAGE_SIZE : 0);
	if (len < size)
		return NULL;
	huge_drain_deferred();
	atomic_fetch_add_explicit(&huge_allocs, 1, memory_order_relaxed);
	if (align <= HUGE_ALIGN) {
		/* best fit among the cached mappings */
		pcpm_lock(&huge_lock);
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
			if (pcpm_secure)
				huge_secure_arm(pcpm_region_of(p), size);
			atomic_fetch_add_explicit(&huge_hits, 1, memory_order_relaxed);
			return p;
		}
		struct region *r = huge_cache[best];
		huge_cache[best] = NULL;
		if (r->dirty)
			huge_cached_bytes -= r->len;
		r->next_free = NULL;
		pcpm_unlock(&huge_lock);
		if (r->len > ALIGN_UP(len, HUGE_ALIGN))
			huge_split(r, ALIGN_UP(len, HUGE_ALIGN));
		else if (r->len > len + len / 4)
			huge_shrink(r, len);
		if (pcpm_secure)
			huge_secure_arm(r, size);
		atomic_fetch_add_explicit(&huge_hits, 1, memory_order_relaxed);
		return huge_base(r);
	}
fresh:;
	char *p = pcpm_os_map(len, MAX(align, HUGE_ALIGN));
	if (!p && errno == ENOMEM && reclaim_address_space())
		p = pcpm_os_map(len, MAX(align, HUGE_ALIGN));
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
	if (pcpm_secure)
		huge_secure_arm(r, size);
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
static void *huge_alloc_nested(size_t size, size_t align)
{
	size_t len = ALIGN_UP(size, PAGE_SIZE) + (pcpm_secure ? PAGE_SIZE : 0);
	if (len < size)
		return NULL;
	char *p = pcpm_os_map(len, MAX(align, HUGE_ALIGN));
	if (!p)
		return NULL;
	struct region *r = pcpm_region_new_try();
	if (!r) {
		pcpm_os_unmap(p, len);
		return NULL;
	}
	huge_region_init(r, p, len);
	if (pcpm_secure)
		huge_secure_arm(r, size);
	if (!pcpm_map_set_try(p, len, r)) {
		pcpm_os_unmap(p, len);
		return NULL; /* the region struct is lost (64 bytes; freeing it needs meta_lock) */
	}
	atomic_fetch_add_explicit(&huge_allocs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&huge_bytes, len, memory_order_relaxed);
	atomic_fetch_add_explicit(&huge_count, 1, memory_order_relaxed);
	return p;
}

static void huge_unmap(struct region *r)
{
	pcpm_map_set(huge_base(r), r->len, NULL);
	pcpm_os_unmap(huge_base(r), r->len);
	atomic_fetch_sub_explicit(&huge_bytes, r->len, memory_order_relaxed);
	atomic_fetch_sub_explicit(&huge_count, 1, memory_order_relaxed);
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
		r->dirty |= c->dirty;
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

/*
 * Secure mode: a freed mapping's pages are not left where the program's pointers point.
 * huge_quarantine moves them (mremap: page tables, no copy, no fault) to a fresh 4 MiB
 * aligned address no pointer knows, where they are cached as in the default mode (split,
 * merged, gathered), and leaves the old range reserved PROT_NONE and empty: a use after free
 * faults as on an unmapped range, and a second free of the address finds a region struct in
 * the cached state (double free).  Two system calls whatever the size, where mprotect of
 * the whole mapping (PROT_NONE at free, read/write again at reuse) costs one page-table
 * update per page each way.  The quarantined ranges (address space only: no pages, no
 * commit charge) are kept in a FIFO of HUGE_QUAR_SLOTS within HUGE_QUAR_BYTES, the oldest
 * unmapped first, and all of them when address space runs out (reclaim_address_space).
 */
#define HUGE_QUAR_SLOTS 32
#define HUGE_QUAR_BYTES (1UL << 30)
static struct region *huge_quar[HUGE_QUAR_SLOTS]; /* a ring, under huge_lock */
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
 * deferred_next list; huge_lock held. */
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
static bool huge_quar_drain(void)
{
	pcpm_lock(&huge_lock);
	struct region *q = __huge_quar_evict(true);
	pcpm_unlock(&huge_lock);
	huge_quar_release_list(q);
	return q != NULL;
}

/* Puts the reserved range described by q (base, len) into the quarantine; the oldest
 * ranges go when it is over its bounds.  A free of its address reports a double free. */
static void huge_quar_add(struct region *q)
{
	q->dirty = 0;
	q->req = 0;
	q->deferred_next = NULL;
	q->next_free = (struct region *)HUGE_CACHED; /* free(old) again: a double free */
	(void)pcpm_map_set(huge_base(q), q->len, q); /* the leaves exist (the mapping's) */
	pcpm_lock(&huge_lock);
	struct region *v = huge_quar[huge_quar_next];
	if (v) {
		huge_quar_bytes -= v->len;
		v->deferred_next = NULL;
	}
	huge_quar[huge_quar_next] = q;
	huge_quar_next = (huge_quar_next + 1) % HUGE_QUAR_SLOTS;
	huge_quar_bytes += q->len;
	struct region *more = __huge_quar_evict(false);
	pcpm_unlock(&huge_lock);
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
	if (!alone) {
		pcpm_lock(&huge_lock);
		for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
			struct region *c = huge_cache[i];
			size_t have = len + (below ? below->len : 0) + (above ? above->len : 0);
			if (!c || have + c->len > HUGE_CACHE_BYTES)
				continue;
			bool b = !below && huge_base(c) + c->len == old;
			if (!b && (above || old + len != huge_base(c)))
				continue;
			huge_cache[i] = NULL;
			if (c->dirty)
				huge_cached_bytes -= c->len;
			/* stays HUGE_CACHED meanwhile: a double free of it is still reported */
			if (b)
				below = c;
			else
				above = c;
		}
		pcpm_unlock(&huge_lock);
	}
	char *from = below ? huge_base(below) : old;
	size_t lo = (size_t)(old - from), hi = above ? above->len : 0, total = lo + len + hi;
	char *dst = pcpm_os_reserve(total, HUGE_ALIGN);
	if (!dst || !pcpm_map_reserve(dst, total))
		goto fail;
	/* the live block's guard goes: the cache hands out plain read/write mappings */
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
		pcpm_os_guard_install(old + len - PAGE_SIZE, PAGE_SIZE);
		goto fail;
	}
	if (moved && lo) /* the neighbours' old ranges: plain free address space */
		pcpm_os_unmap(from, lo);
	if (moved && hi)
		pcpm_os_unmap(old + len, hi);
	for (int k = 0; k < 2; k++) {
		struct region *c = k ? above : below;
		if (!c)
			continue;
		r->dirty |= c->dirty;
		atomic_fetch_sub_explicit(&huge_count, 1, memory_order_relaxed);
		pcpm_region_free(c);
	}
	huge_set_base(r, dst);
	r->len = total;
	(void)pcpm_map_set(dst, total, r); /* reserved above: cannot fail */
	if (!moved) { /* the old range is free address space again */
		pcpm_region_free(q);
		return true;
	}
	q->kind = REGION_HUGE;
	huge_set_base(q, old);
	q->len = len;
	huge_quar_add(q);
	return true;
fail:
	if (dst)
		pcpm_os_unmap(dst, total);
	if (below || above) { /* back to the cache; then r alone (one VMA more likely) */
		if (above)
			above->deferred_next = NULL;
		if (below)
			below->deferred_next = above;
		huge_cache_put_list(below ? below : above);
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
	atomic_fetch_sub_explicit(&huge_bytes, r->len, memory_order_relaxed);
	atomic_fetch_sub_explicit(&huge_count, 1, memory_order_relaxed);
	huge_quar_add(r);
}

static void huge_free(struct region *r)
{
	if (pcpm_secure) {
		/* (a quarantined mapping may come out larger: merged with its neighbours) */
		if (r->len > HUGE_CACHE_MAX || !huge_quarantine(r)) {
			huge_discard(r);
			return;
		}
	} else if (r->len > HUGE_CACHE_MAX) {
		huge_unmap(r);
		return;
	}
	r->dirty = 1;
	r->freed_ms = pcpm_now_ms();
	struct region *absorbed = NULL;
	pcpm_lock(&huge_lock);
	struct region *unmap = __huge_cache_put(r, &absorbed);
	pcpm_unlock(&huge_lock);
	huge_cache_put_done(unmap, absorbed);
}

/* Unmaps every cached mapping; true when there was one. */
static bool huge_cache_drain(void)
{
	bool any = false;
	for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
		pcpm_lock(&huge_lock);
		struct region *r = huge_cache[i];
		huge_cache[i] = NULL;
		if (r && r->dirty)
			huge_cached_bytes -= r->len;
		pcpm_unlock(&huge_lock);
		if (r)
			huge_unmap(r);
		any |= r != NULL;
	}
	return any;
}

/*
 * Out of address space (ENOMEM from mmap or from an arena's growth): the direct-reclaim step
 * of __alloc_pages_slowpath, for address space.  What is free goes back to the zones (this
 * thread's cache, empty slabs, the pcps), cached huge mappings are unmapped, and each zone
 * unmaps the free ends of its arenas (zone_shrink_arenas).  True when address space came
 * back: the caller retries once.  Never from a signal handler (it takes every lock).
 */
static bool reclaim_address_space(void)
{
	if (pcpm_nested() || !atomic_load_explicit(&init_done, memory_order_acquire))
		return false;
	int e = errno;
	if (!pcpm_as_limited && pcpm_os_as_limited())
		pcpm_as_limited = true; /* setrlimit after start-up */
	tcache_flush_all(&pcpm_tc);
	slab_shrink_all();
	pcp_drain_all();
	huge_drain_deferred();
	bool got = huge_cache_drain();
	got |= huge_quar_drain();
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++)
		got |= zone_shrink_arenas(&pcpm_zones[n]) > 0;
	errno = e;
	return got;
}

/* Periodic work: cached mappings unused for half a period give their pages back (stay
 * mapped), as the zone purge does with free blocks. */
static void huge_cache_decay(uint64_t now)
{
	for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
		pcpm_lock(&huge_lock);
		struct region *r = huge_cache[i];
		if (!r || !r->dirty || now - r->freed_ms < (uint64_t)pcpm_cfg.decay_ms / 2) {
			pcpm_unlock(&huge_lock);
			continue;
		}
		huge_cache[i] = NULL; /* off the cache while the lock is dropped */
		huge_cached_bytes -= r->len;
		pcpm_unlock(&huge_lock);
		if (pcpm_os_purge(huge_base(r), r->len))
			r->dirty = 0; /* else it stays dirty: calloc must clear it */
		else
			pcpm_verbose("purge: madvise of a cached %zu KiB mapping failed: errno %d",
				     r->len >> 10, pcpm_purge_errno);
		pcpm_lock(&huge_lock);
		if (!huge_cache[i]) {
			huge_cache[i] = r;
			if (r->dirty)
				huge_cached_bytes += r->len;
			r = NULL;
		}
		pcpm_unlock(&huge_lock);
		if (r)
			huge_unmap(r);
	}
}

/* Resident bytes in the huge cache (racy; the decay worker's "anything to do?"). */
size_t pcpm_huge_cached_bytes(void)
{
	return huge_cached_bytes;
}

/*
 * Grows or shrinks a huge mapping with mremap; the result stays 4 MiB aligned.  NULL when
 * it cannot (r unchanged), e.g. a mapping __huge_gather built from several VMAs.  Granules
 * the mapping leaves are cleared before the system call frees them: from then on the kernel
 * may hand the range to another thread's mapping, whose granules must stay set.
 */
static void *huge_realloc(struct region *r, size_t size)
{
	size_t len = ALIGN_UP(size, PAGE_SIZE);
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

/*
 * ---- large: whole blocks of 2^order pages, from the pcp (orders 0..3) or the zone ----
 * Whole blocks, as alloc_pages(): a freed block merges back whole, so the next request of
 * that order reuses it while it is resident; trimming each block to the page instead leaves
 * tails that other sizes take, and the buddies never meet again.  Pages past the request
 * cost address space only until the program touches them.  realloc may turn a block into a
 * run of any length (shrunk or extended in place); runs go back with zone_free_run.
 */

static void *large_alloc(size_t size, size_t align)
{
	if (unlikely(pcpm_nested()))
		return huge_alloc_nested(size, align);
	size_t req = size;
	if (unlikely(pcpm_secure) && size >= SECURE_GUARD_MIN)
		size += PAGE_SIZE; /* room for the guard page */
	if (size > HUGE_THRESHOLD || align > HUGE_THRESHOLD)
		return huge_alloc(req, align);
	size_t np = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
	unsigned order = (unsigned)ilog2_ceil(np);
	unsigned align_order = align > PAGE_SIZE ? (unsigned)ilog2_ceil(align >> PAGE_SHIFT) : 0;
	struct page *pg;
	for (int attempt = 0;; attempt++) {
		unsigned o = MAX(order, align_order);
		pg = pcp_alloc(o); /* orders above 3 go straight to the zone */
		np = 1UL << o;
		if (pg || attempt)
			break;
		/* __alloc_pages_direct_reclaim's rule: drain every pcp, then retry once */
		pcp_drain_all();
	}
	if (!pg)
		return NULL;
	pcpm_tc.large_allocs++; /* thread-local; folded in by the tcache registry */
	pg->npages = (uint32_t)np;
	pg->state = PG_LARGE;
	char *p = page_address(pg);
	if (unlikely(pcpm_secure)) {
		/* guard page right after the request's last page; canary up to it */
		size_t gp = ALIGN_UP(req, PAGE_SIZE);
		pg->req_size = req;
		pg->flags |= PG_DIRTY;
		secure_fill_canary(p + req, p + gp);
		if (req >= SECURE_GUARD_MIN)
			pcpm_os_guard_install(p + gp, PAGE_SIZE);
	}
	return p;
}

/* Secure mode, a large block being freed: canary check, guard page off, junk fill. */
static void large_secure_release(char *p, struct page *pg, const char *call)
{
	size_t req = pg->req_size, gp = ALIGN_UP(req, PAGE_SIZE);
	secure_check_canary(p, p + req, p + gp, call);
	if (req >= SECURE_GUARD_MIN)
		pcpm_os_guard_remove(p + gp, PAGE_SIZE);
	/* junk over the first SECURE_JUNK_MAX bytes: enough to spoil stale pointers and
	 * headers a dangling reader would use, without a pass over the whole block */
	memset(p, SECURE_JUNK, MIN(req, (size_t)SECURE_JUNK_MAX));
}

/*
 * Secure mode, realloc of the large block p to size bytes (SLAB_MAX_SIZE < size): in place
 * when the run can shrink or grow there (zone_extend_run), as the default mode does, so a
 * growing buffer is not copied at every step.  The old canary is checked, the guard page
 * moves only when the request's last page changes, the canary is rewritten up to the new
 * last page.  NULL when the run cannot stay (the caller moves the block).
 */
static void *large_realloc_secure(char *p, struct page *pg, size_t size)
{
	size_t req = pg->req_size, gp = ALIGN_UP(req, PAGE_SIZE), ngp = ALIGN_UP(size, PAGE_SIZE);
	secure_check_canary(p, p + req, p + gp, "realloc");
	bool guard = req >= SECURE_GUARD_MIN, nguard = size >= SECURE_GUARD_MIN;
	size_t np = pg->npages, nnp = (ngp >> PAGE_SHIFT) + (nguard ? 1 : 0);
	if ((nnp << PAGE_SHIFT) > HUGE_THRESHOLD)
		return NULL;
	if (nnp > np && !zone_extend_run(page_zone(pg), pg, np, nnp))
		return NULL;
	bool same = guard && nguard && gp == ngp;
	if (guard && !same)
		pcpm_os_guard_remove(p + gp, PAGE_SIZE);
	if (nnp > np) {
		pg->npages = (uint32_t)nnp;
	} else if (nnp <= np / 2) { /* a tail worth giving back goes to the zone */
		pg->npages = (uint32_t)nnp;
		struct page *tail = pg + nnp;
		tail->flags = pg->flags;
		tail->arena = pg->arena;
		zone_free_run(page_zone(pg), tail, np - nnp);
	}
	pg->req_size = size;
	secure_fill_canary(p + size, p + ngp);
	if (nguard && !same)
		pcpm_os_guard_install(p + ngp, PAGE_SIZE);
	return p;
}

/* A run of 2^k pages that starts on a 2^k boundary is a buddy block: it goes back as one
 * (through the pcp for k <= 3).  Other runs (realloc resized them) go back page-run-wise;
 * a run extended in place can have a power-of-two length without that alignment. */
static void large_free_pages(struct page *pg, size_t np)
{
	if (!(np & (np - 1)) && !(page_pfn(pg) & (np - 1))) {
		pcp_free(pg, (unsigned)ilog2_ceil(np));
		return;
	}
	zone_free_run(page_zone(pg), pg, np);
}

static void large_free(struct page *pg)
{
	size_t np = pg->npages;
	pg->state = PG_NONE;
	large_free_pages(pg, np);
}

/* Classifies a pointer that is not a slab object: frees it, or aborts. */
void pcpm_free_slow(void *p, struct page *pg, const char *call)
{
	if (pg) {
		if (pg->state == PG_LARGE && p == page_address(pg)) {
			tcache_count(true);
			if (unlikely(pcpm_secure))
				large_secure_release(p, pg, call);
			if (unlikely(pcpm_nested())) {
				pg->state = PG_NONE;
				zone_free_run_nested(page_zone(pg), pg);
				return;
			}
			large_free(pg);
			return;
		}
		bad_page_pointer(call, p, pg);
	}
	if (pcpm_is_early(p)) {
		pcpm_early_free(p, call);
		return;
	}
	struct region *r = pcpm_region_of(p);
	if (r && r->kind == REGION_HUGE && huge_base(r) == p) {
		if (huge_state(r) != HUGE_LIVE)
			double_free(call, p);
		tcache_count(true);
		if (unlikely(pcpm_secure))
			secure_check_canary(p, huge_base(r) + r->req, huge_base(r) + r->len - PAGE_SIZE, call);
		if (unlikely(pcpm_nested())) {
			huge_free_nested(r);
			return;
		}
		huge_drain_deferred();
		huge_free(r);
		return;
	}
	pcpm_bad_pointer(call, p);
}

/* The key word matched: confirm or rule out a double free, then free normally. */
void pcpm_free_slab_checked(void *p, struct page *head, const char *call)
{
	PCPM_INSIDE_BEGIN();
	tcache_check_double_free(p, head, call);
	if (!tcache_push(p, head->cls))
		tcache_free_slow(p, head->cls);
	PCPM_INSIDE_END();
}

static void vg_free(void *p, struct page *pg, const char *call);

void pcpm_free_generic(void *p, const char *call)
{
	if (!p)
		return;
	PCPM_INSIDE_BEGIN();
	struct page *pg = pcpm_page_of(p);
	if (unlikely(pcpm_vg))
		vg_free(p, pg, call);
	else if (pg && pg->state == PG_SLAB)
		pcpm_free_slab(p, pg->slab_head, call);
	else
		pcpm_free_slow(p, pg, call);
	PCPM_INSIDE_END();
}

static size_t raw_usable(const void *p);

/*
 * malloc from a signal handler (kernel-pcp.md §12.2): a slab object when its cache lock is
 * free and a partial slab has room, else a mapping of its own.  align: power of two.
 */
static PCPM_NOINLINE void *malloc_nested(size_t n, size_t align)
{
	void *p = NULL;
	if (!atomic_load_explicit(&init_done, memory_order_acquire)) {
		if (align <= 16)
			p = pcpm_early_alloc(n);
		goto out;
	}
	if (n > PTRDIFF_MAX)
		goto out;
	size_t need = n + (pcpm_secure ? SECURE_TRAILER : 0);
	if (align <= 16 && need <= SLAB_MAX_SIZE) {
		unsigned c = size_to_class(need);
		p = slab_alloc_nested(c);
		if (p) {
			if (pcpm_secure)
				secure_arm_small(p, pcpm_class_size[c], n, "malloc");
			tcache_count(false);
			goto out;
		}
	}
	p = huge_alloc_nested(MAX(n, 1), align);
	if (p)
		tcache_count(false);
out:
	if (!p)
		errno = ENOMEM;
	else if (unlikely(pcpm_vg)) /* memcheck mode: described as every other block */
		pcpm_vg_alloced(p, n, raw_usable(p), false);
	return p;
}

static void *__malloc_slow(size_t n);

static size_t raw_usable(const void *p);

static PCPM_NOINLINE void *malloc_slow_inside(size_t n)
{
	PCPM_INSIDE_BEGIN();
	void *p = __malloc_slow(n);
	PCPM_INSIDE_END();
	return p;
}

void *pcpm_malloc_slow(size_t n)
{
	void *p;
	/* secure mode's small blocks: straight from the thread's own stack when it has one
	 * (no lock, no call: no pcpm_inside flag needed, see secure_malloc_small); the rest
	 * in a function of its own, so this part needs no stack frame */
	if (unlikely(pcpm_secure) && likely(n <= SLAB_MAX_SIZE - SECURE_TRAILER) &&
	    likely(p = secure_malloc_small(n)))
		return p;
	return malloc_slow_inside(n);
}

static void *__malloc_slow(size_t n)
{
	if (unlikely(pcpm_nested()))
		return malloc_nested(n, 0);
	/* before the allocator proper has started: the early area while it serves */
	if (unlikely(!atomic_load_explicit(&init_done, memory_order_acquire))) {
		void *p = pcpm_early_alloc(n);
		if (p)
			return p;
	}
	if (unlikely(!pcpm_init())) {
		errno = ENOMEM;
		return NULL;
	}
	tcache_ensure();
	pcpm_vmstat_maybe_start();
	void *p;
	for (bool retried = false;; retried = true) {
		if (unlikely(pcpm_secure) && n <= SLAB_MAX_SIZE - SECURE_TRAILER) {
			unsigned c = size_to_class(n + SECURE_TRAILER);
			p = tcache_alloc_slow(c);
			if (p)
				secure_arm_small(p, pcpm_class_size[c], n, "malloc");
		} else if (n <= SLAB_MAX_SIZE && !pcpm_secure) {
			p = tcache_alloc_slow(size_to_class(n));
		} else if (n <= SLAB_PAGED_MAX && !pcpm_secure) {
			p = tcache_alloc_slow(size_to_paged_class(n));
		} else if (n > PTRDIFF_MAX) {
			p = NULL;
		} else {
			p = large_alloc(n, 0);
			if (p)
				count_malloc();
		}
		/* the zone could not grow: address space held by free arena ends or cached
		 * mappings (ulimit -v) comes back, then one more try */
		if (likely(p) || retried || n > PTRDIFF_MAX || !reclaim_address_space())
			break;
	}
	if (unlikely(!p)) {
		errno = ENOMEM;
		return NULL;
	}
	if (unlikely(pcpm_vg))
		pcpm_vg_alloced(p, n, raw_usable(p), false);
	pcpm_topology_maybe_discover();
	return p;
}

/* ---- calloc / realloc ------------------------------------------------------------------ */

void *pcpm_calloc(size_t nmemb, size_t size)
{
	size_t n;
	if (unlikely(__builtin_mul_overflow(nmemb, size, &n))) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = pcpm_malloc(n);
	if (unlikely(!p))
		return NULL;
	if (n <= SLAB_MAX_SIZE) {
		memset(p, 0, n);
		return p;
	}
	struct page *pg = pcpm_page_of(p);
	if (pg && pg->state == PG_SLAB) { /* a paged class's object: slabs are reused */
		memset(p, 0, n);
		return p;
	}
	if (unlikely(pcpm_vg)) /* memcheck: zeros it knows to be defined */
		VALGRIND_MAKE_MEM_DEFINED(p, n);
	/* Page runs never written since they were committed or purged read as zero, and so
	 * do fresh or purged huge mappings; a reused resident one is cleared. */
	if (pg) {
		if (pg->flags & PG_DIRTY)
			memset(p, 0, n);
	} else {
		struct region *r = pcpm_region_of(p);
		if (r && r->dirty)
			memset(p, 0, n);
	}
	return p;
}

static size_t usable_size_call(const void *p, const char *call)
{
	struct page *pg = pcpm_page_of(p);
	if (pg) {
		if (pg->state == PG_SLAB) {
			struct page *head = pg->slab_head;
			if (slab_obj_index(head, p) < 0)
				pcpm_bad_pointer(call, p);
			if (unlikely(pcpm_secure))
				return secure_small_size(p, head->slab_cache->size, call);
			return head->slab_cache->size;
		}
		if (pg->state == PG_LARGE && p == page_address(pg))
			return unlikely(pcpm_secure) ? pg->req_size : (size_t)pg->npages << PAGE_SHIFT;
		pcpm_bad_pointer(call, p);
	}
	if (pcpm_is_early(p))
		return pcpm_early_usable(p, call);
	struct region *r = pcpm_region_of(p);
	if (!r || r->kind != REGION_HUGE || huge_base(r) != p || huge_state(r) != HUGE_LIVE)
		pcpm_bad_pointer(call, p);
	return unlikely(pcpm_secure) ? r->req : r->len;
}

/* Usable bytes of the block p (not NULL); aborts when p is no block. */
static size_t raw_usable(const void *p)
{
	return usable_size_call(p, "malloc_usable_size");
}

size_t pcpm_usable_size(const void *p)
{
	if (!p)
		return 0;
	size_t u = raw_usable(p);
	/* memcheck mode: the size asked for, as memcheck's own malloc_usable_size answers;
	 * the bytes past it are no-access */
	if (unlikely(pcpm_vg))
		u = pcpm_vg_block_size(p, u);
	return u;
}

static void *realloc_move(void *p, size_t old_usable, size_t size)
{
	void *q = pcpm_malloc(size);
	if (!q)
		return NULL;
	memcpy(q, p, MIN(old_usable, size));
	pcpm_free_call(p, "realloc");
	return q;
}

static void *vg_realloc(void *p, size_t size);
static void *__realloc(void *p, size_t size);
void *pcpm_realloc(void *p, size_t size)
{
	PCPM_INSIDE_BEGIN();
	void *q = __realloc(p, size);
	PCPM_INSIDE_END();
	return q;
}

static void *__realloc(void *p, size_t size)
{
	if (!p)
		return pcpm_malloc(size);
	if (size == 0) { /* glibc: realloc(p, 0) frees p and returns NULL */
		pcpm_free_call(p, "realloc");
		return NULL;
	}
	if (unlikely(size > PTRDIFF_MAX)) {
		errno = ENOMEM;
		return NULL;
	}
	if (unlikely(pcpm_vg))
		return vg_realloc(p, size);
	struct page *pg = pcpm_page_of(p);
	if (unlikely(pcpm_secure || pcpm_nested())) {
		/* a small block stays when its slot still fits (canary and trailer checked and
		 * moved); every other realloc moves, with the checks of malloc and free */
		if (pg && pg->state == PG_SLAB && slab_obj_index(pg->slab_head, p) >= 0 &&
		    ((uintptr_t *)p)[1] == pcpm_free_key)
			tcache_check_double_free(p, pg->slab_head, "realloc");
		if (pcpm_secure && !pcpm_nested() && pg && pg->state == PG_SLAB &&
		    slab_obj_index(pg->slab_head, p) >= 0) {
			struct page *head = pg->slab_head;
			size_t slot = head->slab_cache->size;
			if (size <= slot - SECURE_TRAILER &&
			    (size_to_class(size + SECURE_TRAILER) == head->cls || size >= slot / 2)) {
				secure_resize_small(p, slot, size, "realloc");
				return p;
			}
		}
		if (pcpm_secure && !pcpm_nested() && pg && pg->state == PG_LARGE &&
		    p == page_address(pg) && size > SLAB_MAX_SIZE - SECURE_TRAILER &&
		    large_realloc_secure(p, pg, size))
			return p;
		/* a freed page run or huge mapping: a double free, as the default mode says */
		if (pg && pg->state != PG_SLAB && (pg->state != PG_LARGE || p != page_address(pg)))
			bad_page_pointer("realloc", p, pg);
		if (!pg) {
			struct region *r = pcpm_region_of(p);
			if (r && r->kind == REGION_HUGE && huge_base(r) == p && huge_state(r) != HUGE_LIVE)
				double_free("realloc", p);
		}
		return realloc_move(p, usable_size_call(p, "realloc"), size);
	}
	if (pg && pg->state == PG_SLAB) {
		struct page *head = pg->slab_head;
		if (slab_obj_index(head, p) < 0)
			pcpm_bad_pointer("realloc", p);
		if (((uintptr_t *)p)[1] == pcpm_free_key)
			tcache_check_double_free(p, head, "realloc");
		size_t usable = head->slab_cache->size;
		/* same class, or shrinking by less than half: stay */
		if (size <= usable && (size > SLAB_MAX_SIZE || size_to_class(size) == head->cls ||
				       size >= usable / 2))
			return p;
		return realloc_move(p, usable, size);
	}
	if (pg) {
		if (pg->state != PG_LARGE || p != page_address(pg))
			bad_page_pointer("realloc", p, pg);
		size_t np = pg->npages, usable = np << PAGE_SHIFT;
		size_t nnp = (size + PAGE_SIZE - 1) >> PAGE_SHIFT;
		if (size > SLAB_MAX_SIZE && size <= HUGE_THRESHOLD) {
			if (nnp <= np) {
				/* shrink in place; a tail worth giving back goes to the zone */
				if (nnp <= np / 2) {
					pg->npages = (uint32_t)nnp;
					struct page *tail = pg + nnp;
					tail->flags = pg->flags;
					tail->arena = pg->arena;
					zone_free_run(page_zone(pg), tail, np - nnp);
				}
				return p;
			}
			if (zone_extend_run(page_zone(pg), pg, np, nnp)) {
				pg->npages = (uint32_t)nnp;
				return p;
			}
		}
		return realloc_move(p, usable, size);
	}
	if (pcpm_is_early(p)) {
		size_t usable = pcpm_early_usable(p, "realloc");
		return size <= usable ? p : realloc_move(p, usable, size);
	}
	struct region *r = pcpm_region_of(p);
	if (!r || r->kind != REGION_HUGE || huge_base(r) != p)
		pcpm_bad_pointer("realloc", p);
	if (huge_state(r) == HUGE_CACHED)
		double_free("realloc", p);
	if (size > HUGE_THRESHOLD) {
		/* mremap fails on a mapping gathered from several (several VMAs): copy */
		void *q = huge_realloc(r, size);
		return q ? q : realloc_move(p, r->len, size);
	}
	return realloc_move(p, r->len, size);
}

void *pcpm_reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return pcpm_realloc(p, n);
}

/* ---- aligned allocation --------------------------------------------------------------- */

static void *__aligned_alloc_pow2(size_t align, size_t size);
static void *aligned_alloc_core(size_t align, size_t size);

/* align: a power of two >= 16. */
/*
 * The aligned fast path, as pcpm_malloc's: align a power of two, up to a page, size up to
 * SLAB_MAX_SIZE: the first class of at least max(size, align) bytes whose objects are
 * multiples of align (then every object is aligned: slabs are page aligned) from the
 * thread cache.  NULL when that stack is empty, and always in secure and memcheck mode
 * (their caches have no fast stacks): the caller takes aligned_alloc_slow.
 */
static inline __attribute__((always_inline)) void *aligned_alloc_fast(size_t align, size_t size)
{
	if (likely(size <= SLAB_MAX_SIZE && align <= PAGE_SIZE)) {
		for (unsigned c = size_to_class(MAX(size, align)); c < NR_SIZE_CLASSES; c++)
			if (!(pcpm_class_size[c] & (align - 1)))
				return tcache_pop(c);
	}
	return NULL;
}

static PCPM_NOINLINE void *aligned_alloc_slow(size_t align, size_t size)
{
	PCPM_INSIDE_BEGIN();
	void *p = __aligned_alloc_pow2(align, size);
	PCPM_INSIDE_END();
	return p;
}

/* align: a power of two (>= 16); the fast path inline, the rest out of line, so the fast
 * path saves no registers. */
static inline __attribute__((always_inline)) void *aligned_alloc_pow2(size_t align, size_t size)
{
	void *p = aligned_alloc_fast(align, size);
	if (likely(p))
		return p;
	/* secure mode: its own stacks, as pcpm_malloc_slow does */
	if (unlikely(pcpm_secure) && (p = secure_aligned_small(align, size)))
		return p;
	return aligned_alloc_slow(align, size);
}

static void *__aligned_alloc_pow2(size_t align, size_t size)
{
	if (align <= 16)
		return pcpm_malloc(size);
	if (unlikely(pcpm_nested()))
		return malloc_nested(size, align);
	if (unlikely(!pcpm_init())) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = aligned_alloc_core(align, size);
	if (unlikely(pcpm_vg) && p)
		pcpm_vg_alloced(p, size, raw_usable(p), false);
	return p;
}

static void *aligned_alloc_core(size_t align, size_t size)
{
	if (size > PTRDIFF_MAX || align > PTRDIFF_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	size_t need = MAX(size + (pcpm_secure ? SECURE_TRAILER : 0), align);
	if (need <= SLAB_MAX_SIZE) {
		/* a class whose objects are multiples of align in a slab aligned to at least
		 * align has every object aligned */
		for (unsigned c = size_to_class(need); c < NR_SIZE_CLASSES; c++) {
			/* align is a power of two: a mask, not a division; the cache (set up at
			 * first use) only for a class that passes */
			if (pcpm_class_size[c] & (align - 1))
				continue;
			struct kmem_cache *s = kmem_cache_of(c);
			if (align <= (PAGE_SIZE << s->order)) {
				void *p = tcache_pop(c);
				if (!p && unlikely(pcpm_secure) && !pcpm_vg)
					p = tcache_secure_pop(c);
				if (!p)
					p = tcache_alloc_slow(c);
				if (!p)
					errno = ENOMEM;
				else if (unlikely(pcpm_secure))
					secure_arm_small(p, s->size, size, "memalign");
				return p;
			}
		}
	}
	void *p = large_alloc(MAX(size, SLAB_MAX_SIZE + 1), align);
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	count_malloc();
	return p;
}

void *pcpm_memalign(size_t align, size_t size)
{
	if (align > SIZE_MAX / 2 + 1) { /* glibc's limit; smaller impossible ones: ENOMEM */
		errno = EINVAL;
		return NULL;
	}
	if (align < 16)
		align = 16;
	if (align & (align - 1)) /* glibc rounds a non-power of two up */
		align = (size_t)1 << (64 - __builtin_clzl(align));
	return aligned_alloc_pow2(align, size);
}

int pcpm_posix_memalign(void **out, size_t align, size_t size)
{
	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	void *p = aligned_alloc_fast(MAX(align, 16), size);
	if (!p) {
		int e = errno;
		p = aligned_alloc_slow(MAX(align, 16), size);
		if (!p) {
			errno = e;
			return ENOMEM;
		}
	}
	*out = p;
	return 0;
}

void *pcpm_aligned_alloc(size_t align, size_t size)
{
	if (align == 0 || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return aligned_alloc_pow2(MAX(align, 16), size);
}

void *pcpm_valloc(size_t size)
{
	return aligned_alloc_pow2(PAGE_SIZE, size);
}

void *pcpm_pvalloc(size_t size)
{
	size_t r = ALIGN_UP(size ? size : 1, PAGE_SIZE);
	if (r < size) {
		errno = ENOMEM;
		return NULL;
	}
	return aligned_alloc_pow2(PAGE_SIZE, r);
}

/* ---- trim, info, fork ----------------------------------------------------------------- */

static void vg_release(void *p);

int pcpm_trim(size_t pad)
{
	(void)pad;
	PCPM_INSIDE_BEGIN();
	if (pcpm_nested() || !pcpm_init()) { /* a handler: trimming takes every lock */
		PCPM_INSIDE_END();
		return 0;
	}
	if (unlikely(pcpm_vg))
		pcpm_vg_quarantine_drain(vg_release);
	tcache_flush_all(&pcpm_tc);
	slab_shrink_all();
	pcp_drain_all();
	huge_drain_deferred();
	huge_cache_drain();
	size_t purged = 0;
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++)
		purged += zone_purge(&pcpm_zones[n], 0, 0);
	PCPM_INSIDE_END();
	return purged > 0;
}

void pcpm_mallinfo(struct pcpm_mallinfo *mi)
{
	memset(mi, 0, sizeof(*mi));
	if (!atomic_load_explicit(&init_done, memory_order_acquire))
		return;
	size_t cached = 0, managed = 0, freep = 0, nfree = 0;
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++) {
		struct zone *z = &pcpm_zones[n];
		uint64_t refills, refill_pages, count; /* pages parked on the pcps are free too */
		pcp_zone_stats(z, &refills, &refill_pages, &count);
		cached += count;
		managed += z->managed_pages << PAGE_SHIFT;
		freep += z->free_pages;
		for (int o = 0; o < NR_PAGE_ORDERS; o++)
			nfree += z->free_area[o].nr_free;
	}
	size_t freeb = MIN((freep + cached) << PAGE_SHIFT, managed);
	mi->arena = managed;
	mi->ordblks = nfree;
	mi->fordblks = freeb;
	mi->uordblks = managed - freeb;
	mi->hblks = atomic_load_explicit(&huge_count, memory_order_relaxed);
	mi->hblkhd = atomic_load_explicit(&huge_bytes, memory_order_relaxed);
}

void pcpm_huge_stats_add(struct pcpm_stats *s);
void pcpm_huge_stats_add(struct pcpm_stats *s)
{
	s->huge_alloc += atomic_load_explicit(&huge_allocs, memory_order_relaxed);
	s->huge_cache_hits += atomic_load_explicit(&huge_hits, memory_order_relaxed);
	s->mapped_bytes += atomic_load_explicit(&huge_bytes, memory_order_relaxed);
}

/*
 * fork: take every lock in the allocator's lock order (init, kmem_caches, zone bring-up,
 * the pcps of every zone, every zone in node order, huge, arena/map/meta, tcache registry)
 * so the child gets consistent data; the child then resets the locks instead of unlocking
 * (their owners do not exist there).  The pcps come before the zones because a pcp holder
 * takes its zone's lock (rmqueue_bulk, free_pcppages_bulk); no path holds two zone locks.
 */
static void zones_lock_all(void)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_relaxed);
	for (int n = 0; n < nr; n++)
		pcpm_lock(&pcpm_zones[n].lock);
}

static void zones_unlock_all(bool reset)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_relaxed);
	for (int n = nr - 1; n >= 0; n--) {
		if (reset)
			pcpm_lock_reset(&pcpm_zones[n].lock);
		else
			pcpm_unlock(&pcpm_zones[n].lock);
	}
}

/* The forking thread holds every lock from prepare to parent/child: "inside" meanwhile. */
static __thread int fork_was_inside;
/* This fork came from a signal handler that interrupted pcpmalloc (or from a nolock
 * child): prepare took no lock, the child keeps to the no-wait paths (pcpm_nolock_all). */
static __thread bool fork_nested;

void pcpm_fork_prepare(void)
{
	if (!atomic_load_explicit(&init_done, memory_order_acquire))
		return;
	if (unlikely(pcpm_nested())) {
		/* the interrupted code may hold any lock: waiting for it would never end */
		fork_nested = true;
		return;
	}
	fork_was_inside = pcpm_inside;
	pcpm_inside = 1;
	atomic_signal_fence(memory_order_seq_cst);
	pcpm_lock(&init_lock);
	pcpm_vg_fork_prepare();
	slab_lock_all();
	pcpm_lock(&pcpm_zones_lock);
	pcp_lock_all();
	zones_lock_all();
	pcpm_lock(&huge_lock);
	pcpm_arena_lock_all();
	tcache_lock_registry();
}

void pcpm_fork_parent(void)
{
	if (!atomic_load_explicit(&init_done, memory_order_acquire))
		return;
	if (unlikely(fork_nested)) {
		fork_nested = false;
		return;
	}
	tcache_unlock_registry();
	pcpm_arena_unlock_all();
	pcpm_unlock(&huge_lock);
	zones_unlock_all(false);
	pcp_unlock_all();
	pcpm_unlock(&pcpm_zones_lock);
	slab_unlock_all();
	pcpm_vg_fork_parent();
	pcpm_unlock(&init_lock);
	atomic_signal_fence(memory_order_seq_cst);
	pcpm_inside = fork_was_inside;
}

void pcpm_fork_child(void)
{
	if (!atomic_load_explicit(&init_done, memory_order_acquire))
		return;
	if (unlikely(fork_nested)) {
		/* locks stay as they were: the interrupted frame still holds its own (and
		 * releases them when the handler returns), other threads' never come free */
		fork_nested = false;
		pcpm_nolock_all = 1;
		return;
	}
	tcache_fork_child();
	pcpm_random_fork_child();
	pcpm_vmstat_fork_child();
	pcpm_topology_fork_child();
	pcpm_arena_reset_locks();
	pcpm_lock_reset(&huge_lock);
	zones_unlock_all(true);
	pcp_reset_locks();
	pcpm_lock_reset(&pcpm_zones_lock);
	slab_reset_locks();
	pcpm_vg_fork_child();
	pcpm_lock_reset(&init_lock);
	atomic_signal_fence(memory_order_seq_cst);
	pcpm_inside = fork_was_inside;
}

/* ---- memcheck mode (vgmode.h): the annotated free and realloc ------------------------ */

/* Usable bytes of p when it is a block pcpmalloc handed out (live or in the quarantine;
 * a slab object may also be free), 0 when the normal free path must classify it. */
static size_t vg_block_usable(const void *p, struct page *pg)
{
	if (pg) {
		if (pg->state == PG_SLAB) {
			struct page *head = pg->slab_head;
			long idx = slab_obj_index(head, p);
			if (idx < 0 || (idx == 0 && head->slab_cache->objects > 1))
				return 0; /* object 0 is never handed out in this mode */
			return head->slab_cache->size;
		}
		if (pg->state == PG_LARGE && p == page_address(pg))
			return (size_t)pg->npages << PAGE_SHIFT;
		return 0;
	}
	struct region *r = pcpm_region_of(p);
	if (r && r->kind == REGION_HUGE && huge_base(r) == p && huge_state(r) == HUGE_LIVE)
		return r->len;
	return 0;
}

/* The quarantine mark in a block's second word (the free key is odd; this differs). */
static inline uintptr_t vg_quarantine_key(void)
{
	return pcpm_free_key ^ 2;
}

/* A block leaves the quarantine: the real free. */
static void vg_release(void *p)
{
	struct page *pg = pcpm_page_of(p);
	if (pg && pg->state == PG_SLAB) {
		unsigned cls = pg->slab_head->cls;
		vg_open_obj(p); /* tcache_free_slow writes the link and key; the slab closes it */
		((uintptr_t *)p)[1] = 0;
		if (!tcache_push(p, cls))
			tcache_free_slow(p, cls);
		return;
	}
	vg_open_obj(p); /* no stale quarantine mark in a page that is handed out again */
	((uintptr_t *)p)[1] = 0;
	vg_close_obj(p);
	if (unlikely(pcpm_nested())) { /* a handler's free: the no-wait paths */
		if (pg) {
			pg->state = PG_NONE;
			zone_free_run_nested(page_zone(pg), pg);
		} else {
			huge_free_nested(pcpm_region_of(p));
		}
		return;
	}
	if (pg) /* a page run or a huge mapping, checked when it was freed */
		large_free(pg);
	else
		huge_free(pcpm_region_of(p));
}

static void vg_free(void *p, struct page *pg, const char *call)
{
	size_t usable = vg_block_usable(p, pg);
	/* memcheck reports a bad free with the program's stack; pcpmalloc then aborts */
	VALGRIND_FREELIKE_BLOCK(p, 0);
	if (!usable)
		pcpm_free_slow(p, pg, call); /* aborts: no block of pcpmalloc's */
	vg_open_obj(p);
	uintptr_t key = ((uintptr_t *)p)[1];
	if (key == vg_quarantine_key())
		double_free(call, p);
	if (pg && pg->state == PG_SLAB && key == pcpm_free_key)
		tcache_check_double_free(p, pg->slab_head, call);
	((uintptr_t *)p)[1] = vg_quarantine_key();
	vg_close_obj(p);
	tcache_count(true);
	if (unlikely(pcpm_nested())) {
		/* the interrupted code may hold the quarantine lock; a huge mapping goes at once
		 * (unmapped, a use after free still faults), so the handlers' own mappings give
		 * their region structs back to the lock-free pool */
		if (!pg || !pcpm_vg_quarantine_nested(p, usable))
			vg_release(p);
		return;
	}
	pcpm_vg_quarantine(p, usable, vg_release);
}

/* Always moves, as memcheck's own realloc: the copy carries memcheck's definedness.  p is not
 * NULL and 0 < size <= PTRDIFF_MAX (__realloc checked). */
static void *vg_realloc(void *p, size_t size)
{
	struct page *pg = pcpm_page_of(p);
	size_t usable = vg_block_usable(p, pg);
	if (!usable)
		pcpm_free_slow(p, pg, "realloc"); /* aborts */
	size_t old = pcpm_vg_block_size(p, usable); /* 0 for a block already freed */
	void *q = pcpm_malloc(size);
	if (!q)
		return NULL;
	memcpy(q, p, MIN(old, size));
	pcpm_free_call(p, "realloc");
	return q;
}
