/*
 * remote.c - remote frees travel as arrays of pointers (see remote.h).  Calls depot (other
 * nodes' objects of a class with a depot), barn (new sheaves, a full barn exchange), slab
 * (objects released), pcp (the node of a slot) and arena (metadata, the slab owner).
 *
 * Until the seventh round an object went home on a chain through the objects themselves
 * (mimalloc's xthread_free, per owner rather than per page): the owner's drain walked links
 * the freeing CPU wrote last, one serial cache miss per object on the owner, which is a
 * producer's critical path (xmalloc: 87 % of sheaf_alloc_bulk's samples on the load of the
 * next link, bench/RESULTS.md issue 22 seventh round).  Here the freeing slot copies each
 * pointer into an outbound sheaf (the kernel's `void *objects[]`) for that owner, one per
 * owner for up to REMOTE_WAYS owners, and pushes a full one onto the owner's inbox with one
 * compare-and-swap; the owner takes the whole inbox and swaps its empty main for one of the
 * sheaves, whose array lines it reads in order.  Neither side reads or writes the objects.
 * The owner's emptied sheaf goes back to the sender's returns (a stack pushed with a
 * compare-and-swap, taken whole by the sender under its lock: no ABA), so the sheaves in
 * flight between two slots stay as many as the inbox bound allows.
 */
#include "remote.h"
#include "depot.h"
#include "pcp.h"
#include "topology.h"

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

/* every slot's boxes (NULL: no thread ran there yet), and how many are set up: while one
 * is, every object's home is it and nothing is sent */
static _Atomic(struct remote_box *) *boxes PCPM_READ_MOSTLY;
static _Atomic unsigned nr_boxes PCPM_READ_MOSTLY;

void pcpm_remote_init(void)
{
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
		inbox_max[c] = MAX(INBOX_SHEAVES * (uint32_t)pcpm_sheaf_cap[c],
				   INBOX_BYTES / pcpm_class_size[c]);
}

bool remote_register(unsigned cpu, struct remote_box *box)
{
	if (!boxes && !(boxes = pcpm_meta_alloc((size_t)pcpm_nr_cpus * sizeof(*boxes))))
		return false;
	atomic_store_explicit(&boxes[cpu], box, memory_order_release);
	atomic_fetch_add_explicit(&nr_boxes, 1, memory_order_relaxed);
	return true;
}

static inline struct remote_box *box_of(uint32_t slot1, unsigned cls)
{
	struct remote_box *b = atomic_load_explicit(&boxes[slot1 - 1], memory_order_acquire);
	return b ? &b[cls] : NULL;
}

static void stack_push(_Atomic(struct slab_sheaf *) *top, struct slab_sheaf *s)
{
	struct slab_sheaf *old = atomic_load_explicit(top, memory_order_relaxed);
	do
		s->next = old;
	while (!atomic_compare_exchange_weak_explicit(top, &old, s, memory_order_release,
						      memory_order_relaxed));
}

/* An empty sheaf for an outbound way: one given back, else new metadata (four at once). */
static struct slab_sheaf *empty_take(struct remote_pcs *rp, struct remote_box *own,
				     unsigned cls)
{
	if (!rp->empty)
		rp->empty = atomic_exchange_explicit(&own->returns, NULL, memory_order_acquire);
	if (!rp->empty)
		rp->empty = barn_sheaf_new(cls, 4, NULL);
	struct slab_sheaf *s = rp->empty;
	if (s) {
		rp->empty = s->next;
		s->size = 0;
	}
	return s;
}

/*
 * Way w's sheaf to its owner's inbox; an owner whose inbox is at its bound gets nothing:
 * the sheaf goes to this node's barn as a full one for an empty one, else its objects to
 * the slabs (the objects stay on the freeing CPU's node, as a consumer's own sheaves would
 * flush them).  The way keeps its owner and no sheaf.
 */
static void way_send(struct remote_pcs *rp, unsigned w, unsigned cls, unsigned cpu, int node)
{
	struct slab_sheaf *s = rp->out[w];
	rp->out[w] = NULL;
	if (!s)
		return;
	struct remote_box *b = box_of(rp->owner[w], cls);
	if (s->size && atomic_load_explicit(&b->inbox_n, memory_order_relaxed) < inbox_max[cls]) {
		rp->sent += s->size;
		s->origin = cpu + 1; /* (the origin: where the owner gives an empty one back) */
		atomic_fetch_add_explicit(&b->inbox_n, s->size, memory_order_relaxed);
		stack_push(&b->inbox, s);
		return;
	}
	if (s->size && !barn_replace_full(node, cls, &s, 1)) {
		slab_free_bulk(cls, s->objects, s->size);
		s->size = 0;
	}
	s->next = rp->empty; /* (barn_replace_full gave an empty one for the full) */
	rp->empty = s;
}

/* An outbound sheaf goes when full or when it holds OUT_BYTES: a sheaf of 8-32 KiB objects
 * holds up to 1 MiB, and partial ones waiting on consumers took xthread 8-32 KiB's peak at
 * 224 CPUs from 78 to 100 MiB. */
#define OUT_BYTES (32U << 10)

/* o (an object of owner's slab) onto its outbound sheaf; false: no sheaf (out of memory) */
static bool out_put(struct remote_pcs *rp, struct remote_box *own, unsigned cls,
		    unsigned cpu, int node, uint32_t owner, void *o)
{
	unsigned w = 0;
	while (w < REMOTE_WAYS && rp->owner[w] != owner)
		w++;
	if (w == REMOTE_WAYS) {
		/* a way with no sheaf (its last one sent); none: the object stays (a CPU
		 * that frees many CPUs' objects, larson: partial sheaves sent on every change
		 * of owner were a sheaf of metadata per few objects) */
		for (w = 0; w < REMOTE_WAYS && rp->out[w]; w++)
			;
		if (w == REMOTE_WAYS)
			return false;
		rp->owner[w] = owner;
	}
	struct slab_sheaf *s = rp->out[w];
	if (!s && !(s = rp->out[w] = empty_take(rp, own, cls)))
		return false;
	s->objects[s->size++] = o;
	if (s->size == pcpm_sheaf_cap[cls] || s->size * pcpm_class_size[cls] >= OUT_BYTES)
		way_send(rp, w, cls, cpu, node);
	return true;
}

#define DEPOT_GROUPS 8
unsigned remote_send(struct remote_pcs *rp, unsigned cls, unsigned cpu, void **objs,
		     unsigned n)
{
	struct {
		uint32_t owner;
		unsigned n;
		void *first, *last;
	} g[DEPOT_GROUPS];
	unsigned ng = 0, keep = 0;
	/* (slab_owner names a slot once its sheaves took objects: registered before) */
	if (atomic_load_explicit(&nr_boxes, memory_order_relaxed) <= 1)
		return n;
	int node = pcp_cpu_node(cpu);
	bool depot = pcpm_depot_chunk[cls] != 0;
	struct remote_box *own = box_of(cpu + 1, cls);
	for (unsigned i = 0; i < n; i++) {
		void *o = objs[i];
		uint32_t owner = __atomic_load_n(&pcpm_page_of(o)->slab_head->slab_owner,
						 __ATOMIC_RELAXED);
		if (!owner || owner == cpu + 1 || owner > (uint32_t)pcpm_nr_cpus ||
		    !box_of(owner, cls) || (depot && pcp_cpu_node(owner - 1) == node)) {
			objs[keep++] = o; /* (a class with a depot: the node's pool serves) */
			continue;
		}
		if (!depot) {
			if (!out_put(rp, own, cls, cpu, node, owner, o))
				objs[keep++] = o;
			continue;
		}
		/* another node's object of a class with a depot: a chain per owner into the
		 * owner's node's depot, which all its CPUs share */
		unsigned k = 0;
		while (k < ng && g[k].owner != owner)
			k++;
		if (k == ng && ng == DEPOT_GROUPS) {
			objs[keep++] = o;
			continue;
		}
		if (k == ng)
			g[ng++] = (typeof(g[0])){ owner, 0, NULL, o };
		fl_store(o, g[k].first);
		g[k].first = o;
		g[k].n++;
	}
	for (unsigned k = 0; k < ng; k++) {
		fl_store(g[k].last, NULL);
		if (depot_give(pcp_cpu_node(g[k].owner - 1), cls, g[k].first, g[k].n)) {
			rp->sent += g[k].n;
			continue;
		}
		/* the depot is full: the objects travel by sheaf (their links are dead) */
		for (void *o = g[k].first, *next; o; o = next) {
			next = depot_next(o, cls);
			if (!out_put(rp, own, cls, cpu, node, g[k].owner, o))
				objs[keep++] = o;
		}
	}
	/* (a class with a depot sends its sheaves at once: a machine of many CPUs, where
	 * objects waiting on outbound sheaves raised xthread 8-32 KiB's peak by 14 MiB) */
	for (unsigned w = 0; depot && w < REMOTE_WAYS; w++)
		if (rp->out[w])
			way_send(rp, w, cls, cpu, node);
	return keep;
}

bool remote_fill(struct remote_pcs *rp, struct remote_box *box, unsigned cls,
		 struct slab_sheaf **m)
{
	if (!rp->home && (rp->home = atomic_exchange_explicit(&box->inbox, NULL,
							      memory_order_acquire)) != NULL) {
		__atomic_store_n(&rp->home_n,
				 atomic_exchange_explicit(&box->inbox_n, 0, memory_order_relaxed),
				 __ATOMIC_RELAXED);
	}
	struct slab_sheaf *s = rp->home, *old = *m;
	if (!s)
		return false;
	rp->home = s->next;
	__atomic_store_n(&rp->home_n, rp->home_n > s->size ? rp->home_n - s->size : 0,
			 __ATOMIC_RELAXED);
	*m = s;
	struct remote_box *back = s->origin ? box_of(s->origin, cls) : NULL;
	old->size = 0;
	if (back) {
		stack_push(&back->returns, old);
	} else {
		old->next = rp->empty;
		rp->empty = old;
	}
	return true;
}

/* a list of full sheaves to the slabs, the sheaves to rp's empty ones */
static uint64_t list_release(struct remote_pcs *rp, unsigned cls, struct slab_sheaf *s)
{
	uint64_t n = 0;
	for (struct slab_sheaf *next; s; s = next) {
		next = s->next;
		slab_free_bulk(cls, s->objects, s->size);
		n += s->size;
		s->size = 0;
		s->next = rp->empty;
		rp->empty = s;
	}
	return n;
}

uint64_t remote_release(struct remote_pcs *rp, struct remote_box *box, unsigned cls)
{
	uint64_t n = list_release(rp, cls, rp->home);
	rp->home = NULL;
	__atomic_store_n(&rp->home_n, 0, __ATOMIC_RELAXED);
	atomic_store_explicit(&box->inbox_n, 0, memory_order_relaxed);
	n += list_release(rp, cls, atomic_exchange_explicit(&box->inbox, NULL,
							    memory_order_acquire));
	for (unsigned w = 0; w < REMOTE_WAYS; w++) {
		struct slab_sheaf *s = rp->out[w];
		rp->owner[w] = 0;
		if (s) {
			s->next = NULL;
			n += list_release(rp, cls, s);
			rp->out[w] = NULL;
		}
	}
	return n;
}

bool remote_holds(const struct remote_pcs *rp, struct remote_box *box, const void *p)
{
	/* the inbox: stable below its head while the caller's lock keeps its owner from
	 * taking it; pushes only add in front */
	for (const struct slab_sheaf *s = rp->home; s; s = s->next)
		if (sheaf_has(s, p))
			return true;
	for (const struct slab_sheaf *s = atomic_load_explicit(&box->inbox, memory_order_acquire);
	     s; s = s->next)
		if (sheaf_has(s, p))
			return true;
	for (unsigned w = 0; w < REMOTE_WAYS; w++)
		if (sheaf_has(rp->out[w], p))
			return true;
	return false;
}

size_t remote_objects(const struct remote_pcs *rp, struct remote_box *box, unsigned cls)
{
	size_t n = __atomic_load_n(&rp->home_n, __ATOMIC_RELAXED) +
		   atomic_load_explicit(&box->inbox_n, memory_order_relaxed);
	for (unsigned w = 0; w < REMOTE_WAYS; w++) {
		struct slab_sheaf *s = __atomic_load_n(&rp->out[w], __ATOMIC_RELAXED);
		if (s) /* (at most a sheaf: a racy read of a reused one) */
			n += MIN(__atomic_load_n(&s->size, __ATOMIC_RELAXED), (uint32_t)pcpm_sheaf_cap[cls]);
	}
	return n;
}
