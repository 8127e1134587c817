/*
 * early.c - the early allocator (see early.h; the kernel's memblock before mem_init()).
 * A leaf: calls os.c only.
 */
#include "early.h"
#include "vg.h"

#include <string.h>

char pcpm_early_area[EARLY_REENTRY_BYTES + PAGE_SIZE] __attribute__((aligned(64)));
static _Atomic uint32_t early_used PCPM_HOT; /* bytes handed out, headers included */
/* blocks handed out and freed: the early calls in the statistics' malloc/free counts */
static _Atomic uint32_t early_allocs, early_frees;

static inline char *early_base(void)
{
	return (char *)ALIGN_UP((uintptr_t)pcpm_early_area, PAGE_SIZE);
}

/* 16 bytes before each block.  check = the block's address ^ EARLY_CHECK: a pointer into
 * the middle of a block (or into user data that merely looks like a header) does not
 * carry its own address there. */
struct early_hdr {
	uintptr_t check;
	uint32_t size;	       /* usable bytes */
	_Atomic uint32_t state; /* EARLY_LIVE, EARLY_FREE */
};
#define EARLY_CHECK ((uintptr_t)0x9e3779b97f4a7c15ULL)
#define EARLY_LIVE 0x4c495645u
#define EARLY_FREE 0x46524545u

static void *early_carve(size_t n, uint32_t limit);

void *pcpm_early_alloc(size_t n)
{
	if (n > EARLY_MAX || RUNNING_ON_VALGRIND)
		return NULL;
	return early_carve(n, EARLY_BYTES);
}

void *pcpm_early_alloc_reentry(size_t n)
{
	if (n > EARLY_REENTRY_MAX || RUNNING_ON_VALGRIND)
		return NULL;
	return early_carve(n, EARLY_REENTRY_BYTES);
}

static void *early_carve(size_t n, uint32_t limit)
{
	uint32_t size = (uint32_t)ALIGN_UP(n ? n : 1, 16);
	uint32_t need = size + (uint32_t)sizeof(struct early_hdr);
	uint32_t off = atomic_load_explicit(&early_used, memory_order_relaxed);
	do {
		if (off + need > limit)
			return NULL;
	} while (!atomic_compare_exchange_weak_explicit(&early_used, &off, off + need,
							memory_order_relaxed, memory_order_relaxed));
	struct early_hdr *h = (struct early_hdr *)(early_base() + off);
	char *p = (char *)(h + 1);
	h->check = (uintptr_t)p ^ EARLY_CHECK;
	h->size = size;
	atomic_store_explicit(&h->state, EARLY_LIVE, memory_order_release);
	atomic_fetch_add_explicit(&early_allocs, 1, memory_order_relaxed);
	return p;
}

/* The header of the early block p, or an abort when p is none. */
static struct early_hdr *early_block(const void *p, const char *call)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)early_base();
	if (off < sizeof(struct early_hdr) || (off & 15) ||
	    off > atomic_load_explicit(&early_used, memory_order_acquire))
		pcpm_fatal("%s(): invalid pointer %p", call, p);
	struct early_hdr *h = (struct early_hdr *)p - 1;
	if (h->check != ((uintptr_t)p ^ EARLY_CHECK) || !h->size || h->size > EARLY_REENTRY_MAX)
		pcpm_fatal("%s(): invalid pointer %p", call, p);
	return h;
}

size_t pcpm_early_usable(const void *p, const char *call)
{
	struct early_hdr *h = early_block(p, call);
	uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
	if (st != EARLY_LIVE) /* realloc of a freed block: a double free, as elsewhere */
		pcpm_fatal("%s(): %s %p", call,
			   st == EARLY_FREE && !strcmp(call, "realloc") ? "double free" : "invalid pointer", p);
	return h->size;
}

size_t pcpm_early_live_size(const void *p)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)early_base();
	if (off < sizeof(struct early_hdr) || (off & 15) ||
	    off > atomic_load_explicit(&early_used, memory_order_acquire))
		return 0;
	const struct early_hdr *h = (const struct early_hdr *)p - 1;
	if (h->check != ((uintptr_t)p ^ EARLY_CHECK) || !h->size || h->size > EARLY_REENTRY_MAX ||
	    atomic_load_explicit(&h->state, memory_order_acquire) != EARLY_LIVE)
		return 0;
	return h->size;
}

void pcpm_early_free(void *p, const char *call)
{
	struct early_hdr *h = early_block(p, call);
	uint32_t live = EARLY_LIVE;
	if (!atomic_compare_exchange_strong_explicit(&h->state, &live, EARLY_FREE,
						     memory_order_acq_rel, memory_order_acquire))
		pcpm_fatal("%s(): %s %p", call, live == EARLY_FREE ? "double free" : "invalid pointer", p);
	atomic_fetch_add_explicit(&early_frees, 1, memory_order_relaxed);
	/* a re-entry block (larger than EARLY_MAX) freed while it is the last one: its space
	 * comes back, so that wrappers that allocate and free on every call they wrap do not
	 * fill the area during one initialisation */
	if (h->size > EARLY_MAX) {
		uint32_t end = (uint32_t)((char *)p + h->size - early_base());
		uint32_t start = end - h->size - (uint32_t)sizeof(struct early_hdr);
		atomic_compare_exchange_strong_explicit(&early_used, &end, start,
							memory_order_relaxed, memory_order_relaxed);
	}
}

void pcpm_early_calls(uint64_t *allocs, uint64_t *frees)
{
	*allocs = atomic_load_explicit(&early_allocs, memory_order_relaxed);
	*frees = atomic_load_explicit(&early_frees, memory_order_relaxed);
}

size_t pcpm_early_used(void)
{
	return atomic_load_explicit(&early_used, memory_order_relaxed);
}

size_t pcpm_early_live_bytes(void)
{
	size_t live = 0;
	uint32_t end = atomic_load_explicit(&early_used, memory_order_acquire);
	for (uint32_t off = 0; off + sizeof(struct early_hdr) <= end;) {
		struct early_hdr *h = (struct early_hdr *)(early_base() + off);
		uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
		/* a block being carved (its header not written yet) ends the walk */
		if ((st != EARLY_LIVE && st != EARLY_FREE) || !h->size || h->size > EARLY_REENTRY_MAX)
			break;
		if (st == EARLY_LIVE)
			live += h->size;
		off += h->size + (uint32_t)sizeof(struct early_hdr);
	}
	return live;
}
