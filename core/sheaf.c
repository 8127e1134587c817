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
#include "remote.h"
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
	/* remote frees: outbound sheaves to other CPUs, sheaves that came home (remote.c) */
	struct remote_pcs remote;
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
	uint64_t refills, flushes, lock_contended, inbox_drains;
	/* sheaves of this CPU's slabs' objects (slab_owner) that other CPUs freed, and empty
	 * sheaves given back, per class (remote.c).  On lines of their own: other CPUs write
	 * them. */
	struct remote_box box[NR_SIZE_CLASSES] PCPM_CACHELINE_ALIGNED;
	/* metadata this slot's sheaves are carved from (stock_take), under stock_lock */
	pcpm_lock_t stock_lock PCPM_CACHELINE_ALIGNED;
	char *stock, *stock_end;
};

/* Sheaf metadata a CPU slot takes at once: a CPU's first use of a class needs two sheaves
 * (up to 2 KiB), and taking each pair from the arena was one process-wide meta_lock hold per
 * class and CPU (544 of churn 4-16 KiB's 687 arena acquisitions at 224 CPUs). */
#define SHEAF_STOCK (32UL << 10)


uint32_t pcpm_paged_max PCPM_READ_MOSTLY = SLAB_PAGED_MAX - SLAB_PAGED_STEP;
static _Atomic(struct sheaf_cpu *) *cpu_sheaves PCPM_READ_MOSTLY; /* pcpm_nr_cpus slots */
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
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
		pcpm_sheaf_cap[c] = on ? (uint16_t)sheaf_capacity(pcpm_class_size[c]) : 0;
	pcpm_remote_init();
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
		if (sc && (!depot_setup(pcp_cpu_node(cpu)) || !remote_register(cpu, sc->box)))
			sc = NULL; /* (a slot's sheaves are never freed: a few bytes lost) */
		if (sc)
			atomic_store_explicit(&cpu_sheaves[cpu], sc, memory_order_release);
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
	} else if (!m->size && remote_has_home(&pcs->remote, &pcs_cpu(pcs, cls)->box[cls]) &&
		   remote_fill(&pcs->remote, &pcs_cpu(pcs, cls)->box[cls], cls, &pcs->main)) {
		m = pcs->main;
		pcs_cpu(pcs, cls)->inbox_drains++;
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
	if (unlikely(!pcpm_trylock(&pcs->lock))) {
		pcs_cpu(pcs, cls)->lock_contended++;
		if (!(pcs = pcs_trylock_near(cls, &cpu, node)))
			return slab_free_bulk(cls, objs, n);
	}
	n = remote_send(&pcs->remote, cls, cpu, objs, n); /* other CPUs' objects */
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
	if (idle) /* objects that came home or wait to go: idle too */
		remote_release(&pcs->remote, &pcs_cpu(pcs, cls)->box[cls], cls);
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
			if (remote_objects(&sc->pcs[c].remote, &sc->box[c], c) ||
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
		found = found || remote_holds(&pcs->remote, &sc->box[cls], p);
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
				   remote_objects(&pcs->remote, &sc->box[c], c) +
				   __atomic_load_n(&pcs->cslab.left, __ATOMIC_RELAXED);
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
				s->sheaf_home_bytes += remote_objects(&pcs->remote, &sc->box[c], c) * size;
				s->sheaf_remote_frees += __atomic_load_n(&pcs->remote.sent, __ATOMIC_RELAXED);
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
