/*
 * barn.c - the node barns (see barn.h; Linux 6.18's node_barn, barn_replace_empty_sheaf and
 * barn_replace_full_sheaf).  Calls slab (full sheaves flushed), arena (metadata) and pcp
 * (the number of zones).  Lock order: a CPU's sheaf lock (sheaf.c), then a barn lock, then
 * a kmem_cache lock; setup_lock is taken under none of them.
 */
#include "barn.h"
#include "topology.h"

#define BARN_MAX_FULL 10	  /* MAX_FULL_SHEAVES */
#define BARN_BYTES (16UL << 20) /* objects a barn may hold */

/* Per node and class (node_barn): lists of full and of empty sheaves. */
struct node_barn {
	pcpm_lock_t lock;
	uint32_t nr_full, nr_empty;
	uint32_t low_full; /* the fewest full sheaves since the last decay */
	struct slab_sheaf *full, *empty;
	struct lock_stat ls;
} PCPM_CACHELINE_ALIGNED;

uint16_t pcpm_sheaf_cap[NR_SIZE_CLASSES] PCPM_READ_MOSTLY;
static uint8_t barn_max[NR_SIZE_CLASSES] PCPM_READ_MOSTLY;
static _Atomic(struct node_barn *) barns[MAX_NUMNODES][NR_SIZE_CLASSES];
static pcpm_lock_t setup_lock = PCPM_LOCK_INIT;

void pcpm_barn_init(void)
{
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		/* a barn is shared by a node's CPUs: the kernel's 10 sheaves, but at most
		 * BARN_BYTES of objects (2 sheaves at least), and 2 on a machine of a few CPUs,
		 * where the sheaves of two CPUs already cover what the barn would hold */
		size_t sheaf = (size_t)pcpm_sheaf_cap[c] * pcpm_class_size[c];
		size_t m = sheaf ? BARN_BYTES / sheaf : BARN_MAX_FULL;
		barn_max[c] = (uint8_t)(pcpm_nr_cpus > 4 ? MIN(MAX(m, 2), BARN_MAX_FULL) : 2);
	}
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

bool barn_ensure(int node, unsigned cls)
{
	if (unlikely(!barn_of(node, cls)))
		barn_setup(node, cls);
	return barn_of(node, cls) != NULL;
}

/*
 * n new empty sheaves of class cls in one piece of metadata: mem (n * barn_sheaf_size(cls)
 * zeroed bytes, a CPU's stock), else one arena meta_lock hold for all (a barn's first
 * exchanges need a few), linked through next; NULL when out of memory.  Never freed: they
 * circulate between CPUs and barns.
 */
PCPM_COLD struct slab_sheaf *barn_sheaf_new(unsigned cls, unsigned n, void *mem_or_null)
{
	size_t one = barn_sheaf_size(cls);
	char *mem = mem_or_null ? mem_or_null : pcpm_meta_alloc(one * n);
	if (!mem)
		return NULL;
	for (unsigned i = 0; i + 1 < n; i++)
		((struct slab_sheaf *)(mem + i * one))->next = (struct slab_sheaf *)(mem + (i + 1) * one);
	return (struct slab_sheaf *)mem;
}

#define SHEAF_NEW_BATCH 4 /* empty sheaves a barn short of them gets at once */

void barn_put_empty(int node, unsigned cls, struct slab_sheaf *list)
{
	struct node_barn *b = barn_of(node, cls);
	struct slab_sheaf *last = list;
	unsigned n = 1;
	for (; last->next; last = last->next)
		n++;
	lockstat_lock(&b->lock, &b->ls);
	last->next = b->empty;
	b->empty = list;
	b->nr_empty += n;
	lockstat_unlock(&b->lock, &b->ls);
}

/*
 * barn_replace_empty_sheaf(): the k (1 or 2) empty sheaves e[] for full ones from the node's
 * barn, else from another node's in zonelist order (their slabs are shared by all nodes), in
 * one hold; how many were exchanged (the first ones of e[] are replaced by full sheaves; 0
 * when every barn is out of full sheaves).  Barns without a full sheaf are passed over
 * unlocked (a racy look: a wrong guess costs a lock or a refill).
 */
unsigned barn_replace_empty(int node, unsigned cls, struct slab_sheaf **e, unsigned k)
{
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int i = 0; i < nr; i++) {
		struct node_barn *b = barn_of((node + i) % nr, cls);
		if (!b || !__atomic_load_n(&b->nr_full, __ATOMIC_RELAXED))
			continue;
		unsigned got = 0;
		lockstat_lock(&b->lock, &b->ls);
		for (; got < k && b->nr_full; got++) {
			struct slab_sheaf *f = b->full;
			b->full = f->next;
			__atomic_store_n(&b->nr_full, b->nr_full - 1, __ATOMIC_RELAXED);
			e[got]->next = b->empty;
			b->empty = e[got];
			b->nr_empty++;
			e[got] = f;
		}
		b->low_full = MIN(b->low_full, b->nr_full);
		lockstat_unlock(&b->lock, &b->ls);
		if (got)
			return got;
	}
	return 0;
}

/*
 * barn_replace_full_sheaf(): the k (1 or 2) full sheaves f[] into the node's barn for empty
 * ones (from its empty list, else new metadata), as many as the barn has room for below
 * barn_max, in one hold; how many (the first ones of f[] are replaced by empty sheaves; the
 * rest stay the caller's, who flushes them to the slabs).
 */
unsigned barn_replace_full(int node, unsigned cls, struct slab_sheaf **f, unsigned k)
{
	struct node_barn *b = barn_of(node, cls);
	if (__atomic_load_n(&b->nr_full, __ATOMIC_RELAXED) >= barn_max[cls])
		return 0;
	unsigned done = 0;
	struct slab_sheaf *fresh = NULL; /* new empty sheaves, when the barn had too few */
	for (;;) {
		lockstat_lock(&b->lock, &b->ls);
		if (fresh) { /* first onto the empty list, in this same hold */
			struct slab_sheaf *last = fresh;
			unsigned n = 1;
			for (; last->next; last = last->next)
				n++;
			last->next = b->empty;
			b->empty = fresh;
			b->nr_empty += n;
			fresh = NULL;
		}
		for (; done < k && b->nr_full < barn_max[cls] && b->nr_empty; done++) {
			struct slab_sheaf *e = b->empty;
			b->empty = e->next;
			b->nr_empty--;
			f[done]->next = b->full;
			b->full = f[done];
			__atomic_store_n(&b->nr_full, b->nr_full + 1, __ATOMIC_RELAXED);
			f[done] = e;
		}
		bool more = done < k && b->nr_full < barn_max[cls];
		lockstat_unlock(&b->lock, &b->ls);
		/* out of empty sheaves (the node's first exchanges): a few more from metadata */
		if (!more || !(fresh = barn_sheaf_new(cls, SHEAF_NEW_BATCH, NULL)))
			return done;
	}
}

/* Full sheaves of the barn to the slabs: all, or those that stayed through the period. */
static uint64_t barn_release(struct node_barn *b, unsigned cls, bool all)
{
	uint64_t freed = 0;
	if (!b || !__atomic_load_n(&b->nr_full, __ATOMIC_RELAXED))
		return 0;
	lockstat_lock(&b->lock, &b->ls);
	uint32_t n = all ? b->nr_full : MIN(b->low_full, b->nr_full);
	struct slab_sheaf *list = NULL;
	for (uint32_t i = 0; i < n; i++) {
		struct slab_sheaf *f = b->full;
		b->full = f->next;
		f->next = list;
		list = f;
	}
	__atomic_store_n(&b->nr_full, b->nr_full - n, __ATOMIC_RELAXED);
	b->low_full = b->nr_full;
	lockstat_unlock(&b->lock, &b->ls);
	for (struct slab_sheaf *f = list, *next; f; f = next) {
		next = f->next;
		slab_free_bulk(cls, f->objects, f->size);
		freed += f->size;
		f->size = 0;
		lockstat_lock(&b->lock, &b->ls);
		f->next = b->empty;
		b->empty = f;
		b->nr_empty++;
		lockstat_unlock(&b->lock, &b->ls);
	}
	return freed;
}

uint64_t barn_release_all(bool all)
{
	uint64_t freed = 0;
	for (int n = 0; n < MAX_NUMNODES; n++)
		for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
			freed += barn_release(barn_of(n, c), c, all);
	return freed;
}

bool barn_pending(void)
{
	for (int n = 0; n < MAX_NUMNODES; n++)
		for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
			if (barn_of(n, c) && __atomic_load_n(&barn_of(n, c)->nr_full, __ATOMIC_RELAXED))
				return true;
	return false;
}

bool barn_holds(unsigned cls, const void *p)
{
	bool found = false;
	for (int n = 0; n < MAX_NUMNODES && !found; n++) {
		struct node_barn *b = barn_of(n, cls);
		if (!b)
			continue;
		pcpm_lock(&b->lock);
		for (struct slab_sheaf *f = b->full; f && !found; f = f->next)
			for (uint32_t i = 0; i < f->size && !found; i++)
				found = f->objects[i] == p;
		pcpm_unlock(&b->lock);
	}
	return found;
}

size_t barn_cached_bytes(bool nowait)
{
	size_t bytes = 0;
	for (int n = 0; n < MAX_NUMNODES; n++) {
		for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
			struct node_barn *b = barn_of(n, c);
			if (!b || (nowait ? !pcpm_trylock(&b->lock) : (pcpm_lock(&b->lock), false)))
				continue;
			size_t objs = 0;
			for (struct slab_sheaf *f = b->full; f; f = f->next)
				objs += f->size;
			pcpm_unlock(&b->lock);
			bytes += objs * pcpm_class_size[c];
		}
	}
	return bytes;
}

void barn_stats_add(struct pcpm_stats *s)
{
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

/* fork: setup_lock first (its holders take no other lock; holding it keeps the set of
 * barns fixed), then every barn lock. */
void barn_lock_all(void)
{
	pcpm_lock(&setup_lock);
	for (int n = 0; n < MAX_NUMNODES; n++)
		for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
			if (barn_of(n, c))
				pcpm_lock(&barn_of(n, c)->lock);
}

void barn_unlock_all(void)
{
	for (int n = 0; n < MAX_NUMNODES; n++)
		for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
			if (barn_of(n, c))
				pcpm_unlock(&barn_of(n, c)->lock);
	pcpm_unlock(&setup_lock);
}

void barn_reset_locks(void)
{
	for (int n = 0; n < MAX_NUMNODES; n++)
		for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
			if (barn_of(n, c))
				pcpm_lock_reset(&barn_of(n, c)->lock);
	pcpm_lock_reset(&setup_lock);
}
