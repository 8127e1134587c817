/*
 * vgmode.c - the memcheck front end (see vgmode.h): every block handed out is
 * described to memcheck (MALLOCLIKE/FREELIKE), freed blocks wait in a FIFO quarantine before
 * the default free paths take them back, realloc always moves.  Calls the default functions
 * (alloc.h, free.h, alloc-aligned.h), tcache, large, huge and the memcheck leaf (vg.c).
 */
#include "alloc.h"
#include "alloc-aligned.h"
#include "free.h"
#include "early.h"
#include "vgmode.h"
#include "large.h"
#include "vg.h"

#include <errno.h>
#include <string.h>

/* The quarantine: a FIFO ring of freed blocks, bounded in slots and in bytes. */
static pcpm_lock_t q_lock = PCPM_LOCK_INIT;
static struct {
	void *p;
	size_t usable;
} q_ring[VG_QUARANTINE_SLOTS];
static unsigned q_head, q_count;
static size_t q_bytes;

#define Q_EVICT 32 /* blocks given back per lock hold */

static void pcpm_vg_quarantine(void *p, size_t usable, void (*release)(void *p))
{
	if (usable > VG_QUARANTINE_BYTES / 4) {
		release(p);
		return;
	}
	void *out[Q_EVICT];
	bool queued = false;
	while (!queued) {
		unsigned n = 0;
		pcpm_lock(&q_lock);
		while (n < Q_EVICT && q_count &&
		       (q_count == VG_QUARANTINE_SLOTS || q_bytes + usable > VG_QUARANTINE_BYTES)) {
			out[n++] = q_ring[q_head].p;
			q_bytes -= q_ring[q_head].usable;
			q_ring[q_head].p = NULL;
			q_head = (q_head + 1) % VG_QUARANTINE_SLOTS;
			q_count--;
		}
		if (q_count < VG_QUARANTINE_SLOTS && q_bytes + usable <= VG_QUARANTINE_BYTES) {
			unsigned tail = (q_head + q_count) % VG_QUARANTINE_SLOTS;
			q_ring[tail].p = p;
			q_ring[tail].usable = usable;
			q_count++;
			q_bytes += usable;
			queued = true;
		}
		pcpm_unlock(&q_lock);
		for (unsigned i = 0; i < n; i++)
			release(out[i]);
	}
}

static bool pcpm_vg_quarantine_nested(void *p, size_t usable)
{
	/* the interrupted code may hold q_lock: one try; no eviction (release would take
	 * the normal, locking free paths) */
	if (usable > VG_QUARANTINE_BYTES / 4 || !pcpm_trylock(&q_lock))
		return false;
	bool queued = q_count < VG_QUARANTINE_SLOTS && q_bytes + usable <= VG_QUARANTINE_BYTES;
	if (queued) {
		unsigned tail = (q_head + q_count) % VG_QUARANTINE_SLOTS;
		q_ring[tail].p = p;
		q_ring[tail].usable = usable;
		q_count++;
		q_bytes += usable;
	}
	pcpm_unlock(&q_lock);
	return queued;
}

static void pcpm_vg_quarantine_drain(void (*release)(void *p))
{
	for (;;) {
		pcpm_lock(&q_lock);
		if (!q_count) {
			pcpm_unlock(&q_lock);
			return;
		}
		void *p = q_ring[q_head].p;
		q_bytes -= q_ring[q_head].usable;
		q_ring[q_head].p = NULL;
		q_head = (q_head + 1) % VG_QUARANTINE_SLOTS;
		q_count--;
		pcpm_unlock(&q_lock);
		release(p);
	}
}

void vg_fork_prepare(void)
{
	pcpm_lock(&q_lock);
}

void vg_fork_parent(void)
{
	pcpm_unlock(&q_lock);
}

void vg_fork_child(void)
{
	pcpm_lock_reset(&q_lock);
}


/* Usable bytes of p when it is a block pcpmalloc handed out (live or in the quarantine;
 * a slab object may also be free), 0 when the normal free path must classify it. */
static size_t vg_block_usable(const void *p, struct page *pg)
{
	if (pg) {
		if (pg->state == PG_SLAB) {
			struct page *head = pg->slab_head;
			long idx = slab_obj_index(head, p);
			if (idx < 0 || (idx == 0 && slab_cache_of(head)->objects > 1))
				return 0; /* object 0 is never handed out in this mode */
			return slab_cache_of(head)->size;
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
	return PCPM_FREE_KEY ^ 2;
}

/* A block leaves the quarantine: the real free. */
static void vg_release(void *p)
{
	struct page *pg = pcpm_page_of(p);
	if (pg && pg->state == PG_SLAB) {
		unsigned cls = pg->slab_head->cls;
		vg_open_obj(p); /* the cache writes the link and key; the slab closes it */
		((uintptr_t *)p)[1] = 0;
		tcache_release(p, cls); /* counted by vg_free */
		return;
	}
	vg_open_obj(p); /* no stale quarantine mark in a page that is handed out again */
	((uintptr_t *)p)[1] = 0;
	vg_close_obj(p);
	if (unlikely(pcpm_nested())) { /* a handler's free: the no-wait paths */
		if (pg) {
			large_free_nested(pg);
		} else {
			huge_free_nested(pcpm_region_of(p));
		}
		return;
	}
	if (pg) /* a page run or a huge mapping, checked when it was freed */
		large_free(pg);
	else
		huge_free(pcpm_region_of(p));
	zone_note_free(); /* the decay worker, asleep, purges what came free */
}

static void vg_free(void *p, struct page *pg, const char *call)
{
	size_t usable = vg_block_usable(p, pg);
	/* memcheck reports a bad free with the program's stack; pcpmalloc then aborts */
	VALGRIND_FREELIKE_BLOCK(p, 0);
	if (!usable) {
		/* an early block (served before the start: the mode forced outside valgrind,
		 * where the early area serves) goes back to the area, never to the quarantine;
		 * anything else aborts */
		dfl_free_slow(p, pg, call);
		return;
	}
	vg_open_obj(p);
	uintptr_t key = ((uintptr_t *)p)[1];
	if (key == vg_quarantine_key())
		pcpm_double_free(call, p);
	if (pg && pg->state == PG_SLAB && key == PCPM_FREE_KEY)
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

void vg_free_generic(void *p, const char *call)
{
	if (!p)
		return;
	PCPM_INSIDE_BEGIN();
	vg_free(p, pcpm_page_of(p), call);
	PCPM_INSIDE_END();
}

void *vg_malloc(size_t n)
{
	void *p = dfl_malloc_slow(n); /* no fast stacks in this mode */
	if (p)
		pcpm_vg_alloced(p, n, dfl_usable_size(p, "malloc"), false);
	return p;
}

void *vg_aligned_alloc(size_t align, size_t size)
{
	void *p = dfl_aligned_alloc(align, size);
	if (p)
		pcpm_vg_alloced(p, size, dfl_usable_size(p, "memalign"), false);
	return p;
}

void *vg_calloc(size_t n)
{
	void *p = vg_malloc(n);
	if (unlikely(!p))
		return NULL;
	VALGRIND_MAKE_MEM_DEFINED(p, n); /* zeros memcheck knows to be defined */
	return dfl_calloc_clear(p, n);
}

size_t vg_usable_size(const void *p)
{
	/* the size asked for, as memcheck's own malloc_usable_size answers; the bytes past it
	 * are no-access */
	return pcpm_vg_block_size(p, dfl_usable_size(p, "malloc_usable_size"));
}

void vg_trim(void)
{
	pcpm_vg_quarantine_drain(vg_release);
}

/* Always moves, as memcheck's own realloc: the copy carries memcheck's definedness. */
static void *__vg_realloc(void *p, size_t size)
{
	struct page *pg = pcpm_page_of(p);
	size_t usable = vg_block_usable(p, pg), old;
	if (usable) {
		old = pcpm_vg_block_size(p, usable); /* 0 for a block already freed */
	} else if (pcpm_is_early(p)) { /* served before the start: moves out of the area */
		old = pcpm_early_usable(p, "realloc");
	} else if (!pg && !pcpm_owns(p)) {
		return pcpm_foreign_realloc(p, size); /* glibc's block stays glibc's */
	} else {
		dfl_free_slow(p, pg, "realloc"); /* aborts: no live block of pcpmalloc's */
		return NULL;
	}
	void *q = vg_malloc(size);
	if (!q)
		return NULL;
	memcpy(q, p, MIN(old, size));
	vg_free_generic(p, "realloc");
	return q;
}

void *vg_realloc(void *p, size_t size)
{
	PCPM_INSIDE_BEGIN();
	void *q = __vg_realloc(p, size);
	PCPM_INSIDE_END();
	return q;
}
