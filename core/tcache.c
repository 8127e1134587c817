/*
 * tcache.c - thread-cache slow paths: refill, flush, stacks that grow, set-up and teardown
 * (see tcache.h).  Calls the slab layer through its per-CPU level (sheaf.c) and the registry
 * of caches (tcache_registry.c); called by the default functions and the front ends.
 */
#include "tcache.h"
#include "config.h"
#include "topology.h"

#include <pthread.h>
#include <string.h>

/* glibc's own name for pthread_key_create (exported, GLIBC_2.34) */
int __pthread_key_create(pthread_key_t *key, void (*destructor)(void *));

uint16_t pcpm_tcache_cap[NR_SIZE_CLASSES] PCPM_HOT;
static unsigned fbatch PCPM_HOT;
/* Capacity of a front end's stacks (sbins: secure mode's), per class - the thread caches'
 * capacity of the default mode; 0 when they are off (PCPMALLOC_TCACHE=0, or no front end
 * that uses them) */
static uint16_t mode_cap[NR_SIZE_CLASSES] PCPM_HOT;

/*
 * Mid sizes (the classes above 4 KiB the fast paths serve, to 16 KiB) are bounded by bytes:
 * a stack may hold mid_class_bytes of objects (at least 2; 32 KiB on every machine, as the
 * kernel sizes a CPU's pcp by its cache slice, not by the CPUs), and above 4 CPUs a thread's
 * mid-size stacks together 4 * mid_class_bytes, enforced on the slow paths (tcache_mid_trim);
 * on smaller machines at most 4 objects a stack and no total (core/README.md, thread caches).
 */
static size_t mid_class_bytes PCPM_READ_MOSTLY, mid_bytes PCPM_READ_MOSTLY;
/* Pointers in a cache's slot area: every class's largest capacity, for bins and sbins. */
static size_t nr_slots PCPM_READ_MOSTLY;
/* Classes whose stacks may grow (the first nr_grow) and by how many bytes of objects a
 * thread's may (PCPMALLOC_TCACHE_GROW_KB): tcache_grow_refill.  Above 4 CPUs only up to
 * TC_GROW_MAX_SIZE (above: tcache_mid_trim's byte bounds), at most 4 CPUs every class.
 * All threads' growth together is at most TC_GROW_THREADS times a thread's (tcmalloc's
 * overall thread-cache budget): an idle live thread keeps what it grew, and 300 threads
 * that each grew their 16-32 KiB stacks once held 422 MB on 2 CPUs. */
#define TC_GROW_MAX_SIZE 4096
#define TC_GROW_THREADS 4
static unsigned nr_grow PCPM_READ_MOSTLY;
static size_t tc_grow_bytes PCPM_READ_MOSTLY;

static pthread_key_t tc_key PCPM_HOT;
static void tcache_thread_exit(void *arg);

void pcpm_tcache_init(bool fast_stacks, bool mode_stacks)
{
	/* Free batch sized by CPU count, as Tim Chen's pagevec patch: 31 above 64 CPUs. */
	fbatch = pcpm_cfg.fbatch != AUTO ? (unsigned)pcpm_cfg.fbatch : (pcpm_nr_cpus > 64 ? 31 : 15);
	bool big = pcpm_nr_cpus > 4;
	mid_class_bytes = (size_t)32 << 10;
	mid_bytes = big ? 4 * mid_class_bytes : SIZE_MAX;
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		/* Capacity by object size, in the spirit of SLUB's sheaf capacity (4/12/26/60,
		 * doubled for main + spare), never below one batch; above 4 KiB by bytes */
		uint32_t size = pcpm_class_size[c];
		unsigned cap = size <= 256 ? 4 * fbatch : size <= 1024 ? 2 * fbatch : fbatch;
		if (size > 4096)
			cap = (unsigned)MAX(2UL, MIN(big ? cap : 4, mid_class_bytes / size));
		/* 0: every call to the slab (PCPMALLOC_TCACHE=0; memcheck mode, whose annotations
		 * live on the slow paths; secure mode, whose checks do).  The paged classes
		 * (20-32 KiB) get the mid sizes' byte rule too, in the default mode's stacks
		 * only: malloc's slow path pops them, free's fast path pushes them (their pages
		 * carry bin8 as every slab page; core/README.md, thread caches) */
		pcpm_tcache_cap[c] = pcpm_cfg.tcache && fast_stacks ? (uint16_t)cap : 0;
		mode_cap[c] = pcpm_cfg.tcache && mode_stacks && c < SLAB_PAGED_FIRST ? (uint16_t)cap : 0;
		nr_slots += (size_t)pcpm_tcache_cap[c] + mode_cap[c];
	}
	tc_grow_bytes = (size_t)pcpm_cfg.tcache_grow_kb << 10;
	nr_grow = !tc_grow_bytes ? 0 : big ? size_to_class(TC_GROW_MAX_SIZE) + 1 : NR_SIZE_CLASSES;
	/* glibc's own name: a program's pthread_key_create() wrapper must not run under the init
	 * lock (issue 26 item 1, as __sysconf in os.h) */
	__pthread_key_create(&tc_key, tcache_thread_exit);
}

unsigned tcache_fbatch(void)
{
	return fbatch;
}

/*
 * Objects per refill and per flush: the free batch, but at most half the capacity (rounded
 * up), so a refill or a flush leaves the stack half full and the next run of frees or of
 * allocations of the class stays on the fast path.  With the whole capacity (15 of the 15
 * of 1-4 KiB classes) a flush emptied the stack and the next allocation refilled it, and a
 * refill filled it up to the next flush: a program whose allocations and frees of a class
 * alternate in short runs went to the slab every few calls (wl-frag: 40k refills and 40k
 * flushes in 3M allocations).  Classes of 30 and more objects keep the full batch.
 */
static inline unsigned batch_for(unsigned cls)
{
	unsigned half = (pcpm_tcache_cap[cls] + 1) / 2;
	return half < fbatch ? half : fbatch;
}

/* Objects per refill/flush of a front end's stack: the same rule (never 0). */
static inline unsigned mode_batch_for(unsigned cls)
{
	unsigned half = (mode_cap[cls] + 1) / 2;
	return half < fbatch ? (half ? half : 1) : fbatch;
}

/* A cache for the calling thread: one an exited thread left, or fresh metadata (the struct,
 * then its slot area); NULL when out of memory. */
static struct tcache *tcache_get(void)
{
	struct tcache *tc = tcache_registry_reuse();
	if (tc) {
		void **grow_area = tc->grow_area; /* (a mapping of its own: kept) */
		memset(tc, 0, sizeof(*tc));
		tc->grow_area = grow_area;
	}
	else if (!(tc = pcpm_meta_alloc(sizeof(*tc) + nr_slots * sizeof(void *)))) /* zeroed */
		return NULL;
	tc->slots = (void **)(tc + 1);
	return tc;
}

/* The capacity in force of a stack (at most the array it was set up with). */
static inline void bin_set_cap(struct tcache_bin *b, unsigned cap)
{
	b->full = (uint16_t)(b->empty - cap * sizeof(void *));
}

/* An empty stack whose array is the max slots from *next on; advances *next. */
static void bin_init(struct tcache_bin *b, void ***next, unsigned max)
{
	*next += max;
	b->top = *next;
	b->empty = (uint16_t)(uintptr_t)*next;
	bin_set_cap(b, max);
}

void tcache_setup(void)
{
	if (tcache_self()->state != TC_UNINIT)
		return;
	struct tcache *tc = tcache_get();
	if (!tc)
		return; /* no cache: every call goes to the slabs, and set-up is tried again */
	void **next = tc->slots;
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		tc->cap[c] = tc->slots_max[c] = pcpm_tcache_cap[c] | mode_cap[c];
		bin_init(&tc->bins[c], &next, pcpm_tcache_cap[c]);
		bin_init(&tc->sbins[c], &next, mode_cap[c]);
	}
	for (unsigned n = 0; n <= SMALL_LOOKUP_MAX; n++)
		tc->direct[n] = (uint8_t)(size_to_class(n) * 2);
	tc->state = TC_ACTIVE;
	tcache_registry_add(tc);
	pcpm_tcp = tc; /* before pthread_setspecific, which may allocate */
	pthread_setspecific(tc_key, tc);
}

static inline unsigned bin_count(struct tcache *tc, unsigned cls)
{
	return tcache_bin_count(&tc->bins[cls]);
}

/*
 * Gives n objects of stack b (at most all it holds) back to the slab layer: the oldest (its
 * bottom; the rest move down), so the recently freed objects, warm in this CPU's caches,
 * stay for the next allocations (jemalloc's cache_bin flush keeps them too); or, with
 * newest, the top ones (a front end's stacks: secure mode's freed slots reach the slab's
 * random order sooner).
 */
static void flush_stack(struct tcache *tc, struct tcache_bin *b, unsigned cls, unsigned n,
			bool newest)
{
	unsigned count = tcache_bin_count(b);
	if (n > count)
		n = count;
	if (!n)
		return;
	void **top = b->top, **bottom = top + count;
	if (newest) {
		sheaf_free_bulk(cls, top, n);
	} else {
		sheaf_free_bulk(cls, bottom - n, n);
		memmove(top + n, top, (size_t)(count - n) * sizeof(void *));
	}
	b->top = top + n;
	tc->moved -= n;
	tc->flushes++;
}

static void flush_bin(struct tcache *tc, unsigned cls, unsigned n)
{
	flush_stack(tc, &tc->bins[cls], cls, n, false);
}

/*
 * Fills stack b with up to want objects of class cls from the slab layer (want <= its room);
 * how many (0: memory is exhausted).  They are written below the top, then moved up to it
 * when fewer came.
 */
static unsigned refill_stack(struct tcache *tc, struct tcache_bin *b, unsigned cls, unsigned want)
{
	void **dst = b->top - want;
	unsigned got = sheaf_alloc_bulk(cls, want, dst);
	if (got < want)
		memmove(b->top - got, dst, (size_t)got * sizeof(void *));
	b->top -= got;
	tc->moved += got;
	if (got)
		tc->refills++;
	return got;
}

/*
 * ---- stacks that grow (tcmalloc's dynamic per-class max_length; core/README.md) ----
 * A class refilled, flushed and refilled again makes round trips to the slab layer: from
 * then on each refill adds a batch of capacity, so the stack soon holds the working set.
 * TC_OVERAGES flushes in a row with no refill give a batch back; a thread grows by at most
 * PCPMALLOC_TCACHE_GROW_KB of objects (the classes refilled longest ago give theirs back).
 */
#define TC_GROW_SLOTS 2048 /* a grown stack's array (16 KiB: the 16-bit limits allow 8191) */
#define TC_OVERAGES 3	   /* flushes in a row, no refill between, per batch given back */
/* The class's stack in use - the fast one, else a front end's (secure mode's: issue 24) -, its
 * base capacity and its batch (one of pcpm_tcache_cap and mode_cap is 0) */
#define grow_bin(tc, c) (pcpm_tcache_cap[c] ? &(tc)->bins[c] : &(tc)->sbins[c])
#define grow_base(c) (pcpm_tcache_cap[c] | mode_cap[c])
#define grow_step(c) (pcpm_tcache_cap[c] ? batch_for(c) : mode_batch_for(c))
/* REFILLED: a refill; FLUSHED: then a flush (the next refill completes a trip); ON: grows */
enum { TC_TRIP_REFILLED = 1, TC_TRIP_FLUSHED = 2, TC_TRIP_ON = 4 };

/* The stack of cls into its array of the grow area (metadata: an mmap of its own took arena
 * 0's room to grow; one array of slack for tcache_in_other_cache's walk); false: no memory */
static bool grow_move(struct tcache *tc, unsigned cls)
{
	if (!tc->grow_area &&
	    !(tc->grow_area = pcpm_meta_alloc((size_t)(nr_grow + 1) * TC_GROW_SLOTS * sizeof(void *))))
		return false;
	struct tcache_bin *b = grow_bin(tc, cls);
	unsigned n = tcache_bin_count(b);
	void **bottom = tc->grow_area + (size_t)(cls + 1) * TC_GROW_SLOTS;
	memcpy(bottom - n, b->top, (size_t)n * sizeof(void *));
	b->top = bottom - n;
	b->empty = (uint16_t)(uintptr_t)bottom;
	__atomic_store_n(&tc->slots_max[cls], TC_GROW_SLOTS, __ATOMIC_RELAXED);
	return true;
}

/* cls's capacity set to cap (the objects above it go down first: the full test is ==) */
static void grow_set_cap(struct tcache *tc, unsigned cls, unsigned cap)
{
	struct tcache_bin *b = grow_bin(tc, cls);
	unsigned base = grow_base(cls), n = tcache_bin_count(b), old = tc->cap[cls];
	if (n > cap) /* (a front end's stack: its newest, as tcache_mode_flush) */
		flush_stack(tc, b, cls, n - cap, b == &tc->sbins[cls]);
	size_t was = (size_t)(old > base ? old - base : 0) * pcpm_class_size[cls];
	size_t now = (size_t)(cap > base ? cap - base : 0) * pcpm_class_size[cls];
	tc->grown += now - was;
	__atomic_fetch_add(&pcpm_tcache_grown, now - was, __ATOMIC_RELAXED); /* (mod 2^64) */
	tc->cap[cls] = (uint16_t)cap;
	bin_set_cap(b, cap);
}

/* Room for need more bytes of growth of cls, in the thread's budget and in all threads':
 * the thread's other grown classes, those refilled longest ago first, back to their base
 * until it fits; false when it does not. */
static bool grow_budget(struct tcache *tc, unsigned cls, size_t need)
{
	while (tc->grown + need > tc_grow_bytes ||
	       __atomic_load_n(&pcpm_tcache_grown, __ATOMIC_RELAXED) + need >
		       TC_GROW_THREADS * tc_grow_bytes) {
		unsigned v = NR_SIZE_CLASSES;
		for (unsigned c = 0; c < nr_grow; c++)
			if (c != cls && tc->cap[c] > grow_base(c) &&
			    (v == NR_SIZE_CLASSES || tc->seen[c] < tc->seen[v]))
				v = c;
		if (v == NR_SIZE_CLASSES)
			return false;
		grow_set_cap(tc, v, grow_base(v));
		tc->trip[v] = tc->overage[v] = 0;
	}
	return true;
}

/* A refill of cls: after a refill and a flush, a round trip (the class grows from now on);
 * a growing class gets one batch more room. */
static void tcache_grow_refill(struct tcache *tc, unsigned cls)
{
	uint8_t t = tc->trip[cls];
	tc->seen[cls] = tc->refills + tc->flushes;
	tc->overage[cls] = 0;
	t = t & TC_TRIP_FLUSHED ? TC_TRIP_ON : t | TC_TRIP_REFILLED;
	tc->trip[cls] = t;
	/* One thread only (in xmalloc and rpmalloc, whose threads free each other's
	 * blocks, growth tripled the peak RSS and doubled the time), but on at most 4 CPUs
	 * (no mid trim) the classes above 4 KiB with any number: glibc-thread's two threads
	 * went to the slab every 4th call of a 4-32 KiB class (stacks of 2-4), 16k refills
	 * and 16k flushes in 300k calls (small classes too: rpmalloc's peak 143-230 MiB in
	 * 4 runs of 28, main's at most 128 in 28). */
	if (!(t & TC_TRIP_ON) || cls >= nr_grow ||
	    ((mid_bytes != SIZE_MAX || pcpm_class_size[cls] <= TC_GROW_MAX_SIZE) &&
	     __atomic_load_n(&pcpm_tcache_live, __ATOMIC_RELAXED) > 1))
		return;
	unsigned step = grow_step(cls), cap = tc->cap[cls] + step;
	size_t bytes = (size_t)step * pcpm_class_size[cls];
	if (cap > TC_GROW_SLOTS || !grow_budget(tc, cls, bytes) ||
	    (tc->slots_max[cls] < cap && !grow_move(tc, cls)))
		return;
	grow_set_cap(tc, cls, cap);
}

/* A flush of cls's full stack: true when the class grows (the caller flushes one batch);
 * TC_OVERAGES flushes in a row give a batch of capacity back, down to the base. */
static bool tcache_grow_flush(struct tcache *tc, unsigned cls)
{
	uint8_t t = tc->trip[cls];
	if (t & (TC_TRIP_REFILLED | TC_TRIP_ON))
		tc->trip[cls] = t | TC_TRIP_FLUSHED;
	if (!(t & TC_TRIP_ON))
		return false;
	if ((t & TC_TRIP_FLUSHED) && ++tc->overage[cls] >= TC_OVERAGES) {
		unsigned base = grow_base(cls), step = grow_step(cls);
		tc->overage[cls] = 0;
		grow_set_cap(tc, cls, tc->cap[cls] > base + step ? tc->cap[cls] - step : base);
		if (tc->cap[cls] <= base)
			tc->trip[cls] = 0;
	}
	return true;
}

/*
 * The stack of class cls is full.  Normally one batch goes back to the slab, keeping
 * cap - batch objects for the thread's next allocations.  A thread that has allocated
 * nothing since its previous flush only frees (the consumer of a producer/consumer pair,
 * which frees what another thread allocated): objects parked in its cache serve nobody, and
 * the slabs they pin cannot be reused.  Then, as free_high drains a pcp whose CPU only
 * frees (kernel-pcp.md §6), the whole stack goes back and the capacity drops to one batch
 * until the thread allocates this class again (refill restores it) or allocates anything
 * before the next flush.  xthread-small: 16 classes x 45-60 objects stayed in the
 * consumer's cache; now 0-15.  The fast path is unchanged: it only sees the stack limits.
 */
/*
 * The thread's mid-size stacks (classes above 4 KiB) hold more than mid_bytes: the
 * other classes' stacks go back to the slab layer, largest objects first, until they fit.
 * Slow paths only (after a refill or a flush of a mid-size class); the fast path's pushes may
 * overrun the budget by the room the stacks had until the next slow path.
 */
static void tcache_mid_trim(struct tcache *tc, unsigned keep)
{
	if (pcpm_class_size[keep] <= 4096 || mid_bytes == SIZE_MAX)
		return;
	size_t bytes = 0;
	unsigned first = size_to_class(4097);
	for (unsigned c = first; c < NR_SIZE_CLASSES; c++) /* (the paged classes' too) */
		bytes += (size_t)bin_count(tc, c) * pcpm_class_size[c];
	for (unsigned c = NR_SIZE_CLASSES; c-- > first && bytes > mid_bytes;) {
		unsigned n = bin_count(tc, c);
		if (c == keep || !n)
			continue;
		flush_bin(tc, c, n);
		bytes -= (size_t)n * pcpm_class_size[c];
	}
}

static void tcache_flush_full(struct tcache *tc, unsigned cls)
{
	struct tcache_bin *b = &tc->bins[cls];
	unsigned batch = batch_for(cls), full = pcpm_tcache_cap[cls];
	if (!tcache_bin_full(b))
		return; /* not full: the cache was just set up (the thread's first call frees) */
	bool only_frees = tc->pops + tc->malloc_calls == tc->flush_mark;
	tc->flush_mark = tc->pops + tc->malloc_calls;
	if (tcache_grow_flush(tc, cls) || full <= batch) {
		flush_bin(tc, cls, batch);
	} else if (only_frees) {
		flush_bin(tc, cls, bin_count(tc, cls));
		tc->cap[cls] = (uint16_t)batch; /* empty stack, room for one batch */
		bin_set_cap(b, batch);
	} else if (tc->cap[cls] < full) {
		tc->cap[cls] = (uint16_t)full; /* allocations resumed: room without a flush */
		bin_set_cap(b, full);
	} else {
		flush_bin(tc, cls, batch);
	}
	tcache_mid_trim(tc, cls);
}

/* Slow start (tcmalloc's max_length from 1; the kernel's alloc_factor, doubling each
 * rmqueue_bulk in nr_pcp_alloc): a thread's k-th refill of a class takes TC_FIRST_BYTES << k of
 * objects (at least one), up to a batch, so a thread that allocates a few objects of many
 * classes does not hold a batch of each (core/README.md, thread caches). */
#define TC_FIRST_BYTES 1024
#define TC_RAMP_DONE 255
static unsigned refill_want(struct tcache *tc, unsigned cls)
{
	unsigned batch = batch_for(cls);
	if (tc->ramp[cls] == TC_RAMP_DONE)
		return batch;
	unsigned n = MAX(1U, (TC_FIRST_BYTES << tc->ramp[cls]) / pcpm_class_size[cls]);
	tc->ramp[cls] = n >= batch ? TC_RAMP_DONE : tc->ramp[cls] + 1;
	return MIN(n, batch);
}

static void *__tcache_alloc_slow(unsigned cls);
void *tcache_alloc_slow(unsigned cls)
{
	PCPM_INSIDE_BEGIN();
	void *p = __tcache_alloc_slow(cls);
	PCPM_INSIDE_END();
	return p;
}

static void *__tcache_alloc_slow(unsigned cls)
{
	struct tcache *tc = tcache_self();
	if (unlikely(pcpm_nested()))
		return slab_alloc_nested(cls);
	tcache_ensure();
	void *head = tcache_pop(cls);
	if (head)
		return head;
	struct tcache_bin *b = &tc->bins[cls];
	if (tc->state != TC_ACTIVE || !pcpm_tcache_cap[cls]) {
		/* no cache (disabled, after thread exit, a class it does not hold): one object
		 * straight from the slab layer */
		if (!sheaf_alloc_bulk(cls, 1, &head))
			return NULL;
		if (tc->state == TC_ACTIVE)
			tc->malloc_calls++;
		else
			tcache_count_slow(false);
		((uintptr_t *)head)[1] = 0;
		return head;
	}
	if (tc->cap[cls] < pcpm_tcache_cap[cls]) {
		/* the thread allocates this class again: its full capacity back */
		tc->cap[cls] = pcpm_tcache_cap[cls];
		bin_set_cap(b, tc->cap[cls]);
	}
	unsigned want = refill_want(tc, cls);
	tcache_grow_refill(tc, cls);
	if (want > tcache_bin_room(b))
		want = tcache_bin_room(b);
	if (!refill_stack(tc, b, cls, want))
		return NULL;
	void *p = tcache_bin_pop(tc, b); /* hand out the newest, keep the rest */
	tcache_mid_trim(tc, cls);
	return p;
}

static void __tcache_free_slow(void *p, unsigned cls);
static PCPM_NOINLINE void tcache_free_slow_inside(void *p, unsigned cls)
{
	PCPM_INSIDE_BEGIN();
	__tcache_free_slow(p, cls);
	PCPM_INSIDE_END();
}

void tcache_free_slow(void *p, unsigned cls)
{
	tcache_free_slow_inside(p, cls);
}

static void __tcache_free_slow(void *p, unsigned cls)
{
	struct tcache *tc = tcache_self();
	if (unlikely(pcpm_nested())) {
		((uintptr_t *)p)[1] = PCPM_FREE_KEY;
		slab_free_nested(p, pcpm_page_of(p)->slab_head);
		return;
	}
	tcache_ensure();
	if (tc->state != TC_ACTIVE) {
		((uintptr_t *)p)[1] = PCPM_FREE_KEY;
		tcache_count_slow(true);
		sheaf_free_bulk(cls, &p, 1);
		return;
	}
	if (likely(pcpm_tcache_cap[cls]))
		tcache_flush_full(tc, cls);
	if (!tcache_push(p, cls)) {
		tc->free_calls++; /* a cache of capacity 0 (PCPMALLOC_TCACHE=0, secure mode) */
		((uintptr_t *)p)[1] = PCPM_FREE_KEY;
		sheaf_free_bulk(cls, &p, 1);
	}
}

void tcache_release(void *p, unsigned cls)
{
	/* a push counts a free (tcache_calls); so does tcache_free_slow, in the counters of an
	 * active cache or in nocache_free - except in a handler, where it frees uncounted */
	struct tcache *tc = tcache_self();
	if (!tcache_push(p, cls)) {
		tcache_free_slow(p, cls);
		if (pcpm_nested())
			return;
	}
	if (tc->state == TC_ACTIVE)
		tc->moved++; /* as an object a refill put on the stack: no call */
	else
		tcache_uncount_slow_free();
}

bool tcache_mode_ready(struct tcache *tc, unsigned cls)
{
	return tc->state == TC_ACTIVE && mode_cap[cls];
}

bool tcache_mode_refill(struct tcache *tc, unsigned cls)
{
	struct tcache_bin *sb = &tc->sbins[cls];
	tcache_grow_refill(tc, cls);
	return refill_stack(tc, sb, cls, MIN(mode_batch_for(cls), tcache_bin_room(sb))) != 0;
}

void tcache_mode_flush(struct tcache *tc, unsigned cls)
{
	tcache_grow_flush(tc, cls); /* (one batch either way) */
	flush_stack(tc, &tc->sbins[cls], cls, mode_batch_for(cls), true);
}

void tcache_flush_all(struct tcache *tc)
{
	if (tc->state != TC_ACTIVE)
		return;
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		flush_bin(tc, c, bin_count(tc, c));
		flush_stack(tc, &tc->sbins[c], c, tcache_bin_count(&tc->sbins[c]), true);
	}
	/* the front end's quarantine: its objects are free already (marked, link zero) */
	for (unsigned i = 0; i < TC_RING; i++) {
		void *p = tc->ring[i];
		if (!p)
			continue;
		tc->ring[i] = NULL;
		((uintptr_t *)p)[1] = PCPM_FREE_KEY;
		slab_free_bulk(tc->ring_cls[i], &p, 1);
	}
}

/*
 * pthread key destructor: flush everything, then mark the cache dead so that allocations
 * made by destructors that run after this one go straight to the slabs.
 */
static void tcache_thread_exit(void *arg)
{
	struct tcache *tc = arg;
	if (tc != pcpm_tcp || tc->state != TC_ACTIVE || pcpm_nolock_all)
		return; /* (nolock child: the flush would wait; the objects stay cached) */
	pcpm_inside = 1; /* to the end of the thread */
	tcache_flush_all(tc);
	memset(tc->bins, 0, sizeof(tc->bins)); /* empty and full: the slow paths, no cache */
	memset(tc->sbins, 0, sizeof(tc->sbins));
	tc->state = TC_DEAD;
	tcache_registry_retire(tc);
}
