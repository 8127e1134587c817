/*
 * sheaf_home.c - objects go home in arrays (see sheaf_home.h; issue 22's item 2, "per-owner
 * batches, collected by the owner on refill").  Calls slab (the objects of a release to their
 * slabs), arena (batch metadata) and topology (the CPU count).
 *
 * Why arrays: until issue 22's fifth round an object went home in a chain through the
 * objects, as mimalloc's xthread_free.  The owner's walk of that chain loaded each object's
 * link, written by the freeing CPU a moment before: one cache miss per object, each waiting
 * for the one before (xmalloc on 2 CPUs: 33 % of the samples on that one load).  A batch is
 * an array of pointers in allocator metadata: the freeing CPU writes it (its lines, four per
 * batch), the owner copies it into its sheaf with memcpy (sequential lines the prefetcher
 * follows), and no object's memory is read or written by either for the journey.  Nor can a
 * write after free bend a link any more: no link lives in a free object.
 *
 * Batches circulate within a class: a slot's frees fill one from its pool for one owner and
 * push it onto the owner's inbox with one compare-and-swap (a push onto a stack that is only
 * ever taken whole: no ABA); the owner, once it has copied the objects out, pushes the empty
 * batch onto its own list of empties (returned) the same way; a pool that runs dry takes the
 * empties of the owner it sends to whole, else its own slot's, and only then new metadata.
 * So a consumer that sends to one producer reuses that producer's empties, and a thread that
 * starts on a new slot (larson replaces its threads) takes the empties of the slots it sends
 * to (giving batches back to the slot they came from left them on the lists of slots no
 * thread used any more, and each new slot made new ones: 0.27 arena acquisitions per 1000
 * calls at 224 CPUs).  A pool is under its slot's sheaf lock of the class.  Batches are
 * metadata and never freed, bounded by what may wait in inboxes (max objects and max / 8 +
 * 64 batches per inbox) and the empties lists.
 */
#include "sheaf_home.h"
#include "topology.h"

#include <string.h>

/* Owners one call sends to: the objects of any more stay on the freeing CPU's sheaves. */
#define HOME_GROUPS 8
/* Batches a pool takes from new metadata at once (4 KiB), carved from its slot's stock of
 * HOME_STOCK: a chunk per (slot, class) straight from the arena was one process-wide
 * meta_lock acquisition each (xthread 8-32 KiB at 224 CPUs: 0.87 per 1000 calls). */
#define HOME_NEW 16
#define HOME_STOCK ((size_t)64 << 10)

/* Every CPU slot's inboxes (home_register), pcpm_nr_cpus entries. */
static _Atomic(struct home_inbox *) *home_inboxes PCPM_READ_MOSTLY;
/* Every slot's metadata stock for batches, under its lock (the pools of all the slot's
 * classes take from it), pcpm_nr_cpus entries.  Taken only under a sheaf lock, which fork's
 * handler takes first: no thread is inside one at a fork. */
static struct home_stock {
	pcpm_lock_t lock;
	char *cur, *end;
} __attribute__((aligned(64))) *home_stocks PCPM_READ_MOSTLY;

bool home_register(unsigned slot, struct home_inbox *inboxes)
{
	_Atomic(struct home_inbox *) *t = __atomic_load_n(&home_inboxes, __ATOMIC_RELAXED);
	if (!t) {
		struct home_stock *st = pcpm_meta_alloc((size_t)pcpm_nr_cpus * sizeof(*st));
		t = st ? pcpm_meta_alloc((size_t)pcpm_nr_cpus * sizeof(*t)) : NULL;
		if (!t)
			return false;
		for (int i = 0; i < pcpm_nr_cpus; i++)
			pcpm_lock_reset(&st[i].lock);
		__atomic_store_n(&home_stocks, st, __ATOMIC_RELEASE);
		__atomic_store_n(&home_inboxes, t, __ATOMIC_RELEASE);
	}
	atomic_store_explicit(&t[slot], inboxes, memory_order_release);
	return true;
}

/* bytes (<= HOME_STOCK) of zeroed metadata from slot's stock; NULL when out of memory. */
static void *stock_take(unsigned slot, size_t bytes)
{
	struct home_stock *st = &__atomic_load_n(&home_stocks, __ATOMIC_ACQUIRE)[slot];
	pcpm_lock(&st->lock);
	if ((size_t)(st->end - st->cur) < bytes) {
		char *m = pcpm_meta_alloc(HOME_STOCK);
		st->cur = m;
		st->end = m ? m + HOME_STOCK : NULL;
	}
	void *r = st->cur;
	if (r)
		st->cur += bytes;
	pcpm_unlock(&st->lock);
	return r;
}

/* owner's (slot + 1) inbox of class cls; NULL when the slot has none (a bad or unset owner). */
static inline struct home_inbox *inbox_of(uint32_t owner, unsigned cls)
{
	_Atomic(struct home_inbox *) *t = __atomic_load_n(&home_inboxes, __ATOMIC_ACQUIRE);
	if (!owner || owner > (uint32_t)pcpm_nr_cpus || !t)
		return NULL;
	struct home_inbox *in = atomic_load_explicit(&t[owner - 1], memory_order_acquire);
	return in ? &in[cls] : NULL;
}

/* Below its limits: max objects and, so that batches of one or two objects (frees from many
 * owners at once) cannot pile up metadata, max / 8 + 64 batches (an inbox of 8-32 KiB
 * objects, 128 of them, receives flushes of 2-7: max / 8 + 8 sent most of them to the
 * slabs).  (racy: a bound, not a count) */
static inline bool inbox_room(struct home_inbox *in, uint32_t max)
{
	return atomic_load_explicit(&in->n, memory_order_relaxed) < max &&
	       atomic_load_explicit(&in->nb, memory_order_relaxed) < max / 8 + 64;
}

/* An empty batch of hl's pool (refilled with the empties of to, the inbox it is for, else of
 * mine, slot's, else new metadata); NULL when out of memory. */
static struct home_batch *batch_get(struct home_local *hl, struct home_inbox *to,
				    struct home_inbox *mine, unsigned slot)
{
	struct home_batch *b = hl->pool;
	if (!b)
		b = atomic_exchange_explicit(&to->returned, NULL, memory_order_acquire);
	if (!b)
		b = atomic_exchange_explicit(&mine->returned, NULL, memory_order_acquire);
	if (!b) {
		b = stock_take(slot, HOME_NEW * sizeof(*b)); /* zeroed */
		if (!b)
			return NULL;
		for (unsigned i = 0; i < HOME_NEW; i++)
			b[i].next = i + 1 < HOME_NEW ? &b[i + 1] : NULL;
	}
	hl->pool = b->next;
	b->n = 0;
	return b;
}

/* Pushes the list first..last (its links set but last's) onto the stack *top. */
static inline void stack_push(_Atomic(struct home_batch *) *top, struct home_batch *first,
			      struct home_batch *last)
{
	struct home_batch *old = atomic_load_explicit(top, memory_order_relaxed);
	do
		last->next = old;
	while (!atomic_compare_exchange_weak_explicit(top, &old, first, memory_order_release,
						      memory_order_relaxed));
}

static inline void batch_push(struct home_inbox *in, struct home_batch *b)
{
	uint32_t n = b->n; /* (before the push: then the owner may take it) */
	stack_push(&in->batches, b, b);
	atomic_fetch_add_explicit(&in->n, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&in->nb, 1, memory_order_relaxed);
}

unsigned home_send(struct home_local *hl, struct home_inbox *mine, unsigned cls, unsigned slot,
		   void **objs, unsigned n, uint32_t max)
{
	struct {
		struct home_inbox *in;
		uint32_t owner;
		struct home_batch *b;
	} g[HOME_GROUPS];
	unsigned ng = 0, keep = 0;
	for (unsigned i = 0; i < n; i++) {
		void *o = objs[i];
		uint32_t owner = __atomic_load_n(&pcpm_page_of(o)->slab_head->slab_owner,
						 __ATOMIC_RELAXED);
		unsigned k = 0;
		while (k < ng && g[k].owner != owner)
			k++;
		if (k == ng) {
			struct home_inbox *in;
			if (owner == slot + 1 || ng == HOME_GROUPS || !(in = inbox_of(owner, cls)) ||
			    !inbox_room(in, max)) {
				objs[keep++] = o;
				continue;
			}
			g[ng++] = (typeof(g[0])){ in, owner, NULL };
		}
		struct home_batch *b = g[k].b;
		if (b && b->n == HOME_BATCH) {
			batch_push(g[k].in, b);
			b = NULL;
		}
		if (!b && !(b = batch_get(hl, g[k].in, mine, slot))) {
			g[k].b = NULL;
			objs[keep++] = o;
			continue;
		}
		b->objs[b->n++] = o;
		g[k].b = b;
	}
	for (unsigned k = 0; k < ng; k++)
		if (g[k].b)
			batch_push(g[k].in, g[k].b);
	return keep;
}

/* The list first..last of empty batches (last's link set by the push) onto in's empties. */
static inline void empties_push(struct home_inbox *in, struct home_batch *first,
				struct home_batch *last)
{
	if (first)
		stack_push(&in->returned, first, last);
}

bool home_fill(struct home_local *hl, struct home_inbox *in, struct slab_sheaf *m, unsigned cap)
{
	struct home_batch *b = hl->home;
	uint32_t n = hl->home_n;
	bool drained = false;
	if (!b && (b = atomic_exchange_explicit(&in->batches, NULL, memory_order_acquire))) {
		n = atomic_exchange_explicit(&in->n, 0, memory_order_relaxed);
		atomic_store_explicit(&in->nb, 0, memory_order_relaxed);
		drained = true;
	}
	struct home_batch *first = NULL, *last = NULL; /* the empties */
	while (b && m->size < cap) {
		unsigned k = MIN((unsigned)b->n, cap - m->size);
		b->n -= k;
		memcpy(&m->objects[m->size], &b->objs[b->n], k * sizeof(void *));
		m->size += k;
		n -= MIN(n, k);
		if (!b->n) {
			struct home_batch *next = b->next;
			if (!first)
				last = b;
			b->next = first;
			first = b;
			b = next;
		}
	}
	empties_push(in, first, last);
	hl->home = b;
	__atomic_store_n(&hl->home_n, b ? n : 0, __ATOMIC_RELAXED);
	return drained;
}

void home_release(struct home_local *hl, struct home_inbox *in, unsigned cls)
{
	struct home_batch *list[2] = {
		hl->home, atomic_exchange_explicit(&in->batches, NULL, memory_order_acquire)
	};
	hl->home = NULL;
	__atomic_store_n(&hl->home_n, 0, __ATOMIC_RELAXED);
	atomic_store_explicit(&in->n, 0, memory_order_relaxed);
	atomic_store_explicit(&in->nb, 0, memory_order_relaxed);
	struct home_batch *first = NULL, *last = NULL; /* the empties */
	for (unsigned k = 0; k < 2; k++) {
		for (struct home_batch *b = list[k], *next; b; b = next) {
			next = b->next;
			if (b->n)
				slab_free_bulk(cls, b->objs, b->n);
			b->n = 0;
			if (!first)
				last = b;
			b->next = first;
			first = b;
		}
	}
	empties_push(in, first, last);
}

static bool list_holds(const struct home_batch *b, const void *p)
{
	for (; b; b = b->next)
		for (unsigned i = 0; i < b->n; i++)
			if (b->objs[i] == p)
				return true;
	return false;
}

bool home_holds(const struct home_local *hl, struct home_inbox *in, const void *p)
{
	return list_holds(hl->home, p) ||
	       list_holds(atomic_load_explicit(&in->batches, memory_order_acquire), p);
}
