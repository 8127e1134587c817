/*
 * arena.h - aligned mmap arenas and their page descriptors (the user-space struct page).
 *
 * An arena is one large PROT_NONE reservation (PCPMALLOC_ARENA_RESERVE_GB, 4 MiB aligned, so
 * buddy blocks are naturally aligned in the address space) that the zone commits chunk by
 * chunk.  Each 4 KiB page has a 64-byte descriptor in a parallel array, committed in step,
 * and a 16-byte fast descriptor (struct page_fast: what free's fast path reads) in a second,
 * dense one, so that four pages share a cache line of it.
 * Finding the descriptor of any pointer, interior pointers included, is O(1) and lock-free:
 * a range check against the first arena, else a two-level radix map of 4 MiB granules
 * (which knows the other arenas and the huge mappings; the first arena is never in it).  A pointer that lies in no committed arena page and
 * no huge mapping is foreign: pcpm_page_of() returns NULL and nothing is dereferenced.
 *
 * Locks: arena growth runs under the owning zone's grower; the radix map is written under
 * map_lock and read without locks (entries are published with release stores).  No lock of
 * this file (map_lock, meta_lock, create_lock) is held across a system call.
 */
#ifndef PCPM_ARENA_H
#define PCPM_ARENA_H

#include "os.h"

struct list_head {
	struct list_head *next, *prev;
};

static inline void list_init(struct list_head *h)
{
	h->next = h->prev = h;
}
static inline bool list_empty(const struct list_head *h)
{
	return h->next == h;
}
static inline void __list_insert(struct list_head *e, struct list_head *prev, struct list_head *next)
{
	e->next = next;
	e->prev = prev;
	prev->next = e;
	next->prev = e;
}
static inline void list_add(struct list_head *e, struct list_head *h)
{
	__list_insert(e, h, h->next);
}
static inline void list_add_tail(struct list_head *e, struct list_head *h)
{
	__list_insert(e, h->prev, h);
}
static inline void list_del(struct list_head *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->next = e->prev = NULL;
}

/* Page states: what owns the page.  Only head pages of a block carry BUDDY/PCP/LARGE. */
enum page_state {
	PG_NONE = 0, /* tail page of a block, or never used */
	PG_BUDDY,    /* head of a free block in the zone's free_area[order] */
	PG_PCP,	     /* head of a free block on a pcp list */
	PG_SLAB,     /* any page of a slab; slab_head points at the slab's first page */
	PG_LARGE,    /* head of a page run handed to the program (npages long) */
};

/* flags */
#define PG_DIRTY 0x1 /* block was written since it was last committed or purged */
#define PG_SECURE_QUAR 0x2 /* LARGE head, secure mode: freed, guarded, in the quarantine */
#define PG_SECURE_SPARSE 0x4 /* LARGE head, secure mode: freed with pages not resident */
#define PG_FROZEN 0x8 /* SLAB head: a CPU's slab, on no list (slab.h: slab_new_frozen) */
#define PG_SECURE_GROW 0x10 /* LARGE head, secure mode: the block at the run's front, its tail
			     * guard the page after its end (realloc grows it in place) */
#define PG_SECURE_RUN_FLAGS (PG_SECURE_QUAR | PG_SECURE_SPARSE | PG_SECURE_GROW)

/*
 * struct page: one per 4 KiB page, 64 bytes.  Written under the lock of whoever owns the
 * page (zone lock for BUDDY, pcp lock for PCP, kmem_cache lock for SLAB list state); the
 * fields the free fast path reads (state, slab_head, cls, addr) are written before the page
 * is published to another thread through a lock.
 */
struct page {
	struct list_head lru; /* free_area / pcp / slab partial list link */
	union {
		uint64_t freed_ms; /* BUDDY: when the block became free (purge age) */
		void *freelist;	   /* SLAB head: first free object (SLUB freelist) */
		size_t req_size;   /* LARGE head, secure mode: bytes requested */
	};
	/* SLAB head: the CPU slot (+ 1; 0: none) whose sheaves last took objects from this
	 * slab, where frees on other CPUs send them back (sheaf.c: objects go home); written
	 * without a lock, a routing hint only (relaxed atomics) */
	union {
		uint32_t slab_owner;
		/* LARGE head, secure mode: the run reads zero from this byte offset to its
		 * tail guard (secure_runs.c: only what blocks can reach is ever cleared) */
		uint32_t run_clean;
	};
	struct page *slab_head;	       /* SLAB: first page of the slab (self on the head) */
	char *addr;		       /* SLAB head: address of the slab's first byte */
	union {
		uint32_t npages;     /* LARGE head: pages in the run */
		uint32_t reciprocal; /* SLAB head: the cache's reciprocal (slab_obj_index) */
	};
	uint16_t inuse;		       /* SLAB head: objects handed out */
	uint16_t carved;	       /* SLAB head: objects cut so far (bump carving) */
	uint8_t state;		       /* enum page_state */
	uint8_t order;		       /* BUDDY/PCP: block order; SLAB: slab order */
	uint8_t flags;		       /* PG_DIRTY */
	uint8_t cls;		       /* SLAB: size class index */
	uint8_t arena;		       /* index of the owning arena */
	/* SLAB head (and every page's fast descriptor): cls x 2, the offset of the class's stack in a thread cache in
	 * 8-byte units (tcache.h: struct tcache_bin is 16 bytes, bins[] its first field; the
	 * direct table holds the same values), so the free fast path indexes the cache with
	 * the addressing mode's scale, and a sized free compares its size's entry with it */
	uint8_t bin8;
} __attribute__((aligned(64)));

/*
 * struct page_fast: free's fast path's view of a page, 16 bytes in a dense array parallel
 * to the descriptors (arena->fast), four pages to a cache line.  The 64-byte struct page of
 * a random 4-32 KiB block's page was a cache miss per free (bench/RESULTS.md, issue 17 fix
 * 3, issue 22 fifth round); the fast descriptors of 1 MiB of pages take 4 KiB, as many
 * lines as the struct pages of 256 KiB.  SLAB, every page: copies of the struct page
 * fields the fast paths read, and fast_lim (slab.c writes them under the cache lock or
 * before the slab is published); zero on every
 * other page (fast_lim 0: no object here).  No kernel counterpart: its free reads the
 * struct page (or folio) of the object, and its memmap is what this array densifies.
 */
struct page_fast {
	uint32_t addr_lo;    /* low 32 bits of the slab's first byte: an offset from it below
			      * 2^17 is (uint32_t)p - addr_lo, so the high half is not needed */
	uint32_t reciprocal; /* struct page's reciprocal (the cache's) */
	/* SLAB, every page: the free fast path's bound, carved x the cache's lim_step (0 on
	 * every page that is not a slab's, and in memcheck mode): an offset soff from the
	 * slab's start is a carved object's start exactly when (uint32_t)(soff * reciprocal)
	 * < fast_lim (slab.h: slab_fast_lim).  Written under the cache lock, read without it. */
	uint32_t fast_lim;
	uint8_t bin8;	     /* struct page's bin8 */
	uint8_t cls;	     /* struct page's cls */
	uint8_t pad[2];
};
_Static_assert(sizeof(struct page_fast) == 16, "four fast descriptors to a cache line");

#define MAX_ARENAS 64

struct arena {
	char *base;		  /* first byte; 4 MiB aligned */
	_Atomic size_t committed; /* bytes committed (readable/writable) from base */
	struct page *desc;	  /* descriptor array, desc[i] describes base + i * PAGE_SIZE */
	struct page_fast *fast;	  /* fast descriptors, fast[i] of the same page (committed in
				   * step with desc, from its own reservation) */
	size_t reserved;	  /* bytes reserved (shrinks with pcpm_arena_shrink) */
	size_t span;		  /* bytes the arena may grow to (its address range, which other
				   * mappings may take while it is not reserved) */
	size_t desc_reserved;	  /* bytes of the descriptor array's range reserved so far */
	size_t fast_reserved;	  /* the same for the fast descriptors */
	int idx;		  /* position in pcpm_arenas */
	int node;		  /* zone (NUMA node) whose memory this is; set before first grow */
	struct region *region;	  /* its radix-map entry, published chunk by chunk as committed
				   * (arena 0's is returned by its range check, never published) */
};

/* The first arena is kept by value so the free path's lookup is one compare. */
extern struct arena pcpm_arena0 PCPM_HIDDEN;
extern struct arena *pcpm_arenas[MAX_ARENAS];
extern _Atomic int pcpm_nr_arenas;

/* Radix map entries: what a 4 MiB granule belongs to. */
enum region_kind { REGION_ARENA = 1, REGION_HUGE = 2 };
struct region {
	int kind;
	char *base;	 /* HUGE: user pointer (start of the mapping) */
	size_t len;	 /* HUGE: bytes mapped */
	struct arena *a; /* ARENA: the arena */
	uint64_t freed_ms; /* HUGE, cached: when it was freed */
	size_t dirty;	   /* HUGE: the bytes from base that may be resident and non-zero (0:
			    * all read as zero; a block built by huge.c's gather has fresh pages
			    * after its moved ones: calloc clears only these) */
	struct region *next_free;
	struct region *deferred_next; /* HUGE: on the list of frees from signal handlers */
	size_t req;		      /* HUGE, secure mode: bytes requested */
};

/* The region holding p (arena 0 by range, the rest by the radix map), or NULL.  Lock-free. */
struct region *pcpm_region_of(const void *p);
/* Is p in memory pcpmalloc manages: the early area, arena 0's reservation, or a granule the
 * radix map gives to an arena or a huge mapping?  False for anything else: a block of
 * glibc's own malloc (an RTLD_DEEPBIND plugin's, __libc_malloc's), which goes to glibc's
 * own function (os.h: pcpm_foreign_*).  Lock-free, never guesses from the bytes near p. */
bool pcpm_owns(const void *p);
/*
 * Radix map updates for the granules of [base, base+len).  pcpm_map_reserve allocates the
 * leaves the range needs (false when metadata cannot be mapped: out of memory), after which
 * pcpm_map_set on that range cannot fail; pcpm_map_set with r == NULL clears and never
 * allocates.  pcpm_map_set with a region on an unreserved range returns false when a leaf
 * cannot be had (nothing is set then).  No lock is held across a system call: leaves are
 * mapped first and installed with a compare-exchange; map_lock covers the stores.
 */
bool pcpm_map_reserve(const void *base, size_t len);
bool pcpm_map_set(const void *base, size_t len, struct region *r);
/* Signal-handler variants, never waiting on a lock.  pcpm_map_set_try stores without a lock;
 * a missing radix leaf comes from a trylock of meta_lock or a mapping of its own, installed
 * with a compare-exchange (false when no leaf can be had).  pcpm_region_new_try falls back to a static pool of 64 structs claimed
 * with an atomic bit when meta_lock is taken (NULL when all 64 are in use);
 * pcpm_region_free gives those back to the pool. */
bool pcpm_map_set_try(const void *base, size_t len, struct region *r);
struct region *pcpm_region_new_try(void);
/* true when r is one of that pool's structs (its release needs no lock) */
bool pcpm_region_in_pool(const struct region *r);

struct page *pcpm_page_of_slow(const void *p);

/* Descriptor of the page holding p, or NULL when p is not in committed arena memory. */
static inline struct page *pcpm_page_of(const void *p)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)pcpm_arena0.base;
	if (likely(off < atomic_load_explicit(&pcpm_arena0.committed, memory_order_relaxed)))
		return pcpm_arena0.desc + (off >> PAGE_SHIFT);
	return pcpm_page_of_slow(p);
}

/* The arena holding the committed page of p (any page of a block: only block heads, slab
 * pages and run heads carry their arena byte), or NULL when p is not arena memory. */
static inline struct arena *pcpm_arena_of(const void *p)
{
	if (pcpm_page_of(p) == NULL)
		return NULL;
	uintptr_t off = (uintptr_t)p - (uintptr_t)pcpm_arena0.base;
	if (off < atomic_load_explicit(&pcpm_arena0.committed, memory_order_relaxed))
		return &pcpm_arena0;
	return pcpm_region_of(p)->a;
}

/* pg's arena, from its arena byte: pg must be a block's head, a slab page or a run's head
 * (a tail page's byte is not kept: pcpm_arena_of from its address instead). */
static inline struct arena *arena_of_page(struct page *pg)
{
	return pg->arena == 0 ? &pcpm_arena0 : pcpm_arenas[pg->arena];
}

/* Address of the page a descriptor describes. */
static inline char *page_address(struct page *pg)
{
	struct arena *a = arena_of_page(pg);
	return a->base + ((size_t)(pg - a->desc) << PAGE_SHIFT);
}

/* Page frame number inside its arena. */
static inline size_t page_pfn(struct page *pg)
{
	return (size_t)(pg - arena_of_page(pg)->desc);
}

/* The fast descriptor of the page pg describes. */
static inline struct page_fast *page_fast(struct page *pg)
{
	struct arena *a = arena_of_page(pg);
	return a->fast + (pg - a->desc);
}

/* The descriptor of the page whose fast descriptor is fp, in arena 0 (the fast paths'). */
static inline struct page *arena0_page_of_fast(const struct page_fast *fp)
{
	return pcpm_arena0.desc + (fp - pcpm_arena0.fast);
}

/*
 * Creates a new arena able to hold at least min_bytes; NULL when the address space is
 * exhausted.  The reservation is halved until mmap succeeds (ulimit -v, overcommit=2).
 * Thread-safe: every system call is made with no lock held; only the claim of the slot
 * takes create_lock (the kernel's add_memory maps before it publishes).
 */
struct arena *pcpm_arena_create(size_t min_bytes);

/* Bytes the next arena asks for: PCPMALLOC_ARENA_RESERVE_GB, at most 1/8 of RLIMIT_AS. */
size_t pcpm_arena_reserve_bytes(void);

/*
 * Commits the next len bytes of a (and their descriptors); returns the first new
 * descriptor, or NULL when the arena is full or the kernel refuses.  Zone lock held.
 */
struct page *pcpm_arena_grow(struct arena *a, size_t len);

/*
 * Gives the arena's address space from new_committed (4 MiB aligned, <= committed) to the
 * end of its reservation back to the kernel (munmap): the pages there must be free and off
 * every list.  Their descriptors are cleared and the radix map forgets them, so a later
 * mapping placed there is found as what it is.  pcpm_arena_grow reserves the range again
 * (up to span) when it is still free.  The memory hot-remove analogue (offline_pages) for
 * processes under an address-space limit.  Zone lock held.
 */
void pcpm_arena_shrink(struct arena *a, size_t new_committed);

/* The address space is limited (RLIMIT_AS): set when an arena's size is chosen, or by an
 * allocation that failed with ENOMEM; the zones then give free arena ends back at once. */
extern bool pcpm_as_limited;

/* Internal metadata memory (region structs, radix leaves): zeroed, never freed.  Bump
 * allocation under meta_lock; a new chunk is mapped with the lock dropped (memblock). */
void *pcpm_meta_alloc(size_t len);

/* Test hook (NULL in the library): called before a metadata chunk is mapped, with no lock
 * of this file held (meta_lock, map_lock, create_lock). */
extern void (*pcpm_meta_map_hook)(void);

struct region *pcpm_region_new(void);
void pcpm_region_free(struct region *r);
/* pcpm_region_free with a trylock (signal handlers): false, r untouched, when meta_lock is
 * taken. */
bool pcpm_region_free_try(struct region *r);

/* Statistics: the arena_lock* family (map_lock, meta_lock and create_lock summed; busiest:
 * the one taken most). */
struct pcpm_stats;
void arena_stats_add(struct pcpm_stats *s);

/* fork support */
void pcpm_arena_lock_all(void);
void pcpm_arena_unlock_all(void);
void pcpm_arena_reset_locks(void);

#endif
