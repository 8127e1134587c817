/*
 * depot.c - the node depots of free-object chains (see depot.h).  Calls slab (chains given
 * back), arena (metadata) and topology (the CPU count).
 *
 * Why: at 224 CPUs every (CPU, class) kept the most objects it ever had in use, as free
 * objects on its sheaves, home chain and inbox (a CPU carved only when all of them and the
 * barn were empty; the barn takes only full sheaves of up to 128 objects, which a CPU's
 * random walk in one class seldom fills).  The peak RSS was the sum of those maxima
 * (bench/RESULTS.md, issue 22 fifth round; bench/hoard_model.py).  With the depot a CPU keeps
 * at most two chains of a class (DEPOT_BYTES each, at least DEPOT_MIN objects) and the
 * node's CPUs share the rest, so the objects carved follow the node's sum in use rather than
 * the sum of each CPU's maxima.  Lock-free, so it costs no process-wide lock: a chain is a
 * fixed number of objects linked through their first word (safe-linked, as the inboxes'),
 * put with one compare-and-swap into an empty slot, taken whole with one exchange (no ABA:
 * a taken slot is NULL until a new chain is put there).  The kernel's barn holds full
 * sheaves under a spinlock; this is the barn's role with a CPU's surplus in small pieces.
 */
#include "depot.h"
#include "config.h"
#include "topology.h"

#define DEPOT_SLOTS 128	   /* chains a node's depot of one class holds */
#define DEPOT_BYTES (16U << 10) /* bytes of one chain ... */
#define DEPOT_MIN 2		   /* ... and never fewer objects than this */

struct node_depot {
	_Atomic(void *) slot[NR_SIZE_CLASSES][DEPOT_SLOTS];
	_Atomic uint32_t chains[NR_SIZE_CLASSES]; /* chains in the slots (about) */
	_Atomic uint32_t objs[NR_SIZE_CLASSES];	  /* objects on them (about) */
	/* the fewest chains since the last decay (count_min), and whether one was taken */
	_Atomic uint32_t low[NR_SIZE_CLASSES];
	_Atomic bool taken[NR_SIZE_CLASSES];
};

uint16_t pcpm_depot_chunk[NR_SIZE_CLASSES] PCPM_READ_MOSTLY;
static _Atomic(struct node_depot *) depots[MAX_NUMNODES];

void pcpm_depot_init(void)
{
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		uint32_t k = MAX(DEPOT_BYTES / pcpm_class_size[c], (uint32_t)DEPOT_MIN);
		/* a few CPUs share their surplus through their two slots' sheaves already
		 * (depot_setup relies on this rule) */
		pcpm_depot_chunk[c] =
			(uint16_t)(pcpm_nr_cpus > 4 && 2 * k <= pcpm_sheaf_cap[c] ? k : 0);
	}
}

static inline struct node_depot *depot_of(int node)
{
	return atomic_load_explicit(&depots[node], memory_order_acquire);
}

PCPM_COLD bool depot_setup(int node)
{
	if (pcpm_nr_cpus <= 4)
		return true; /* no class has a depot (pcpm_depot_init) */
	struct node_depot *d = atomic_load_explicit(&depots[node], memory_order_relaxed);
	if (!d && (d = pcpm_meta_alloc(sizeof(*d))))
		atomic_store_explicit(&depots[node], d, memory_order_release);
	return d != NULL;
}

/* chain (n objects, at most a sheaf) into an empty slot of d's class cls; false when every
 * slot is taken */
static bool depot_put(struct node_depot *d, unsigned cls, void *chain, unsigned n)
{
	/* counted first, so that a taker's decrement never comes before it */
	atomic_fetch_add_explicit(&d->chains[cls], 1, memory_order_relaxed);
	for (unsigned i = 0; i < DEPOT_SLOTS; i++) {
		void *none = NULL;
		if (!atomic_load_explicit(&d->slot[cls][i], memory_order_relaxed) &&
		    atomic_compare_exchange_strong_explicit(&d->slot[cls][i], &none, chain,
							    memory_order_release,
							    memory_order_relaxed)) {
			atomic_fetch_add_explicit(&d->objs[cls], n, memory_order_relaxed);
			return true;
		}
	}
	atomic_fetch_sub_explicit(&d->chains[cls], 1, memory_order_relaxed);
	return false;
}

static void *depot_get(struct node_depot *d, unsigned cls)
{
	if (!atomic_load_explicit(&d->chains[cls], memory_order_relaxed))
		return NULL;
	for (unsigned i = 0; i < DEPOT_SLOTS; i++) {
		if (atomic_load_explicit(&d->slot[cls][i], memory_order_relaxed)) {
			void *c = atomic_exchange_explicit(&d->slot[cls][i], NULL, memory_order_acquire);
			if (c) {
				uint32_t n = atomic_fetch_sub_explicit(&d->chains[cls], 1,
								       memory_order_relaxed) - 1;
				/* (racy: a lost update misses a low only until the next take) */
				if (n < atomic_load_explicit(&d->low[cls], memory_order_relaxed))
					atomic_store_explicit(&d->low[cls], n, memory_order_relaxed);
				if (!atomic_load_explicit(&d->taken[cls], memory_order_relaxed))
					atomic_store_explicit(&d->taken[cls], true, memory_order_relaxed);
				return c;
			}
		}
	}
	return NULL;
}

void __depot_trim(int node, unsigned cls, struct slab_sheaf *m)
{
	unsigned k = pcpm_depot_chunk[cls];
	struct node_depot *d = depot_of(node);
	if (unlikely(!d))
		return; /* (out of memory at the node's set-up) */
	while (m->size > 2 * k) {
		/* the newest k objects: written by this CPU a moment ago, their lines warm */
		void **o = &m->objects[m->size - k];
		for (unsigned i = 0; i + 1 < k; i++)
			fl_store(o[i], o[i + 1]);
		fl_store(o[k - 1], NULL);
		if (!depot_put(d, cls, o[0], k))
			return; /* full: they stay (their links are rewritten when they move) */
		m->size -= k;
	}
}

void *depot_put_chain(int node, unsigned cls, void *chain, uint32_t *n)
{
	unsigned k = pcpm_depot_chunk[cls];
	struct node_depot *d = depot_of(node);
	if (!k || unlikely(!d))
		return chain;
	while (chain) {
		void *last = chain, *rest;
		unsigned i = 1;
		for (; i < k && (rest = depot_next(last, cls)) != NULL; i++)
			last = rest;
		if (i < k)
			break; /* fewer than a chain's worth */
		rest = depot_next(last, cls);
		fl_store(last, NULL);
		if (!depot_put(d, cls, chain, k)) {
			fl_store(last, rest);
			break;
		}
		chain = rest;
		*n -= MIN(*n, k);
	}
	return chain;
}

bool depot_give(int node, unsigned cls, void *chain, unsigned n)
{
	struct node_depot *d = depot_of(node);
	return d && pcpm_depot_chunk[cls] && depot_put(d, cls, chain, n);
}

bool depot_fill(int node, unsigned cls, struct slab_sheaf *m)
{
	struct node_depot *d = depot_of(node);
	void *o = d && pcpm_depot_chunk[cls] ? depot_get(d, cls) : NULL;
	if (!o)
		return false;
	/* a chain holds a sheaf at most, and m is empty */
	uint32_t n = m->size;
	for (; o; o = depot_next(o, cls))
		m->objects[m->size++] = o;
	atomic_fetch_sub_explicit(&d->objs[cls], m->size - n, memory_order_relaxed);
	return true;
}

uint64_t depot_chain_release(unsigned cls, void *chain)
{
	void *buf[32];
	unsigned nbuf = 0;
	uint64_t n = 0;
	for (void *o = chain, *next; o; o = next) {
		next = depot_next(o, cls); /* before o's link is the slab's */
		buf[nbuf++] = o;
		if (nbuf == 32) {
			slab_free_bulk(cls, buf, nbuf);
			n += nbuf;
			nbuf = 0;
		}
	}
	if (nbuf)
		slab_free_bulk(cls, buf, nbuf);
	return n + nbuf;
}

uint64_t depot_release_all(bool all)
{
	uint64_t n = 0;
	for (int node = 0; node < MAX_NUMNODES; node++) {
		struct node_depot *d = depot_of(node);
		for (unsigned c = 0; d && c < NR_SIZE_CLASSES; c++) {
			uint32_t have = atomic_load_explicit(&d->chains[c], memory_order_relaxed);
			uint32_t low = atomic_load_explicit(&d->low[c], memory_order_relaxed);
			bool idle = all || !atomic_exchange_explicit(&d->taken[c], false,
								     memory_order_relaxed);
			uint32_t k = idle ? have : MIN(low, have / (uint32_t)pcpm_cfg.count_min_div);
			void *chain;
			for (; k && (chain = depot_get(d, c)) != NULL; k--) {
				uint64_t got = depot_chain_release(c, chain);
				atomic_fetch_sub_explicit(&d->objs[c], (uint32_t)got,
							  memory_order_relaxed);
				n += got;
			}
			atomic_store_explicit(&d->taken[c], false, memory_order_relaxed);
			atomic_store_explicit(&d->low[c],
					      atomic_load_explicit(&d->chains[c], memory_order_relaxed),
					      memory_order_relaxed);
		}
	}
	return n;
}

bool depot_pending(void)
{
	for (int node = 0; node < MAX_NUMNODES; node++) {
		struct node_depot *d = depot_of(node);
		for (unsigned c = 0; d && c < NR_SIZE_CLASSES; c++)
			if (atomic_load_explicit(&d->chains[c], memory_order_relaxed))
				return true;
	}
	return false;
}

bool depot_holds(unsigned cls, const void *p)
{
	bool found = false;
	for (int node = 0; node < MAX_NUMNODES && !found; node++) {
		struct node_depot *d = depot_of(node);
		for (unsigned i = 0; d && i < DEPOT_SLOTS && !found; i++) {
			void *chain = atomic_exchange_explicit(&d->slot[cls][i], NULL,
							       memory_order_acquire);
			if (!chain)
				continue;
			atomic_fetch_sub_explicit(&d->chains[cls], 1, memory_order_relaxed);
			unsigned n = 0;
			for (void *o = chain; o; o = depot_next(o, cls), n++)
				found |= o == p;
			atomic_fetch_sub_explicit(&d->objs[cls], n, memory_order_relaxed);
			if (!depot_put(d, cls, chain, n))
				depot_chain_release(cls, chain); /* the slots filled meanwhile */
		}
	}
	return found;
}

size_t depot_cached_bytes(void)
{
	size_t bytes = 0;
	for (int node = 0; node < MAX_NUMNODES; node++) {
		struct node_depot *d = depot_of(node);
		for (unsigned c = 0; d && c < NR_SIZE_CLASSES; c++)
			bytes += (size_t)atomic_load_explicit(&d->objs[c], memory_order_relaxed) *
				 pcpm_class_size[c];
	}
	return bytes;
}
