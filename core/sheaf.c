/*
 * sheaf.c - the per-CPU level of the slab layer (see sheaf.h; Linux 6.18's
 * slub_percpu_sheaves, kernel-pcp.md §7.2, §12.6).  Calls depot (the node depots of
 * free-object chains, depot.c: above 4 CPUs a CPU keeps two chains a class, the node shares
 * the rest), barn (the node barns, barn.c),
 * slab (the kmem_cache level below), pcp (the current CPU and its node), config (the decay
 * period) and arena (metadata).
 *
 * A sheaf is the kernel's: an array of object pointers with a count (`void *objects[]`), so
 * a thread cache's refill or flush through it is a copy and no object's memory is read or
 * written under a lock here.  Per CPU slot and class a `main` and a `spare` sheaf under the
 * slot's own lock (a trylock, as the pcp's: per CPU, not process-wide); per NUMA node and
 * class a barn of full sheaves (up to barn_max) and of empty ones, under a small lock.
 *
 * Allocation takes from main; main short swaps with a fuller spare; main empty is exchanged
 * one-for-one with the barn for a full sheaf (barn_replace_empty_sheaf); else main is topped
 * up from the slabs (slab_alloc_bulk: whole slab freelists).  Freeing puts into main; main
 * full swaps with an empty spare, else is exchanged one-for-one for an empty sheaf
 * (barn_replace_full_sheaf), else (barn at its limit) is flushed to the slabs.  Exchanging
 * one sheaf at a time leaves the CPU with one full and one empty sheaf whichever way it
 * goes next, so a CPU whose allocations and frees balance at the edge of its window stays
 * off the barn (both sheaves exchanged in one hold landed it on the opposite edge: 116 barn
 * acquisitions per 1000 calls of an alloc-8/free-8 loop).
 *
 * Decay (sheaf_decay, on the pcp decay period, from vmstat.c): objects that stayed on a
 * CPU's sheaves through a whole period (the fewest it held since the last decay: the
 * count_min rule of decay_pcp_high, kernel-pcp.md §5.1) and full sheaves that stayed in a
 * barn go back to the slabs, so an idle process's memory flows on to the pcp, the zone and
 * the purge.
 *
 * Every object on a sheaf carries PCPM_FREE_KEY's mark in its second word.  Sheaves are
 * allocator metadata and are never freed: empty ones wait in their node's barn.  Lock order:
 * sheaf lock, barn lock, kmem_cache lock (then the pcp and zone locks the slab level takes).
 * setup_lock is never taken under a sheaf lock.
 */
#include "sheaf.h"
#include "barn.h"
#include "config.h"
#include "depot.h"
#include "slab_cpu.h"
#include "topology.h"

#include <string.h>

/* Per CPU slot and class (slub_percpu_sheaves): only threads on that CPU take the lock. */
struct sheaf_pcs {
	pcpm_lock_t lock;
	/* the fewest objects main and spare held together since the last decay (count_min):
	 * what stayed idle through the period */
	uint32_t low;
	/* refills and flushes through these sheaves since the last decay (0: idle) */
	uint32_t ops;
	struct slab_sheaf *main, *spare;
	uint8_t last_dir; /* the last barn exchange: SHEAF_ALLOC or SHEAF_FREE */
	/* objects of this CPU's slabs taken from its inbox that main could not hold yet: a
	 * chain (safe-linked), the lock holder's alone */
	void *home;
	/* objects on the home chain (about: the inbox's count when it was taken, which may
	 * miss a push; mallinfo's free bytes), written under lock, read racily */
	uint32_t home_n;
	/* the CPU's frozen slabs of the class, where the sheaves carve new objects */
	struct cpu_slab cslab;
} __attribute__((aligned(64)));

enum { SHEAF_ALLOC = 1, SHEAF_FREE = 2 };

/* One CPU slot's sheaves of every class, set up by the first thread that needs them on that
 * CPU: on a machine of several nodes in pages of their own, first touched there, so they
 * come from the CPU's node (the kernel allocates per-CPU data on the CPU's node). */
struct sheaf_cpu {
	struct sheaf_pcs pcs[NR_SIZE_CLASSES];
	/* counters of this CPU, written by its threads under the class's sheaf lock (racy
	 * increments between two threads of one slot are possible and harmless) */
	uint64_t refills, flushes, lock_contended, remote_frees, inbox_drains;
	/*
	 * Objects of this CPU's slabs (slab_owner) that other CPUs freed, per class: a chain
	 * through the objects (safe-linked), pushed by any CPU with one compare-and-swap per
	 * chain (mimalloc's xthread_free, per CPU rather than per page), taken whole by this
	 * CPU's threads under the class's sheaf lock (so a walk under that lock sees a stable
	 * chain below the head).  On lines of its own: other CPUs write it.
	 */
	_Atomic(void *) inbox[NR_SIZE_CLASSES] PCPM_CACHELINE_ALIGNED;
	/* objects pushed since the owner last took its inbox (about: a push between the
	 * owner's take and its reset is forgotten, never counted twice) */
	_Atomic uint32_t inbox_n[NR_SIZE_CLASSES];
	/* metadata this slot's sheaves are carved from (stock_take), under stock_lock */
	pcpm_lock_t stock_lock PCPM_CACHELINE_ALIGNED;
	char *stock, *stock_end;
};

/* Sheaf metadata a CPU slot takes at once: a CPU's first use of a class needs two sheaves
 * (up to 2 KiB), and taking each pair from the arena was one process-wide meta_lock hold per
 * class and CPU (544 of churn 4-16 KiB's 687 arena acquisitions at 224 CPUs). */
#define SHEAF_STOCK (32UL << 10)

/* Objects an inbox takes before frees for its CPU stay on the freeing CPU: a CPU whose
 * threads stopped allocating (a thread that exited, a CPU gone idle) never takes its inbox,
 * and what other CPUs send it would wait there, resident and in use, until a decay (a
 * thread that allocated 200 MB on one CPU and exited, freed on another: 204 MB stayed). */
#define INBOX_SHEAVES 4
/* ... and never fewer than INBOX_BYTES of them: with a few CPUs a sheaf of 8-32 KiB objects
 * holds 4, and 16 objects in flight sent the rest of a producer/consumer pair's frees
 * through the consumer's sheaves, the barn and the kmem_cache lock (xthread 8-32 KiB on 2
 * CPUs: 220 process-wide acquisitions per 1000 calls) */
#define INBOX_BYTES (1U << 20)
static uint32_t inbox_max[NR_SIZE_CLASSES] PCPM_READ_MOSTLY;

uint32_t pcpm_paged_max PCPM_READ_MOSTLY = SLAB_PAGED_MAX - SLAB_PAGED_STEP;
static _Atomic(struct sheaf_cpu *) *cpu_sheaves PCPM_READ_MOSTLY; /* pcpm_nr_cpus slots */
/* CPU slots whose sheaves are set up: while there is one, every object's home is it (a
 * single-threaded program, or one whose threads share a slot: send_home has nothing to do) */
static _Atomic unsigned nr_cpu_sheaves PCPM_READ_MOSTLY;
static pcpm_lock_t setup_lock PCPM_HOT = PCPM_LOCK_INIT;
/* the decay's clock (ms of its last run) and what it gave back, under decay_lock */
static pcpm_lock_t decay_lock = PCPM_LOCK_INIT;
static uint64_t decay_last_ms, decayed;

/*
 * Objects of SHEAF_BIG_MIN and more: sheaves of at least SHEAF_BIG_BYTES (8-32 objects).
 * With 32 KiB (1-4 objects) a producer and a consumer sharing a slot on 2 CPUs sent their
 * swing through the barn and the slabs (xthread-large: 220 kmem_cache acquisitions per 1000
 * calls; now 0, bench/RESULTS.md issue 22 fourth round).
 */
#define SHEAF_BIG_MIN 8192
#define SHEAF_BIG_BYTES ((size_t)256 << 10)
/*
 * Objects per sheaf.  The kernel's calculate_sheaf_capacity gives 60 / 26 / 12 / 4 objects
 * (below 256 B, 1 KiB, 4 KiB, above), which on a many-CPU machine would make a
 * producer/consumer pair of 8-32 KiB objects meet the barn every 4 objects.  Here a sheaf
 * holds SHEAF_BYTES of objects, never fewer than the kernel's count nor more than 64 (128
 * above 64 CPUs), with SHEAF_BYTES growing with the CPUs as the pagevec does (15, then 31
 * above 64 CPUs) and calculate_order's min_objects: 16 KiB per CPU from 32 KiB to 1 MiB (64
 * CPUs and more).  Lock pressure grows with the CPUs, and so does a machine's memory.
 * Every machine has them: since objects go home a consumer's sheaves hold nothing, and on 2
 * CPUs they took bench/scale.sh's kmem_cache lock acquisitions per 1000 calls from 154 to 25
 * (churn 4-16 KiB), 923 to 31 (churn 16-32 KiB) and 971 to 1 (xthread 8-32 KiB) at the same
 * peak RSS (until then machines of 4 CPUs or fewer had none: the sheaves held the consumers'
 * memory, +20 % of xthread-large's peak on 2 CPUs).  PCPMALLOC_SHEAF_KB sets SHEAF_BYTES.
 */
static unsigned sheaf_capacity(uint32_t size)
{
	size_t kernel = size >= 4096 ? 4 : size >= 1024 ? 12 : size >= 256 ? 26 : 60;
	size_t bytes = pcpm_cfg.sheaf_kb != AUTO
			       ? (size_t)pcpm_cfg.sheaf_kb << 10
			       : MIN(MAX((size_t)pcpm_nr_cpus << 14, (size_t)32 << 10), (size_t)1 << 20);
	/* (fewer than 16 CPUs: above, the CPU rule gives more) */
	if (size >= SHEAF_BIG_MIN && pcpm_cfg.sheaf_kb == AUTO)
		bytes = MAX(bytes, SHEAF_BIG_BYTES);
	size_t max = pcpm_nr_cpus > 64 ? 128 : 64;
	return (unsigned)MIN(MAX(bytes / size, kernel), max);
}

void pcpm_sheaf_init(bool on)
{
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		pcpm_sheaf_cap[c] = on ? (uint16_t)sheaf_capacity(pcpm_class_size[c]) : 0;
		inbox_max[c] = MAX(INBOX_SHEAVES * (uint32_t)pcpm_sheaf_cap[c],
				   INBOX_BYTES / pcpm_class_size[c]);
	}
	pcpm_barn_init();
	pcpm_depot_init();
	pcpm_paged_max = pcpm_sheaf_cap[NR_SIZE_CLASSES - 1] ? SLAB_PAGED_MAX
							     : SLAB_PAGED_MAX - SLAB_PAGED_STEP;
}

/* bytes (a 64-byte multiple, <= SHEAF_STOCK) of zeroed metadata from the slot's stock, NULL
 * when out of memory.  Takes only the slot's stock_lock, and the arena's for a new stock. */
static PCPM_COLD void *stock_take(struct sheaf_cpu *sc, size_t bytes)
{
	pcpm_lock(&sc->stock_lock);
	if ((size_t)(sc->stock_end - sc->stock) < bytes) {
		char *m = pcpm_meta_alloc(SHEAF_STOCK);
		sc->stock = m;
		sc->stock_end = m ? m + SHEAF_STOCK : NULL;
	}
	void *r = sc->stock;
	if (r)
		sc->stock += bytes;
	pcpm_unlock(&sc->stock_lock);
	return r;
}

static PCPM_COLD struct sheaf_cpu *sheaf_cpu_setup(unsigned cpu)
{
	pcpm_lock(&setup_lock);
	if (!cpu_sheaves)
		cpu_sheaves = pcpm_meta_alloc((size_t)pcpm_nr_cpus * sizeof(*cpu_sheaves));
	struct sheaf_cpu *sc = NULL;
	if (cpu_sheaves && !(sc = atomic_load_explicit(&cpu_sheaves[cpu], memory_order_relaxed))) {
		if (atomic_load_explicit(&pcpm_nr_zones, memory_order_relaxed) > 1)
			sc = pcpm_os_map(ALIGN_UP(sizeof(*sc), PAGE_SIZE), PAGE_SIZE);
		else
			sc = pcpm_meta_alloc(sizeof(*sc));
		if (sc && !depot_setup(pcp_cpu_node(cpu)))
			sc = NULL; /* (a slot's sheaves are never freed: a few bytes lost) */
		if (sc) {
			atomic_store_explicit(&cpu_sheaves[cpu], sc, memory_order_release);
			atomic_fetch_add_explicit(&nr_cpu_sheaves, 1, memory_order_relaxed);
		}
	}
	pcpm_unlock(&setup_lock);
	return sc;
}

/*
 * The calling thread's CPU's sheaves of class cls, its slot and its node; NULL when they cannot be
 * set up (out of memory).  The node's barn of the class and the two sheaves are set up here
 * too, before any sheaf lock is taken (a racing thread of the same slot may set up a sheaf
 * twice: the loser's goes to the barn's empty list).
 */
static inline struct sheaf_pcs *this_pcs(unsigned cls, unsigned *slot, int *node)
{
	unsigned cpu = *slot = pcp_cpu();
	*node = pcp_cpu_node(cpu);
	struct sheaf_cpu *sc = NULL;
	if (likely(cpu_sheaves))
		sc = atomic_load_explicit(&cpu_sheaves[cpu], memory_order_acquire);
	if (unlikely(!sc) && !(sc = sheaf_cpu_setup(cpu)))
		return NULL;
	if (unlikely(!barn_ensure(*node, cls)))
		return NULL;
	struct sheaf_pcs *pcs = &sc->pcs[cls];
	if (unlikely(!__atomic_load_n(&pcs->spare, __ATOMIC_ACQUIRE))) {
		size_t two = 2 * barn_sheaf_size(cls);
		void *mem = two <= SHEAF_STOCK ? stock_take(sc, two) : NULL;
		struct slab_sheaf *m = barn_sheaf_new(cls, 2, mem), *s = m ? m->next : NULL;
		if (!m)
			return NULL;
		pcpm_lock(&pcs->lock);
		bool lost = pcs->spare != NULL;
		if (!lost) {
			pcs->main = m;
			__atomic_store_n(&pcs->spare, s, __ATOMIC_RELEASE);
		}
		pcpm_unlock(&pcs->lock);
		if (lost)
			barn_put_empty(*node, cls, m);
	}
	return pcs;
}

static inline struct sheaf_cpu *pcs_cpu(struct sheaf_pcs *pcs, unsigned cls)
{
	return (struct sheaf_cpu *)(pcs - cls);
}

/* CPU slot cpu's sheaves, NULL while no thread of that slot has used any. */
static inline struct sheaf_cpu *cpu_sheaf(int cpu)
{
	return cpu_sheaves ? atomic_load_explicit(&cpu_sheaves[cpu], memory_order_acquire) : NULL;
}

/*
 * The CPU's sheaf lock is taken (its holder preempted or migrated inside it, or two threads
 * hashed to one slot): the next slots' sheaves of the node, locked, else NULL (the slabs
 * serve).  *cpu becomes that slot.  A preempted holder keeps the lock for its time slice,
 * and every refill and flush of the class there went to the kmem_cache lock (xmalloc, 2
 * CPUs: 90k-190k trylock failures).  Any slot's sheaves may hold the node's objects.
 */
#define NEAR_SLOTS 2
static struct sheaf_pcs *pcs_trylock_near(unsigned cls, unsigned *cpu, int node)
{
	unsigned n = (unsigned)pcpm_nr_cpus;
	for (unsigned k = 1; k <= NEAR_SLOTS && k < n; k++) {
		unsigned c = (*cpu + k) % n;
		struct sheaf_cpu *sc = cpu_sheaf((int)c);
		if (!sc || pcp_cpu_node(c) != node)
			continue;
		struct sheaf_pcs *pcs = &sc->pcs[cls];
		/* (spare is published last, under the lock: main is set when it is) */
		if (__atomic_load_n(&pcs->spare, __ATOMIC_ACQUIRE) && pcpm_trylock(&pcs->lock)) {
			*cpu = c;
			return pcs;
		}
	}
	return NULL;
}

static inline void pcs_note_low(struct sheaf_pcs *pcs)
{
	uint32_t n = pcs->main->size + pcs->spare->size;
	if (n < pcs->low)
		pcs->low = n;
}

/*
 * Objects go home: the objects of objs[] whose slab another CPU's sheaves took them from
 * (slab_owner) are linked into one chain per owner (SLUB's build_detached_freelist, by
 * owner instead of by slab) and pushed onto that CPU's inbox with one compare-and-swap
 * each, so a CPU that frees what others allocated (a consumer) keeps none of it and takes
 * no lock for it; the owner collects them when its sheaves run dry.  The others (this
 * CPU's, a slab without an owner, more owners than one call groups) are moved to the front
 * of objs[]; returns how many.  No lock held.
 */
#define HOME_GROUPS 8
static unsigned send_home(unsigned cls, unsigned cpu, void **objs, unsigned n)
{
	struct {
		struct sheaf_cpu *sc;
		uint32_t owner;
		unsigned n;
		void *first, *last;
	} g[HOME_GROUPS];
	unsigned ng = 0, keep = 0;
	/* (slab_owner names a slot once its sheaves took objects: set up before) */
	if (atomic_load_explicit(&nr_cpu_sheaves, memory_order_relaxed) <= 1)
		return n;
	/* a class with a depot: only other nodes' objects go home, the node's pool the rest */
	int node = pcpm_depot_chunk[cls] ? pcp_cpu_node(cpu) : -1;
	for (unsigned i = 0; i < n; i++) {
		void *o = objs[i];
		uint32_t owner = __atomic_load_n(&pcpm_page_of(o)->slab_head->slab_owner,
						 __ATOMIC_RELAXED);
		unsigned k = 0;
		while (k < ng && g[k].owner != owner)
			k++;
		if (k == ng && owner && owner != cpu + 1 && owner <= (uint32_t)pcpm_nr_cpus &&
		    pcp_cpu_node(owner - 1) != node &&
		    ng < HOME_GROUPS && (g[k].sc = cpu_sheaf((int)owner - 1)) != NULL &&
		    atomic_load_explicit(&g[k].sc->inbox_n[cls], memory_order_relaxed) <
			    inbox_max[cls])
			g[ng++] = (typeof(g[0])){ g[k].sc, owner, 0, NULL, o };
		if (k == ng) {
			objs[keep++] = o;
			continue;
		}
		fl_store(o, g[k].first); /* (the first one's link is set when it is pushed) */
		g[k].first = o;
		g[k].n++;
	}
	for (unsigned k = 0; k < ng; k++) {
		/* a class with a depot: into the owner's node's, which all its CPUs share (an
		 * inbox waits for its one owner, and an exited thread's never drains) */
		if (node >= 0 && (fl_store(g[k].last, NULL),
				  depot_give(pcp_cpu_node(g[k].owner - 1), cls, g[k].first, g[k].n)))
			continue;
		_Atomic(void *) *inbox = &g[k].sc->inbox[cls];
		void *old = atomic_load_explicit(inbox, memory_order_relaxed);
		do
			fl_store(g[k].last, old);
		while (!atomic_compare_exchange_weak_explicit(inbox, &old, g[k].first,
							      memory_order_release,
							      memory_order_relaxed));
		atomic_fetch_add_explicit(&g[k].sc->inbox_n[cls], g[k].n, memory_order_relaxed);
	}
	if (keep < n) {
		struct sheaf_cpu *me = cpu_sheaf((int)cpu);
		me->remote_frees += n - keep;
	}
	return keep;
}

/*
 * An empty main filled from this CPU's objects that came home: the home chain, else the
 * inbox taken whole (it becomes the home chain); what main cannot hold stays on the home
 * chain for the next refill (mimalloc's local_free).  pcs lock held.
 */
static void __home_fill(struct sheaf_pcs *pcs, unsigned cls, int node)
{
	void *o = pcs->home;
	uint32_t n = pcs->home_n;
	if (!o && (o = atomic_exchange_explicit(&pcs_cpu(pcs, cls)->inbox[cls], NULL,
						memory_order_acquire)) != NULL) {
		n = atomic_exchange_explicit(&pcs_cpu(pcs, cls)->inbox_n[cls], 0,
					     memory_order_relaxed);
		pcs_cpu(pcs, cls)->inbox_drains++;
	}
	struct slab_sheaf *m = pcs->main;
	for (unsigned cap = pcpm_sheaf_cap[cls]; o && m->size < cap; o = depot_next(o, cls)) {
		m->objects[m->size++] = o;
		n -= n > 0;
	}
	pcs->home = o = depot_put_chain(node, cls, o, &n); /* the surplus to the node */
	__atomic_store_n(&pcs->home_n, o ? n : 0, __ATOMIC_RELAXED);
}

/* The home chain and the inbox to the slabs (decay, flush).  pcs lock held. */
static void __home_release(struct sheaf_pcs *pcs, unsigned cls)
{
	void *home = pcs->home;
	pcs->home = NULL;
	__atomic_store_n(&pcs->home_n, 0, __ATOMIC_RELAXED);
	atomic_store_explicit(&pcs_cpu(pcs, cls)->inbox_n[cls], 0, memory_order_relaxed);
	depot_chain_release(cls, home);
	depot_chain_release(cls, atomic_exchange_explicit(&pcs_cpu(pcs, cls)->inbox[cls], NULL,
							  memory_order_acquire));
}

/*
 * The most objects a refill from partial slabs takes (at least q, a quarter sheaf): a whole
 * sheaf for a producer (its last barn exchange was an allocation too).  They are free,
 * resident memory already; the producer meets the kmem_cache lock once a sheaf, not once a
 * quarter (xmalloc, 2 CPUs: 96 -> 35 kmem_cache acquisitions per 1000 calls with the above).
 */
static inline unsigned producer_max(unsigned cls, bool producer, unsigned q)
{
	return producer ? MAX(q, (unsigned)pcpm_sheaf_cap[cls]) : q;
}

unsigned sheaf_alloc_bulk(unsigned cls, unsigned want, void **objs)
{
	unsigned cap = pcpm_sheaf_cap[cls], cpu;
	int node;
	struct sheaf_pcs *pcs;
	if (!cap || want > cap || !(pcs = this_pcs(cls, &cpu, &node)))
		return slab_alloc_bulk(cls, want, want, objs, 0);
	if (unlikely(!pcpm_trylock(&pcs->lock))) {
		/* another thread of this CPU slot holds it: a neighbour's sheaves, else the
		 * slabs serve */
		pcs_cpu(pcs, cls)->lock_contended++;
		if (!(pcs = pcs_trylock_near(cls, &cpu, node)))
			return slab_alloc_bulk(cls, want, want, objs, 0);
	}
	pcs->ops++;
	/* main's objects first, even fewer than asked for (the thread cache takes what comes);
	 * an empty main is swapped with the spare, else filled from the inbox (this CPU's
	 * objects that came home), else exchanged with the barn for a full sheaf, else filled
	 * from the slabs */
	struct slab_sheaf *m = pcs->main;
	if (!m->size && pcs->spare->size) {
		pcs->main = pcs->spare;
		pcs->spare = m;
		m = pcs->main;
	} else if (!m->size && (pcs->home || atomic_load_explicit(&pcs_cpu(pcs, cls)->inbox[cls],
								 memory_order_relaxed))) {
		__home_fill(pcs, cls, node);
	} else if (!m->size && depot_fill(node, cls, m)) {
		/* a chain of the node's depot: other CPUs' surplus, before the barn's lock */
	} else if (!m->size) {
		/* one sheaf for one: the CPU keeps an empty and a full one, the middle of its
		 * window; two when its last exchange was an allocation too (a producer, which
		 * meets the barn half as often so) */
		struct slab_sheaf *x[2] = { m, pcs->spare };
		bool producer = pcs->last_dir == SHEAF_ALLOC;
		unsigned k = producer ? 2 : 1;
		pcs->last_dir = SHEAF_ALLOC;
		pcs_cpu(pcs, cls)->refills++;
		k = barn_replace_empty(node, cls, x, k);
		if (k) {
			pcs->main = m = x[0];
			pcs->spare = x[1];
		} else {
			/* new objects from the CPU's own slabs, just what is asked for (no lock,
			 * nothing carved that no thread uses); when those are used up and the
			 * cache has partial slabs, up to a quarter of a sheaf from them: a full
			 * one would take a megabyte for each class a thread touches, where a
			 * thread-local mix needs a few; full sheaves come from the barn */
			unsigned q = MAX(want, (cap + 3) / 4);
			m->size = cpu_slab_alloc(&pcs->cslab, cls, want, m->objects, cap, q, cpu + 1);
			if (m->size < want)
				m->size += slab_alloc_bulk(cls, q - m->size,
							   producer_max(cls, producer, q) - m->size,
							   &m->objects[m->size], cpu + 1);
		}
	}
	unsigned got = MIN(want, m->size);
	m->size -= got;
	memcpy(objs, &m->objects[m->size], got * sizeof(void *));
	depot_trim(node, cls, m); /* (a home fill or a barn's sheaf may leave a surplus) */
	pcs_note_low(pcs);
	pcpm_unlock(&pcs->lock);
	return got;
}

void sheaf_free_bulk(unsigned cls, void **objs, unsigned n)
{
	unsigned cap = pcpm_sheaf_cap[cls], cpu;
	int node;
	struct sheaf_pcs *pcs;
	if (!cap || n > cap || !(pcs = this_pcs(cls, &cpu, &node)))
		return slab_free_bulk(cls, objs, n);
	n = send_home(cls, cpu, objs, n); /* other CPUs' objects to their inboxes */
	if (!n)
		return;
	if (unlikely(!pcpm_trylock(&pcs->lock))) {
		pcs_cpu(pcs, cls)->lock_contended++;
		if (!(pcs = pcs_trylock_near(cls, &cpu, node)))
			return slab_free_bulk(cls, objs, n);
	}
	pcs->ops++;
	struct slab_sheaf *m = pcs->main;
	if (m->size + n > cap) {
		if (pcs->spare->size + n <= cap && pcs->spare->size < m->size) {
			pcs->main = pcs->spare;
			pcs->spare = m;
		} else {
			/* one for one, or two when the last exchange was a free too (a consumer) */
			struct slab_sheaf *x[2] = { m, pcs->spare };
			unsigned k = pcs->last_dir == SHEAF_FREE && pcs->spare->size ? 2 : 1;
			pcs->last_dir = SHEAF_FREE;
			pcs_cpu(pcs, cls)->flushes++;
			if (barn_replace_full(node, cls, x, k)) {
				pcs->main = x[0];
				pcs->spare = x[1];
			} else {
				/* the barn is at its limit: main's objects go to the slabs, with the
				 * sheaf lock held (the lock order allows it).  (Swapping in a new
				 * sheaf to flush the old one after the unlock grew the sheaves
				 * without bound: one new sheaf per flush, an arena lock each.) */
				slab_free_bulk(cls, m->objects, m->size);
				m->size = 0;
			}
		}
		m = pcs->main;
	}
	memcpy(&m->objects[m->size], objs, n * sizeof(void *));
	m->size += n;
	depot_trim(node, cls, m);
	pcpm_unlock(&pcs->lock);
}

/*
 * The oldest objects of a CPU's sheaves (the spare's, then the bottom of main's) to the
 * slabs: all of them (a flush, or a decay of sheaves no thread used through the period,
 * with the objects that came home), or, from sheaves in use, those that stayed through the
 * period but at most 1/PCPMALLOC_COUNT_MIN_DIV of what they hold (decay_pcp_high's
 * count_min variant: min(count_min, high / div); giving back all of them made a busy
 * churn at 224 CPUs return its whole working set every second, a kmem_cache lock per four
 * slabs, and take it back).  Decay: trylock, a CPU whose lock is taken is busy.  Freed
 * with the sheaf lock held (the lock order allows it; these are rare, and the CPU's
 * threads meanwhile use the slabs).
 */
static void pcs_release(struct sheaf_pcs *pcs, unsigned cls, bool all)
{
	if (!__atomic_load_n(&pcs->spare, __ATOMIC_ACQUIRE))
		return;
	if (all ? (pcpm_lock(&pcs->lock), false) : !pcpm_trylock(&pcs->lock))
		return;
	bool idle = all || !pcs->ops;
	pcs->ops = 0;
	if (idle)
		__home_release(pcs, cls); /* objects that came home meanwhile: idle too */
	cpu_slab_release(&pcs->cslab, cls, idle); /* busy: the slabs carved to the end */
	struct slab_sheaf *m = pcs->main, *s = pcs->spare;
	unsigned held = m->size + s->size;
	unsigned n = idle ? held : MIN(pcs->low, held / (unsigned)pcpm_cfg.count_min_div);
	unsigned from_spare = MIN(n, s->size), from_main = n - from_spare;
	s->size -= from_spare;
	if (from_spare)
		slab_free_bulk(cls, &s->objects[s->size], from_spare);
	if (from_main) {
		slab_free_bulk(cls, m->objects, from_main);
		memmove(m->objects, &m->objects[from_main], (m->size - from_main) * sizeof(void *));
		m->size -= from_main;
	}
	pcs->low = m->size + s->size;
	pcpm_unlock(&pcs->lock);
	if (!all)
		__atomic_fetch_add(&decayed, n, __ATOMIC_RELAXED);
}

static void sheaf_release_all(bool all)
{
	for (int i = 0; i < pcpm_nr_cpus; i++) {
		struct sheaf_cpu *sc = cpu_sheaf(i);
		for (unsigned c = 0; sc && c < NR_SIZE_CLASSES; c++)
			pcs_release(&sc->pcs[c], c, all);
	}
	uint64_t freed = barn_release_all(all) + depot_release_all(all);
	if (!all)
		__atomic_fetch_add(&decayed, freed, __ATOMIC_RELAXED);
}

void sheaf_flush_all(void)
{
	sheaf_release_all(true);
}

void sheaf_decay(uint64_t now_ms)
{
	if (!cpu_sheaves || !pcpm_trylock(&decay_lock))
		return; /* no sheaves yet, or another thread decays them now */
	bool due = now_ms - decay_last_ms >= (uint64_t)pcpm_cfg.decay_ms;
	if (due)
		decay_last_ms = now_ms;
	pcpm_unlock(&decay_lock);
	if (due)
		sheaf_release_all(false);
}

bool sheaf_pending(void)
{
	for (int i = 0; cpu_sheaves && i < pcpm_nr_cpus; i++) {
		struct sheaf_cpu *sc = cpu_sheaf(i);
		for (unsigned c = 0; sc && c < NR_SIZE_CLASSES; c++) {
			struct slab_sheaf *m, *s;
			/* racy: a sheaf's size is read while its CPU may change it */
			if (atomic_load_explicit(&sc->inbox[c], memory_order_relaxed) ||
			    __atomic_load_n(&sc->pcs[c].home, __ATOMIC_RELAXED) ||
			    __atomic_load_n(&sc->pcs[c].cslab.left, __ATOMIC_RELAXED) ||
			    __atomic_load_n(&sc->pcs[c].cslab.ndone, __ATOMIC_RELAXED))
				return true;
			if ((s = __atomic_load_n(&sc->pcs[c].spare, __ATOMIC_ACQUIRE)) &&
			    (m = __atomic_load_n(&sc->pcs[c].main, __ATOMIC_RELAXED)) &&
			    (__atomic_load_n(&m->size, __ATOMIC_RELAXED) ||
			     __atomic_load_n(&s->size, __ATOMIC_RELAXED)))
				return true;
		}
	}
	return barn_pending() || depot_pending();
}

static bool sheaf_has(const struct slab_sheaf *s, const void *p)
{
	for (uint32_t i = 0; s && i < s->size; i++)
		if (s->objects[i] == p)
			return true;
	return false;
}

bool sheaf_holds(unsigned cls, const void *p)
{
	bool found = false;
	for (int i = 0; i < pcpm_nr_cpus && !found; i++) {
		struct sheaf_cpu *sc = cpu_sheaf(i);
		if (!sc)
			continue;
		struct sheaf_pcs *pcs = &sc->pcs[cls];
		pcpm_lock(&pcs->lock);
		found = sheaf_has(pcs->main, p) || sheaf_has(pcs->spare, p);
		/* the home chain, and the inbox: stable below its head while the lock keeps its
		 * owner from taking it; pushes only add in front */
		for (void *o = pcs->home; o && !found; o = depot_next(o, cls))
			found = o == p;
		for (void *o = atomic_load_explicit(&sc->inbox[cls], memory_order_acquire);
		     o && !found; o = depot_next(o, cls))
			found = o == p;
		pcpm_unlock(&pcs->lock);
	}
	return found || barn_holds(cls, p) || depot_holds(cls, p);
}

size_t sheaf_cached_bytes(bool nowait)
{
	size_t bytes = 0;
	for (int i = 0; i < pcpm_nr_cpus; i++) {
		struct sheaf_cpu *sc = cpu_sheaf(i);
		for (unsigned c = 0; sc && c < NR_SIZE_CLASSES; c++) {
			struct sheaf_pcs *pcs = &sc->pcs[c];
			/* racy reads of another CPU's sheaves: they are never freed and a count
			 * is one word, so a snapshot off by what moved meanwhile, never a bad
			 * read (main and spare are set together at the slot's set-up) */
			struct slab_sheaf *m = __atomic_load_n(&pcs->main, __ATOMIC_RELAXED);
			struct slab_sheaf *sp = __atomic_load_n(&pcs->spare, __ATOMIC_RELAXED);
			size_t n = (m ? MIN(__atomic_load_n(&m->size, __ATOMIC_RELAXED),
					    pcpm_sheaf_cap[c])
				      : 0) +
				   (sp ? MIN(__atomic_load_n(&sp->size, __ATOMIC_RELAXED),
					     pcpm_sheaf_cap[c])
				       : 0) +
				   __atomic_load_n(&pcs->home_n, __ATOMIC_RELAXED) +
				   __atomic_load_n(&pcs->cslab.left, __ATOMIC_RELAXED) +
				   atomic_load_explicit(&sc->inbox_n[c], memory_order_relaxed);
			bytes += n * pcpm_class_size[c];
		}
	}
	return bytes + barn_cached_bytes(nowait) + depot_cached_bytes();
}

void sheaf_stats_add(struct pcpm_stats *s)
{
	for (int i = 0; i < pcpm_nr_cpus; i++) {
		struct sheaf_cpu *sc = cpu_sheaf(i);
		if (sc) {
			s->sheaf_refills += sc->refills;
			s->sheaf_flushes += sc->flushes;
			s->sheaf_lock_contended += sc->lock_contended;
			s->sheaf_remote_frees += sc->remote_frees;
			s->sheaf_inbox_drains += sc->inbox_drains;
			for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
				/* racy reads, as sheaf_cached_bytes' */
				struct sheaf_pcs *pcs = &sc->pcs[c];
				struct slab_sheaf *m = __atomic_load_n(&pcs->main, __ATOMIC_RELAXED);
				struct slab_sheaf *sp = __atomic_load_n(&pcs->spare, __ATOMIC_RELAXED);
				size_t size = pcpm_class_size[c], cap = pcpm_sheaf_cap[c];
				size_t on = (m ? MIN(__atomic_load_n(&m->size, __ATOMIC_RELAXED), cap) : 0) +
					    (sp ? MIN(__atomic_load_n(&sp->size, __ATOMIC_RELAXED), cap) : 0);
				s->sheaf_bytes += on * size;
				s->sheaf_home_bytes +=
					((size_t)__atomic_load_n(&pcs->home_n, __ATOMIC_RELAXED) +
					 atomic_load_explicit(&sc->inbox_n[c], memory_order_relaxed)) * size;
				s->cpu_slab_bytes +=
					(size_t)__atomic_load_n(&pcs->cslab.left, __ATOMIC_RELAXED) * size;
			}
		}
	}
	s->barn_bytes += barn_cached_bytes(pcpm_nested());
	s->depot_bytes += depot_cached_bytes();
	s->sheaf_decayed += __atomic_load_n(&decayed, __ATOMIC_RELAXED);
	barn_stats_add(s);
}

/* fork: setup_lock and decay_lock first (their holders take no other lock of this file
 * while they hold them; setup_lock keeps the set of CPU sheaves fixed), then every sheaf
 * lock, then the barns' (barn.c). */
static void lock_op(pcpm_lock_t *l, int op)
{
	if (op == 0)
		pcpm_lock(l);
	else if (op == 1)
		pcpm_unlock(l);
	else
		pcpm_lock_reset(l);
}

static void sheaf_locks(int op)
{
	if (op == 0) {
		pcpm_lock(&setup_lock);
		pcpm_lock(&decay_lock);
	}
	for (int i = 0; i < pcpm_nr_cpus; i++) {
		struct sheaf_cpu *sc = cpu_sheaf(i);
		for (unsigned c = 0; sc && c < NR_SIZE_CLASSES; c++)
			lock_op(&sc->pcs[c].lock, op);
		if (sc)
			lock_op(&sc->stock_lock, op);
	}
	if (op == 0)
		barn_lock_all();
	else if (op == 1)
		barn_unlock_all();
	else
		barn_reset_locks();
	if (op != 0) {
		lock_op(&decay_lock, op);
		lock_op(&setup_lock, op);
	}
}

void sheaf_lock_all(void)
{
	sheaf_locks(0);
}

void sheaf_unlock_all(void)
{
	sheaf_locks(1);
}

void sheaf_reset_locks(void)
{
	sheaf_locks(2);
}
