/*
 * sheaf.c - the per-CPU level of the slab layer (see sheaf.h; Linux 6.18's
 * slub_percpu_sheaves and node_barn, kernel-pcp.md §7.2, §12.6).  Calls slab (the kmem_cache
 * level below), pcp (the current CPU and its node) and arena (metadata).
 *
 * Per CPU slot and class a `main` and a `spare` sheaf under the slot's own lock (a trylock,
 * as the pcp's: per CPU, not process-wide); per NUMA node and class a barn of up to
 * BARN_MAX_FULL full sheaves under a small lock.  A CPU whose main sheaf runs short swaps in
 * its spare, then takes a full sheaf from its node's barn (then the other nodes', in zonelist
 * order), then fills one from the slabs in one kmem_cache lock hold; a main sheaf that
 * overflows becomes the spare, else goes whole to the barn, else (barn full) back to the
 * slabs.  A barn exchange moves one list head, so its hold is O(1) whatever the sheaf's size:
 * a producer/consumer pair meets a process-wide lock about once per sheaf on each side.
 *
 * pcpmalloc's free lists run through the objects (safe-linked, slab.h), so a sheaf is a list
 * head and a count, not an array, and nothing is allocated on these paths.  Every list here
 * is NULL-terminated and every object on it carries pcpm_free_key's mark in its second word,
 * as on a thread cache's stack.  Lock order: sheaf lock, barn lock, kmem_cache lock (then the
 * pcp and zone locks the slab level takes).  setup_lock is never taken under a sheaf lock.
 */
#include "sheaf.h"
#include "topology.h"

/* Per CPU slot and class (slub_percpu_sheaves): only threads on that CPU take the lock. */
struct sheaf_pcs {
	pcpm_lock_t lock;
	uint32_t main_count, spare_count;
	void *main, *spare;
} __attribute__((aligned(32)));

/* One CPU slot's sheaves of every class, set up by the first thread that needs them on that
 * CPU: on a machine of several nodes in pages of their own, first touched there, so they
 * come from the CPU's node (the kernel allocates per-CPU data on the CPU's node). */
struct sheaf_cpu {
	struct sheaf_pcs pcs[NR_SIZE_CLASSES];
	/* counters of this CPU, written by its threads under the class's sheaf lock (racy
	 * increments between two threads of one slot are possible and harmless) */
	uint64_t refills, flushes, lock_contended;
};

#define SHEAF_MIN_CPUS 4 /* no sheaves on machines of this many CPUs or fewer */
#define BARN_MAX_FULL 10	  /* MAX_FULL_SHEAVES */
#define BARN_BYTES (16UL << 20) /* objects a barn may hold */

/* Per node and class (node_barn): full sheaves only (a list needs no empty sheaf). */
struct node_barn {
	pcpm_lock_t lock;
	uint32_t nr_full;
	struct lock_stat ls;
	void *full[BARN_MAX_FULL];
	uint32_t full_count[BARN_MAX_FULL];
} PCPM_CACHELINE_ALIGNED;

uint16_t pcpm_sheaf_cap[NR_SIZE_CLASSES] PCPM_READ_MOSTLY;
uint32_t pcpm_paged_max PCPM_READ_MOSTLY = SLAB_PAGED_MAX - SLAB_PAGED_STEP;
static uint8_t barn_max[NR_SIZE_CLASSES] PCPM_READ_MOSTLY;
static _Atomic(struct sheaf_cpu *) *cpu_sheaves PCPM_READ_MOSTLY; /* pcpm_nr_cpus slots */
static _Atomic(struct node_barn *) barns[MAX_NUMNODES][NR_SIZE_CLASSES];
static pcpm_lock_t setup_lock PCPM_HOT = PCPM_LOCK_INIT;

/*
 * Objects per sheaf.  The kernel's calculate_sheaf_capacity gives 60 / 26 / 12 / 4 objects
 * (below 256 B, 1 KiB, 4 KiB, above), which on a many-CPU machine would make a
 * producer/consumer pair of 8-32 KiB objects meet the barn every 4 objects.  Here a sheaf
 * holds SHEAF_BYTES of objects, never fewer than the kernel's count nor more than 64 (128
 * above 64 CPUs), with SHEAF_BYTES growing with the CPUs as the pagevec does (15, then 31
 * above 64 CPUs) and calculate_order's min_objects: 16 KiB per CPU from 32 KiB to 1 MiB (64
 * CPUs and more).  Lock pressure grows with the CPUs, and so does a machine's memory; up to
 * SHEAF_MIN_CPUS there are none.  A pair then meets a
 * process-wide lock about 1000 / capacity times per 1000 calls.
 */
static unsigned sheaf_capacity(uint32_t size)
{
	size_t kernel = size >= 4096 ? 4 : size >= 1024 ? 12 : size >= 256 ? 26 : 60;
	size_t bytes = MIN(MAX((size_t)pcpm_nr_cpus << 14, (size_t)32 << 10), (size_t)1 << 20);
	size_t max = pcpm_nr_cpus > 64 ? 128 : 64;
	/* none on a machine of a few CPUs: there its few CPUs cannot saturate a kmem_cache
	 * lock taken once per thread-cache batch (bench/scale.sh, 2 CPUs), and the sheaves
	 * would hold memory (wl-churn's peak RSS +8 %, xthread-large's +20 % on 2 CPUs) */
	if (pcpm_nr_cpus <= SHEAF_MIN_CPUS)
		return 0;
	return (unsigned)MIN(MAX(bytes / size, kernel), max);
}

void pcpm_sheaf_init(bool on)
{
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		pcpm_sheaf_cap[c] = on ? (uint16_t)sheaf_capacity(pcpm_class_size[c]) : 0;
		/* a barn is shared by a node's CPUs: the kernel's 10 sheaves, but at most
		 * BARN_BYTES of objects (2 sheaves at least), and 2 on a machine of a few CPUs,
		 * where the sheaves of two CPUs already cover what the barn would hold */
		size_t sheaf = (size_t)pcpm_sheaf_cap[c] * pcpm_class_size[c];
		size_t m = sheaf ? BARN_BYTES / sheaf : BARN_MAX_FULL;
		barn_max[c] = (uint8_t)(pcpm_nr_cpus > 4 ? MIN(MAX(m, 2), BARN_MAX_FULL) : 2);
	}
	pcpm_paged_max = pcpm_sheaf_cap[NR_SIZE_CLASSES - 1] ? SLAB_PAGED_MAX
							     : SLAB_PAGED_MAX - SLAB_PAGED_STEP;
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
		if (sc)
			atomic_store_explicit(&cpu_sheaves[cpu], sc, memory_order_release);
	}
	pcpm_unlock(&setup_lock);
	return sc;
}

static inline struct node_barn *barn_of(int node, unsigned cls)
{
	return atomic_load_explicit(&barns[node][cls], memory_order_acquire);
}

static PCPM_COLD void barn_setup(int node, unsigned cls)
{
	pcpm_lock(&setup_lock);
	struct node_barn *b = atomic_load_explicit(&barns[node][cls], memory_order_relaxed);
	if (!b && (b = pcpm_meta_alloc(sizeof(*b))))
		atomic_store_explicit(&barns[node][cls], b, memory_order_release);
	pcpm_unlock(&setup_lock);
}

/*
 * The calling thread's CPU's sheaves of class cls, and its slot and node; NULL when they
 * cannot be set up (out of memory).  The node's barn of the class is set up here too, before
 * any sheaf lock is taken.
 */
static inline struct sheaf_pcs *this_pcs(unsigned cls, unsigned *cpu, int *node)
{
	*cpu = pcp_cpu();
	*node = pcp_cpu_node(*cpu);
	struct sheaf_cpu *sc = NULL;
	if (likely(cpu_sheaves))
		sc = atomic_load_explicit(&cpu_sheaves[*cpu], memory_order_acquire);
	if (unlikely(!sc) && !(sc = sheaf_cpu_setup(*cpu)))
		return NULL;
	if (unlikely(!barn_of(*node, cls)))
		barn_setup(*node, cls);
	return &sc->pcs[cls];
}

static inline struct sheaf_cpu *pcs_cpu(struct sheaf_pcs *pcs, unsigned cls)
{
	return (struct sheaf_cpu *)(pcs - cls);
}

/*
 * barn_put_full_sheaf(): puts n full sheaves (1 or 2: main, and a full spare with it) in one
 * hold into the node's barn, else into another node's in zonelist order (a producer on the
 * other node takes them there: the slabs are shared by all nodes anyway); false when no barn
 * has room for them (the caller frees them to the slabs).  Full barns are passed unlocked.
 */
static bool barn_put(int node, unsigned cls, void *const *list, const unsigned *cnt, unsigned n)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int i = 0; i < nr; i++) {
		struct node_barn *b = barn_of((node + i) % nr, cls);
		/* (a racy look first: a full barn costs no lock) */
		if (!b || __atomic_load_n(&b->nr_full, __ATOMIC_RELAXED) + n > barn_max[cls])
			continue;
		lockstat_lock(&b->lock, &b->ls);
		bool ok = b->nr_full + n <= barn_max[cls];
		for (unsigned k = 0; ok && k < n; k++) {
			b->full[b->nr_full] = list[k];
			b->full_count[b->nr_full] = cnt[k];
			__atomic_store_n(&b->nr_full, b->nr_full + 1, __ATOMIC_RELAXED);
		}
		lockstat_unlock(&b->lock, &b->ls);
		if (ok)
			return true;
	}
	return false;
}

/*
 * barn_get_full_sheaf(): up to max (1 or 2) full sheaves in one hold from the node's barn,
 * else from the other nodes' in zonelist order; how many (0: every barn is empty; empty
 * barns are passed over unlocked).
 */
static unsigned barn_take(int node, unsigned cls, void **list, unsigned *cnt, unsigned max)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int i = 0; i < nr; i++) {
		struct node_barn *b = barn_of((node + i) % nr, cls);
		if (!b || !__atomic_load_n(&b->nr_full, __ATOMIC_RELAXED))
			continue;
		unsigned got = 0;
		lockstat_lock(&b->lock, &b->ls);
		while (got < max && b->nr_full) {
			uint32_t k = b->nr_full - 1;
			list[got] = b->full[k];
			cnt[got++] = b->full_count[k];
			__atomic_store_n(&b->nr_full, k, __ATOMIC_RELAXED);
		}
		lockstat_unlock(&b->lock, &b->ls);
		if (got)
			return got;
	}
	return 0;
}

/* The n-th object of list (n >= 1), each link decoded and checked on the way. */
static inline void *list_nth(void *list, unsigned n, const char *call)
{
	void *o = list;
	while (--n)
		o = fl_decode(o, call);
	return o;
}

/* Main holds want objects fewer than asked for: the spare, else a barn's full sheaf, else
 * the slabs (in one kmem_cache lock hold) go behind main's objects.  pcs lock held. */
static void sheaf_refill_main(struct sheaf_pcs *pcs, unsigned cls, int node, unsigned want)
{
	void *list[2];
	unsigned cnt[2], n;
	if (pcs->spare_count) {
		list[0] = pcs->spare;
		n = pcs->spare_count;
		pcs->spare = NULL;
		pcs->spare_count = 0;
	} else {
		pcs_cpu(pcs, cls)->refills++;
		/* two full sheaves when the barn has them: one for main, one for the spare, so a
		 * CPU that only allocates (a producer) meets the barn once per two sheaves */
		unsigned got = barn_take(node, cls, list, cnt, 2);
		if (got == 2) {
			pcs->spare = list[1];
			pcs->spare_count = cnt[1];
		}
		n = got ? cnt[0] : 0;
		/* from the slabs, a quarter of a sheaf (at least what is asked for): a full one
		 * would carve a megabyte of new objects for each class a thread touches, where a
		 * thread-local mix needs a few; full sheaves come from the barn */
		if (!n)
			n = slab_alloc_bulk(cls, MAX(want, ((unsigned)pcpm_sheaf_cap[cls] + 3) / 4),
					    &list[0], pcpm_free_key);
		if (!n)
			return; /* out of memory: the caller hands out what main has */
	}
	if (pcs->main_count)
		fl_store(list_nth(pcs->main, pcs->main_count, "malloc"), list[0]);
	else
		pcs->main = list[0];
	pcs->main_count += n;
}

unsigned sheaf_alloc_bulk(unsigned cls, unsigned want, void **head, uintptr_t key)
{
	unsigned cap = pcpm_sheaf_cap[cls], cpu;
	int node;
	struct sheaf_pcs *pcs;
	if (!cap || want > cap || !(pcs = this_pcs(cls, &cpu, &node)))
		return slab_alloc_bulk(cls, want, head, key);
	if (unlikely(!pcpm_trylock(&pcs->lock))) {
		/* another thread of this CPU slot holds it (preempted there, or the thread-id
		 * hash put two threads on one slot): the slabs serve, as the zone serves a pcp
		 * trylock failure */
		pcs_cpu(pcs, cls)->lock_contended++;
		return slab_alloc_bulk(cls, want, head, key);
	}
	if (pcs->main_count < want)
		sheaf_refill_main(pcs, cls, node, want - pcs->main_count);
	unsigned got = MIN(want, pcs->main_count);
	void *first = pcs->main;
	if (got) {
		void *last = list_nth(first, got, "malloc");
		pcs->main = fl_decode(last, "malloc");
		fl_store(last, NULL);
		pcs->main_count -= got;
	}
	pcpm_unlock(&pcs->lock);
	if (unlikely(key != pcpm_free_key))
		for (void *o = got ? first : NULL; o; o = fl_decode(o, "malloc"))
			((uintptr_t *)o)[1] = key;
	*head = got ? first : NULL;
	return got;
}

void sheaf_free_bulk(unsigned cls, void *head, unsigned n)
{
	unsigned cap = pcpm_sheaf_cap[cls], cpu;
	int node;
	struct sheaf_pcs *pcs;
	if (!cap || n > cap || !(pcs = this_pcs(cls, &cpu, &node)))
		return slab_free_bulk(cls, head, n);
	/* each object is one of this class's, as the slab level checks when they reach it */
	void *tail = head;
	for (unsigned i = 1;; i++) {
		struct page *pg = pcpm_page_of(tail);
		if (unlikely(!pg || pg->state != PG_SLAB || pg->cls != cls))
			pcpm_freelist_corrupt("free", tail);
		if (i == n)
			break;
		tail = fl_decode(tail, "free");
	}
	if (unlikely(!pcpm_trylock(&pcs->lock))) {
		pcs_cpu(pcs, cls)->lock_contended++;
		return slab_free_bulk(cls, head, n);
	}
	void *full[2];
	unsigned full_n[2], nfull = 0;
	if (pcs->main_count + n > cap) {
		if (!pcs->spare_count) {
			pcs->spare = pcs->main;
			pcs->spare_count = pcs->main_count;
		} else {
			/* main and spare both full: both to the barn in one hold (a CPU that only
			 * frees - a consumer - meets the barn once per two sheaves) */
			pcs_cpu(pcs, cls)->flushes++;
			full[nfull] = pcs->main;
			full_n[nfull++] = pcs->main_count;
			if (pcs->spare_count + n > cap) {
				full[nfull] = pcs->spare;
				full_n[nfull++] = pcs->spare_count;
				pcs->spare = NULL;
				pcs->spare_count = 0;
			}
			if (barn_put(node, cls, full, full_n, nfull))
				nfull = 0;
		}
		pcs->main = NULL;
		pcs->main_count = 0;
	}
	fl_store(tail, pcs->main);
	pcs->main = head;
	pcs->main_count += n;
	pcpm_unlock(&pcs->lock);
	for (unsigned i = 0; i < nfull; i++) /* the barn was full: to the slabs */
		slab_free_bulk(cls, full[i], full_n[i]);
}

static inline struct sheaf_cpu *cpu_sheaf(int cpu)
{
	return cpu_sheaves ? atomic_load_explicit(&cpu_sheaves[cpu], memory_order_acquire) : NULL;
}

void sheaf_flush_all(void)
{
	for (int i = 0; i < pcpm_nr_cpus; i++) {
		struct sheaf_cpu *sc = cpu_sheaf(i);
		for (unsigned c = 0; sc && c < NR_SIZE_CLASSES; c++) {
			struct sheaf_pcs *pcs = &sc->pcs[c];
			if (!__atomic_load_n(&pcs->main, __ATOMIC_RELAXED) &&
			    !__atomic_load_n(&pcs->spare, __ATOMIC_RELAXED))
				continue;
			pcpm_lock(&pcs->lock);
			void *m = pcs->main, *s = pcs->spare;
			unsigned mn = pcs->main_count, sn = pcs->spare_count;
			pcs->main = pcs->spare = NULL;
			pcs->main_count = pcs->spare_count = 0;
			pcpm_unlock(&pcs->lock);
			if (mn)
				slab_free_bulk(c, m, mn);
			if (sn)
				slab_free_bulk(c, s, sn);
		}
	}
	for (int n = 0; n < MAX_NUMNODES; n++) {
		for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
			void *list;
			unsigned cnt;
			while (barn_take(n, c, &list, &cnt, 1))
				slab_free_bulk(c, list, cnt);
		}
	}
}

static bool list_holds(void *list, const void *p)
{
	for (void *o = list; o; o = fl_decode(o, "free"))
		if (o == p)
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
		found = list_holds(pcs->main, p) || list_holds(pcs->spare, p);
		pcpm_unlock(&pcs->lock);
	}
	for (int n = 0; n < MAX_NUMNODES && !found; n++) {
		struct node_barn *b = barn_of(n, cls);
		if (!b)
			continue;
		pcpm_lock(&b->lock);
		for (uint32_t k = 0; k < b->nr_full && !found; k++)
			found = list_holds(b->full[k], p);
		pcpm_unlock(&b->lock);
	}
	return found;
}

void sheaf_stats_add(struct pcpm_stats *s)
{
	for (int i = 0; i < pcpm_nr_cpus; i++) {
		struct sheaf_cpu *sc = cpu_sheaf(i);
		if (sc) {
			s->sheaf_refills += sc->refills;
			s->sheaf_flushes += sc->flushes;
			s->sheaf_lock_contended += sc->lock_contended;
		}
	}
	struct lock_sum ls = { 0 };
	for (int n = 0; n < MAX_NUMNODES; n++)
		for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
			if (barn_of(n, c))
				lock_sum_add(&ls, &barn_of(n, c)->ls);
	s->barn_lock += ls.acquired;
	s->barn_lock_contended += ls.contended;
	s->barn_lock_wait_ns += ls.wait_ns;
	s->barn_lock_hold_ns += lock_sum_hold_ns(&ls);
	s->barn_lock_busiest += ls.busiest;
}

/* fork: setup_lock first (its holders take no other lock of this file; holding it keeps the
 * set of CPU sheaves and barns fixed), then every sheaf lock, then the barns'. */
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
	if (op == 0)
		pcpm_lock(&setup_lock);
	for (int i = 0; i < pcpm_nr_cpus; i++) {
		struct sheaf_cpu *sc = cpu_sheaf(i);
		for (unsigned c = 0; sc && c < NR_SIZE_CLASSES; c++)
			lock_op(&sc->pcs[c].lock, op);
	}
	for (int n = 0; n < MAX_NUMNODES; n++)
		for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
			if (barn_of(n, c))
				lock_op(&barn_of(n, c)->lock, op);
	if (op != 0)
		lock_op(&setup_lock, op);
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
