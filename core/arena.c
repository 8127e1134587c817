/*
 * arena.c - arenas, page descriptors, the radix map and metadata memory (see arena.h).
 * Mirrors the kernel's memmap (struct page array) and, for growth, memory hotplug:
 * committing a chunk is the analogue of onlining memory into a zone (kernel-pcp.md §12.1).
 * A leaf layer: calls os.c, config and the early area's and memcheck's leaves only.
 */
#include "arena.h"
#include "config.h"
#include "lockstat.h"
#include "stat_counters.h"
#include "early.h"
#include "vg.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>

struct arena pcpm_arena0 PCPM_HOT;
struct arena *pcpm_arenas[MAX_ARENAS] PCPM_HOT;
_Atomic int pcpm_nr_arenas PCPM_HOT;

/* Radix map: 47-bit user addresses, 4 MiB granules -> 2^25 entries in 2^12 leaves of 2^13. */
#define GRANULE_SHIFT 22
#define LEAF_BITS 13
#define ROOT_BITS (47 - GRANULE_SHIFT - LEAF_BITS)
static _Atomic(struct region *_Atomic *) map_root[1 << ROOT_BITS];
static pcpm_lock_t map_lock PCPM_HOT = PCPM_LOCK_INIT;
static pcpm_lock_t meta_lock PCPM_HOT = PCPM_LOCK_INIT;
/* their lock profile (and create_lock's): the arena_lock* family of the statistics */
static struct lock_stat map_ls, meta_ls;
static struct region *region_free_list PCPM_HOT;

struct region *pcpm_region_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	/* Arena 0 is found by its range, as the free fast path finds it: its granules are
	 * never published, so a process that stays in it writes no map at all (no radix leaf,
	 * no root page: two page faults less at start-up). */
	if (a - (uintptr_t)pcpm_arena0.base <
	    atomic_load_explicit(&pcpm_arena0.committed, memory_order_acquire))
		return pcpm_arena0.region;
	if (a >> 47)
		return NULL;
	size_t g = a >> GRANULE_SHIFT;
	struct region *_Atomic *leaf =
		atomic_load_explicit(&map_root[g >> LEAF_BITS], memory_order_acquire);
	if (!leaf)
		return NULL;
	return atomic_load_explicit(&leaf[g & ((1 << LEAF_BITS) - 1)], memory_order_acquire);
}

bool pcpm_owns(const void *p)
{
	if (pcpm_is_early(p))
		return true;
	if ((uintptr_t)p - (uintptr_t)pcpm_arena0.base < pcpm_arena0.reserved)
		return true;
	return pcpm_region_of(p) != NULL;
}

/* Installs a new, zeroed leaf for granule g; returns the leaf in place, which is another
 * one when a signal handler installed its own meanwhile (map_leaf_nested; ours then stays
 * unused, 64 KiB of metadata). */
static struct region *_Atomic *install_leaf(uintptr_t g, struct region *_Atomic *leaf)
{
	struct region *_Atomic *cur = NULL;
	if (atomic_compare_exchange_strong_explicit(&map_root[g >> LEAF_BITS], &cur, leaf,
						    memory_order_release, memory_order_acquire))
		return leaf;
	return cur;
}

/* A leaf a thread mapped and lost to another's install, kept for the next one (lock-free). */
static struct region *_Atomic *_Atomic leaf_spare;

/* Installs leaf (from leaf_spare or the metadata) for granule g; a leaf that lost to another
 * thread's is kept as the spare (zeroed still: nothing was stored in it).  The leaf in place. */
static struct region *_Atomic *leaf_install_or_keep(uintptr_t g, struct region *_Atomic *leaf)
{
	struct region *_Atomic *in = install_leaf(g, leaf);
	struct region *_Atomic *none = NULL;
	if (in != leaf)
		(void)atomic_compare_exchange_strong_explicit(&leaf_spare, &none, leaf,
							      memory_order_release,
							      memory_order_relaxed);
	return in;
}

/* A leaf for granule g installed, or NULL when metadata cannot be had.  No lock held: the
 * leaf comes from pcpm_meta_alloc (which maps with no lock held) and is installed with a
 * compare-exchange, so no lock of the map waits for a system call. */
static struct region *_Atomic *leaf_get(uintptr_t g)
{
	struct region *_Atomic *leaf =
		atomic_exchange_explicit(&leaf_spare, NULL, memory_order_acquire);
	if (!leaf)
		leaf = pcpm_meta_alloc(sizeof(*leaf) << LEAF_BITS);
	return leaf ? leaf_install_or_keep(g, leaf) : NULL;
}

/* Publishes (r), clears (r == NULL) or only prepares (publish false) the granules of
 * [base, base+len).  False when a leaf is needed and metadata cannot be mapped (nothing is
 * published then).  The leaves come first, with no lock held (leaf_get); map_lock covers
 * the stores only. */
static bool map_update(const void *base, size_t len, struct region *r, bool publish)
{
	uintptr_t a = (uintptr_t)base;
	if ((a + len - 1) >> 47 || a + len - 1 < a)
		return false; /* past the user address space (a growth in place that cannot be) */
	uintptr_t g0 = a >> GRANULE_SHIFT, g1 = (a + len - 1) >> GRANULE_SHIFT;
	for (uintptr_t g = g0; g <= g1; g++) {
		/* A compare-exchange of NULL with NULL reads the root entry with a write: the
		 * first touch of this page of map_root (zero-filled .bss) faults once, for
		 * writing, instead of once to read the zero page and again to copy it. */
		struct region *_Atomic *leaf = NULL;
		atomic_compare_exchange_strong_explicit(&map_root[g >> LEAF_BITS], &leaf, NULL,
							memory_order_acquire, memory_order_acquire);
		if (!leaf && !(publish && !r) && !leaf_get(g))
			return false;
	}
	if (!publish)
		return true;
	lockstat_lock(&map_lock, &map_ls);
	for (uintptr_t g = g0; g <= g1; g++) {
		struct region *_Atomic *leaf =
			atomic_load_explicit(&map_root[g >> LEAF_BITS], memory_order_acquire);
		if (leaf) /* (none: nothing to clear) */
			atomic_store_explicit(&leaf[g & ((1 << LEAF_BITS) - 1)], r,
					      memory_order_release);
	}
	lockstat_unlock(&map_lock, &map_ls);
	return true;
}

bool pcpm_map_reserve(const void *base, size_t len)
{
	return map_update(base, len, NULL, false);
}

bool pcpm_map_set(const void *base, size_t len, struct region *r)
{
	return map_update(base, len, r, true);
}

static char *meta_cur PCPM_HOT, *meta_end PCPM_HOT;

static void *meta_alloc_unlock(size_t len, bool try);

/* pcpm_meta_alloc for signal handlers: trylock only (mmap, for a new chunk, is
 * async-signal-safe; a nolock fork child lives on region structs from here). */
static void *meta_alloc_try(size_t len)
{
	len = ALIGN_UP(len, 64);
	if (!lockstat_trylock(&meta_lock, &meta_ls))
		return NULL;
	return meta_alloc_unlock(len, true);
}

bool pcpm_map_set_try(const void *base, size_t len, struct region *r)
{
	uintptr_t a = (uintptr_t)base;
	uintptr_t g0 = a >> GRANULE_SHIFT, g1 = (a + len - 1) >> GRANULE_SHIFT;
	/* The stores need no lock: the granules of a new mapping are its own (the kernel gave
	 * the range to nobody else), and leaves are installed with a compare-exchange, so a
	 * handler that interrupted a map_lock holder still maps.  No lock is held across the
	 * system calls below either. */
	for (uintptr_t g = g0; g <= g1; g++) {
		if (!r || atomic_load_explicit(&map_root[g >> LEAF_BITS], memory_order_acquire))
			continue; /* (a granule without a leaf has nothing to clear) */
		struct region *_Atomic *leaf =
			atomic_exchange_explicit(&leaf_spare, NULL, memory_order_acquire);
		if (!leaf)
			leaf = meta_alloc_try(sizeof(*leaf) << LEAF_BITS);
		if (leaf) {
			(void)leaf_install_or_keep(g, leaf);
			continue;
		}
		/* meta_lock taken (or held for good in a nolock fork child): a leaf of its own
		 * mapping, installed with one compare-exchange as leaf_get's */
		leaf = pcpm_os_map(sizeof(*leaf) << LEAF_BITS, PAGE_SIZE);
		if (!leaf)
			return false;
		if (install_leaf(g, leaf) != leaf)
			pcpm_os_unmap(leaf, sizeof(*leaf) << LEAF_BITS);
	}
	for (uintptr_t g = g0; g <= g1; g++) {
		struct region *_Atomic *leaf =
			atomic_load_explicit(&map_root[g >> LEAF_BITS], memory_order_acquire);
		if (leaf)
			atomic_store_explicit(&leaf[g & ((1 << LEAF_BITS) - 1)], r,
					      memory_order_release);
	}
	return true;
}

/* Region structs for signal handlers that find meta_lock taken (kernel-pcp.md §12.2: a nested
 * allocation must not wait): claimed and given back with one atomic bit each, no lock. */
#define NESTED_REGIONS 64
static struct region nested_regions[NESTED_REGIONS];
static _Atomic uint64_t nested_regions_used;

static struct region *nested_region_claim(void)
{
	uint64_t used = atomic_load_explicit(&nested_regions_used, memory_order_relaxed);
	while (~used) {
		unsigned i = (unsigned)__builtin_ctzll(~used);
		if (atomic_compare_exchange_weak_explicit(&nested_regions_used, &used, used | (1ULL << i),
							  memory_order_acquire, memory_order_relaxed)) {
			memset(&nested_regions[i], 0, sizeof(nested_regions[i]));
			return &nested_regions[i];
		}
	}
	return NULL;
}

bool pcpm_region_in_pool(const struct region *r)
{
	return r >= nested_regions && r < nested_regions + NESTED_REGIONS;
}

/* true when r came from nested_region_claim (and is now given back) */
static bool nested_region_release(struct region *r)
{
	if (!pcpm_region_in_pool(r))
		return false;
	atomic_fetch_and_explicit(&nested_regions_used, ~(1ULL << (r - nested_regions)),
				  memory_order_release);
	return true;
}

/* Called with meta_lock held, drops it: a zeroed region from the free list, or NULL. */
static struct region *region_pop_unlock(void)
{
	struct region *r = region_free_list;
	if (r)
		region_free_list = r->next_free;
	lockstat_unlock(&meta_lock, &meta_ls);
	if (r)
		memset(r, 0, sizeof(*r));
	return r;
}

struct region *pcpm_region_new_try(void)
{
	if (!lockstat_trylock(&meta_lock, &meta_ls))
		return nested_region_claim();
	struct region *r = region_pop_unlock();
	if (!r)
		r = meta_alloc_try(sizeof(struct region));
	return r ? r : nested_region_claim();
}

struct page *pcpm_page_of_slow(const void *p)
{
	if (pcpm_is_early(p))
		return NULL; /* (and no read of the radix map: no page of it faults in) */
	struct region *r = pcpm_region_of(p);
	if (!r || r->kind != REGION_ARENA)
		return NULL;
	struct arena *a = r->a;
	uintptr_t off = (uintptr_t)p - (uintptr_t)a->base;
	if (off >= atomic_load_explicit(&a->committed, memory_order_acquire))
		return NULL;
	return a->desc + (off >> PAGE_SHIFT);
}

/* Smallest reservation: one MAX_PAGE_ORDER block; below it we are out of address space. */
#define ARENA_ALIGN (4UL << 20) /* one MAX_PAGE_ORDER block */
#define MIN_RESERVE ARENA_ALIGN

bool pcpm_as_limited;

size_t pcpm_arena_reserve_bytes(void)
{
	size_t want = (size_t)pcpm_cfg.arena_reserve_gb << 30;
	/* Under an address-space limit (ulimit -v) a reservation counts in full although it
	 * is not committed: reserve an eighth of the limit at a time instead of 64 GiB. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		want = MIN(want, ALIGN_UP((size_t)rl.rlim_cur / 8, ARENA_ALIGN));
		pcpm_as_limited = true; /* free arena ends are unmapped (zone_shrink_arenas) */
	}
	return want;
}

/* Bytes of descriptors of elem bytes each (struct page, struct page_fast) reserved for an
 * arena of len reserved bytes: those of its pages and one page more (reserved, never
 * committed: the end of the committed ones faults). */
static size_t desc_bytes(size_t len, size_t elem)
{
	return ALIGN_UP((len >> PAGE_SHIFT) * elem, PAGE_SIZE) + PAGE_SIZE;
}

/* Bytes of descriptors of elem bytes each for the whole span of an arena. */
static size_t desc_span_bytes(size_t span, size_t elem)
{
	return ALIGN_UP((span >> PAGE_SHIFT) * elem, PAGE_SIZE);
}

/* Arena slots are claimed here (index, table): a short hold, no system call in it. */
static pcpm_lock_t create_lock PCPM_HOT = PCPM_LOCK_INIT;
static struct lock_stat create_ls;

/* Claims the next arena slot and publishes a in it (a: a filled-in arena; slot 0 is
 * pcpm_arena0, which a is copied into).  The arena in its slot, or NULL when none is left. */
static struct arena *arena_publish(struct arena *a, struct arena *spare)
{
	lockstat_lock(&create_lock, &create_ls);
	int n = atomic_load_explicit(&pcpm_nr_arenas, memory_order_relaxed);
	/* memcheck mode: slot 0 (pcpm_arena0, the arena the free fast path knows) stays empty,
	 * so that every free reaches the annotated slow path */
	if (n == 0 && pcpm_vg)
		n = 1;
	struct arena *in = NULL;
	if (n < MAX_ARENAS) {
		in = n == 0 ? &pcpm_arena0 : spare;
		size_t committed = atomic_load_explicit(&a->committed, memory_order_relaxed);
		*in = *a;
		atomic_store_explicit(&in->committed, committed, memory_order_relaxed);
		in->idx = n;
		in->region->a = in;
		pcpm_arenas[n] = in;
		atomic_store_explicit(&pcpm_nr_arenas, n + 1, memory_order_release);
	}
	lockstat_unlock(&create_lock, &create_ls);
	return in;
}

struct arena *pcpm_arena_create(size_t min_bytes)
{
	if (atomic_load_explicit(&pcpm_nr_arenas, memory_order_relaxed) >= MAX_ARENAS)
		return NULL;
	size_t want = pcpm_arena_reserve_bytes(), asked = want;
	min_bytes = ALIGN_UP(MAX(min_bytes, MIN_RESERVE), ARENA_ALIGN);
	want = MAX(want, min_bytes);
	int e = errno;
	/* Every system call with no lock held (a holder preempted in one held create_lock for
	 * milliseconds): the ranges are reserved, trimmed and filled in first, and the slot is
	 * claimed last (arena_publish). */
	for (; want >= min_bytes; want = ALIGN_UP(want / 2, ARENA_ALIGN)) {
		char *base = pcpm_os_reserve(want, ARENA_ALIGN);
		if (!base) {
			if (want == min_bytes)
				break;
			continue;
		}
		size_t dlen = desc_span_bytes(want, sizeof(struct page));
		size_t flen = desc_span_bytes(want, sizeof(struct page_fast));
		/* secure mode: a PROT_NONE page before the descriptors (the reserved, uncommitted
		 * page past the last committed one guards their end) */
		size_t dguard = pcpm_cfg.secure ? PAGE_SIZE : 0;
		char *dres = pcpm_os_reserve(dlen + dguard, PAGE_SIZE);
		struct page *desc = dres ? (struct page *)(dres + dguard) : NULL;
		char *fres = pcpm_os_reserve(flen + dguard, PAGE_SIZE);
		struct page_fast *fast = fres ? (struct page_fast *)(fres + dguard) : NULL;
		struct region *r = pcpm_region_new();
		/* the slot's struct, unless it turns out to be slot 0 (pcpm_arena0): metadata,
		 * never freed, so an unused one stays (once per process) */
		struct arena *spare = pcpm_meta_alloc(sizeof(*spare));
		if (!desc || !fast || !r || !spare) {
			pcpm_os_unmap(base, want);
			if (dres)
				pcpm_os_unmap(dres, dlen + dguard);
			if (fres)
				pcpm_os_unmap(fres, flen + dguard);
			break;
		}
		/*
		 * The address range is chosen for the whole span, but only what the first grow
		 * needs stays reserved: the rest is unmapped again and reserved in place, step by
		 * step, as the heap grows (pcpm_arena_grow), so that the mapped size (VmSize)
		 * follows the heap and an RLIMIT_AS lowered later still binds.  Other mappings
		 * come top-down from the far end of the freed gap; when one took the next step's
		 * place, the zone starts another arena.  The descriptors likewise.
		 */
		size_t keep = min_bytes;
		/* memcheck mode (a debugging run under valgrind): the whole span stays reserved,
		 * so no block of another mapping lands inside it, where the arena's own words
		 * would make memcheck's leak check call it "possibly lost" */
		if (pcpm_vg)
			keep = want;
		size_t dkeep = MIN(dlen, desc_bytes(keep, sizeof(struct page)));
		size_t fkeep = MIN(flen, desc_bytes(keep, sizeof(struct page_fast)));
		if (keep < want)
			pcpm_os_unmap(base + keep, want - keep);
		if (dkeep < dlen)
			pcpm_os_unmap((char *)desc + dkeep, dlen - dkeep);
		if (fkeep < flen)
			pcpm_os_unmap((char *)fast + fkeep, flen - fkeep);
		struct arena a = { .base = base, .desc = desc, .fast = fast, .span = want,
				   .reserved = keep, .desc_reserved = dkeep, .fast_reserved = fkeep,
				   .node = 0 /* the zone that grows it sets its own */ };
		r->kind = REGION_ARENA;
		r->base = base;
		r->len = want;
		a.region = r;
		/* The map learns the arena's granules as they are committed (pcpm_arena_grow):
		 * publishing a 64 GiB reservation at once writes 128 KiB of map, 32 page faults
		 * in every process; uncommitted addresses are foreign either way. */
		struct arena *in = arena_publish(&a, spare);
		if (!in) {
			pcpm_os_unmap(base, keep);
			pcpm_os_unmap(dres, dkeep + dguard);
			pcpm_os_unmap(fres, fkeep + dguard);
			pcpm_region_free(r);
			break;
		}
		errno = e;
		pcpm_verbose("arena %d: reserved %zu MiB at %p%s (page descriptors: %zu MiB); "
			     "%zu MiB mapped now, the rest as the heap grows",
			     in->idx, want >> 20, (void *)base,
			     want < asked ? " (less than asked: mmap refused more)" : "", dlen >> 20,
			     keep >> 20);
		return in;
	}
	errno = e;
	pcpm_verbose("arena: cannot reserve even %zu MiB of address space", min_bytes >> 20);
	return NULL;
}

/* The descriptors (elem bytes each, array at desc, *reserved bytes of its range reserved)
 * of the arena bytes [c, c + len) committed; false when the range cannot be reserved or
 * committed.  Zone lock held. */
static bool desc_grow(char *desc, size_t *reserved, size_t elem, size_t span, size_t c,
		      size_t len)
{
	size_t need = MIN(desc_bytes(c + len, elem), desc_span_bytes(span, elem));
	if (need > *reserved) {
		if (!pcpm_os_reserve_at(desc + *reserved, need - *reserved))
			return false;
		*reserved = need;
	}
	size_t lo = (c >> PAGE_SHIFT) * elem, hi = lo + (len >> PAGE_SHIFT) * elem;
	/* descriptor pages may already be partly committed: commit the page-aligned cover */
	lo &= ~(PAGE_SIZE - 1);
	hi = ALIGN_UP(hi, PAGE_SIZE);
	return pcpm_os_commit(desc + lo, hi - lo);
}

struct page *pcpm_arena_grow(struct arena *a, size_t len)
{
	size_t c = atomic_load_explicit(&a->committed, memory_order_relaxed);
	if (c + len > a->reserved) {
		/* the next step of the span (or what pcpm_arena_shrink gave back), in place if
		 * no other mapping took it: else this arena is full, the zone starts another */
		if (c + len > a->span || !pcpm_os_reserve_at(a->base + a->reserved, c + len - a->reserved))
			return NULL;
		a->reserved = c + len;
	}
	int e = errno;
	if (!desc_grow((char *)a->desc, &a->desc_reserved, sizeof(struct page), a->span, c, len) ||
	    !desc_grow((char *)a->fast, &a->fast_reserved, sizeof(struct page_fast), a->span, c,
		       len) ||
	    !pcpm_os_commit(a->base + c, len)) {
		errno = e;
		return NULL;
	}
	struct page *first = a->desc + (c >> PAGE_SHIFT);
	/* Fresh descriptors read as zero (PG_NONE); only the arena index needs setting, and
	 * only on pages that become block heads, which the zone does. */
	vg_fresh(a->base + c, len);
	if (a != &pcpm_arena0 && !pcpm_map_set(a->base + c, len, a->region)) {
		/* no metadata for the map: the chunk stays committed but unused; a later
		 * grow commits it again */
		pcpm_map_set(a->base + c, len, NULL);
		errno = e;
		return NULL;
	}
	atomic_store_explicit(&a->committed, c + len, memory_order_release);
	return first;
}

void pcpm_arena_shrink(struct arena *a, size_t new_committed)
{
	size_t c = atomic_load_explicit(&a->committed, memory_order_relaxed);
	/* lock-free lookups stop resolving the range first; its descriptors stay mapped (a
	 * racing lookup of a stale pointer reads PG_NONE, an invalid pointer) */
	atomic_store_explicit(&a->committed, new_committed, memory_order_release);
	if (c > new_committed) {
		if (a != &pcpm_arena0) /* (arena 0 is found by range, never in the map) */
			pcpm_map_set(a->base + new_committed, c - new_committed, NULL);
		/* 64 KiB of descriptors per 4 MiB: page aligned; they read as zero (PG_NONE),
		 * as fresh ones, when the range is committed again */
		(void)pcpm_os_purge(a->desc + (new_committed >> PAGE_SHIFT),
				    ((c - new_committed) >> PAGE_SHIFT) * sizeof(struct page));
		/* (16 KiB of fast descriptors per 4 MiB: page aligned too) */
		(void)pcpm_os_purge(a->fast + (new_committed >> PAGE_SHIFT),
				    ((c - new_committed) >> PAGE_SHIFT) * sizeof(struct page_fast));
	}
	if (a->reserved > new_committed)
		pcpm_os_unmap(a->base + new_committed, a->reserved - new_committed);
	a->reserved = new_committed;
}

/*
 * Metadata: bump allocation, first from a small static chunk (what a short process needs:
 * its pcps, a few region structs; no mapping of its own, so no mmap and no page-table page
 * at start-up), then from 1 MiB mappings (radix leaves are 64 KiB).  In secure mode the
 * first chunk is mapped too, for its guard pages.
 */
#define META_BOOT_BYTES 16384
static char meta_boot[META_BOOT_BYTES] __attribute__((aligned(64))); /* (zone.c: why 64) */

/* The bump allocation itself; meta_lock held.  NULL when the current chunk has no room. */
static void *meta_bump(size_t len)
{
	if (!meta_cur && !pcpm_cfg.secure) {
		meta_cur = meta_boot;
		meta_end = meta_boot + META_BOOT_BYTES;
	}
	/* (a difference, not meta_cur + len: before the first chunk both are NULL, and
	 * NULL + len is undefined behaviour that UBSan reports) */
	if ((size_t)(meta_end - meta_cur) < len)
		return NULL;
	void *r = meta_cur;
	meta_cur += len;
	return r;
}

/* Guard pages each side of a metadata chunk (secure mode) */
static size_t meta_guard(void)
{
	return pcpm_cfg.secure ? PAGE_SIZE : 0;
}

/* Maps a metadata chunk of *chunk bytes (1 MiB, or len rounded up), no lock held. */
void (*pcpm_meta_map_hook)(void);

static char *meta_map_chunk(size_t len, size_t *chunk)
{
	if (unlikely(pcpm_meta_map_hook))
		pcpm_meta_map_hook();
	size_t guard = meta_guard();
	*chunk = ALIGN_UP(MAX(len, 1UL << 20), PAGE_SIZE);
	char *p = pcpm_os_map(*chunk + 2 * guard, PAGE_SIZE);
	if (!p)
		return NULL;
	if (guard) {
		pcpm_os_guard(p, guard);
		pcpm_os_guard(p + guard + *chunk, guard);
	}
	return p + guard;
}

/*
 * pcpm_meta_alloc's body: called with meta_lock held, returns with it dropped.  A new chunk
 * is mapped with the lock dropped and installed under it again (the kernel's memblock hands
 * out memory reserved ahead; nothing waits here for a system call): holding meta_lock across
 * the mmap made a holder preempted in it hold the lock for milliseconds at 224 virtual CPUs
 * (bench/RESULTS.md, issue 22 sixth round, branch nhalf).  A chunk that another thread's
 * install made unneeded is unmapped, no lock held.  try: the lock is only tried again
 * (signal handlers); NULL then when it is taken.
 */
static void *meta_alloc_unlock(size_t len, bool try)
{
	void *r = meta_bump(len);
	lockstat_unlock(&meta_lock, &meta_ls);
	if (r)
		return r;
	size_t chunk;
	char *p = meta_map_chunk(len, &chunk);
	if (!p)
		return NULL;
	if (try && !lockstat_trylock(&meta_lock, &meta_ls)) {
		pcpm_os_unmap(p - meta_guard(), chunk + 2 * meta_guard());
		return NULL;
	}
	if (!try)
		lockstat_lock(&meta_lock, &meta_ls);
	r = meta_bump(len); /* another thread installed a chunk meanwhile */
	if (!r) {
		meta_cur = p;
		meta_end = p + chunk;
		r = meta_bump(len);
		p = NULL;
	}
	lockstat_unlock(&meta_lock, &meta_ls);
	if (p)
		pcpm_os_unmap(p - meta_guard(), chunk + 2 * meta_guard());
	return r;
}

void *pcpm_meta_alloc(size_t len)
{
	len = ALIGN_UP(len, 64);
	lockstat_lock(&meta_lock, &meta_ls);
	return meta_alloc_unlock(len, false);
}

struct region *pcpm_region_new(void)
{
	lockstat_lock(&meta_lock, &meta_ls);
	struct region *r = region_pop_unlock();
	return r ? r : pcpm_meta_alloc(sizeof(struct region));
}

/* Called with meta_lock held, drops it: r onto the free list. */
static void region_push_unlock(struct region *r)
{
	r->next_free = region_free_list;
	region_free_list = r;
	lockstat_unlock(&meta_lock, &meta_ls);
}

void pcpm_region_free(struct region *r)
{
	if (nested_region_release(r))
		return;
	lockstat_lock(&meta_lock, &meta_ls);
	region_push_unlock(r);
}

bool pcpm_region_free_try(struct region *r)
{
	if (nested_region_release(r))
		return true;
	if (!lockstat_trylock(&meta_lock, &meta_ls))
		return false;
	region_push_unlock(r);
	return true;
}

void pcpm_arena_lock_all(void)
{
	pcpm_lock(&create_lock);
	pcpm_lock(&map_lock);
	pcpm_lock(&meta_lock);
}

void pcpm_arena_unlock_all(void)
{
	pcpm_unlock(&meta_lock);
	pcpm_unlock(&map_lock);
	pcpm_unlock(&create_lock);
}

void pcpm_arena_reset_locks(void)
{
	pcpm_lock_reset(&meta_lock);
	pcpm_lock_reset(&map_lock);
	pcpm_lock_reset(&create_lock);
}

void arena_stats_add(struct pcpm_stats *s)
{
	struct lock_sum ls = { 0 };
	lock_sum_add(&ls, &map_ls);
	lock_sum_add(&ls, &meta_ls);
	lock_sum_add(&ls, &create_ls);
	PCPM_STATS_LOCK(s, arena, &ls);
}
