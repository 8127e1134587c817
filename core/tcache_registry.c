/*
 * tcache_registry.c - which thread caches exist (see tcache_registry.h): the calling thread's
 * cache pointer, the registry of live caches and the exited threads' caches kept for reuse,
 * the counters of all of them, the double-free walk of other threads' stacks and the fork
 * child's reset.  Called by tcache.c (set-up, thread exit) and by the statistics, trim, fork
 * and free paths; calls the slab layer (sheaf.c, slab.c) for the double-free check.
 */
#include "tcache_registry.h"

#include <string.h>

/* The caches of threads that have not set theirs up yet, and of exited threads: empty stacks,
 * no room (see tcache_self).  Read-only: nothing writes them. */
#define TC_STATIC_DIRECT {[0 ... SMALL_LOOKUP_MAX] = TC_BIN8_NONE}
static struct tcache tc_uninit = {.state = TC_UNINIT, .direct = TC_STATIC_DIRECT};
static struct tcache tc_dead = {.state = TC_DEAD, .direct = TC_STATIC_DIRECT};
__thread struct tcache *pcpm_tcp __attribute__((tls_model("initial-exec"))) = &tc_uninit;

static pcpm_lock_t registry_lock PCPM_HOT = PCPM_LOCK_INIT;
static struct tcache *registry PCPM_HOT;
static struct tcache *free_caches; /* caches of exited threads, under registry_lock */
unsigned pcpm_tcache_live;
size_t pcpm_tcache_grown;
/* counters of caches that are gone (thread exit) and of calls made without a cache */
struct tc_counts {
	uint64_t malloc_calls, free_calls, refills, flushes, large_allocs;
};
static struct tc_counts dead;
static _Atomic uint64_t nocache_malloc, nocache_free;

/*
 * The malloc and free calls of tc's thread (struct tcache: the fast paths count pops only,
 * pushes follow from the stacks).  Racy for another thread's cache (registry lock held, so
 * it stays): a read in the middle of a pop or a flush is off by the objects it moves.
 */
static void tcache_calls(const struct tcache *tc, uint64_t *mallocs, uint64_t *frees)
{
	uint64_t held = 0;
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) /* (parked: while a handler runs) */
		held += tcache_bin_count(&tc->bins[c]) + tcache_bin_count(&tc->sbins[c]) +
			tcache_bin_count(&tc->parked[c]);
	*mallocs = tc->malloc_calls + tc->pops;
	*frees = tc->free_calls + tc->pops + held - tc->moved;
}

/* Adds tc's counters to the sums *c (the caches that are gone: thread exit, fork child;
 * a statistics report). */
static void counts_add(struct tc_counts *c, const struct tcache *tc)
{
	uint64_t m, f;
	tcache_calls(tc, &m, &f);
	c->malloc_calls += m;
	c->free_calls += f;
	c->refills += tc->refills;
	c->flushes += tc->flushes;
	c->large_allocs += tc->large_allocs;
}

struct tcache *tcache_registry_reuse(void)
{
	pcpm_lock(&registry_lock);
	struct tcache *tc = free_caches;
	if (tc)
		free_caches = tc->free_next;
	pcpm_unlock(&registry_lock);
	return tc;
}

void tcache_registry_add(struct tcache *tc)
{
	pcpm_lock(&registry_lock);
	tc->next = registry;
	tc->prev = NULL;
	if (registry)
		registry->prev = tc;
	registry = tc;
	pcpm_tcache_live++;
	pcpm_unlock(&registry_lock);
}

void tcache_registry_retire(struct tcache *tc)
{
	pcpm_lock(&registry_lock);
	if (tc->prev)
		tc->prev->next = tc->next;
	else
		registry = tc->next;
	pcpm_tcache_live--;
	__atomic_fetch_sub(&pcpm_tcache_grown, tc->grown, __ATOMIC_RELAXED);
	tc->grown = 0; /* (its capacities are set anew when the cache is reused) */
	if (tc->next)
		tc->next->prev = tc->prev;
	counts_add(&dead, tc);
	/* from here on the thread allocates straight from the slabs; the cache is reused */
	pcpm_tcp = &tc_dead;
	tc->free_next = free_caches;
	free_caches = tc;
	pcpm_unlock(&registry_lock);
}

void tcache_count_slow(bool is_free)
{
	atomic_fetch_add_explicit(is_free ? &nocache_free : &nocache_malloc, 1, memory_order_relaxed);
}

void tcache_uncount_slow_free(void)
{
	atomic_fetch_sub_explicit(&nocache_free, 1, memory_order_relaxed);
}

/*
 * Is p on another thread's stack of class cls?  Those stacks change under our feet, so the
 * walk decodes each link without trusting it (a link that does not lead to an object of the
 * class ends that stack's walk) and is bounded by the capacity.  Registry lock held, so no
 * cache goes away meanwhile; cold path (the free mark matched).
 */
#ifdef __SANITIZE_THREAD__ /* TSan test builds only (-Dsanitize=thread): the walk races on
			    * purpose, so it is not instrumented (test/tsan.supp) */
__attribute__((no_sanitize_thread))
#endif
static bool tcache_in_other_cache(const void *p, unsigned cls)
{
	bool found = false;
	pcpm_lock(&registry_lock);
	for (struct tcache *tc = registry; tc && !found; tc = tc->next) {
		if (tc == tcache_self())
			continue;
		/* the fast stack and a front end's (one of the two has no slots: the class's
		 * other stack is in use); each stack's top is read once and the walk bounded
		 * by its array, whose slots stay allocator metadata (a stale read finds a
		 * stale pointer, never a fault) */
		unsigned max = __atomic_load_n(&tc->slots_max[cls], __ATOMIC_RELAXED);
		for (unsigned k = 0; k < 2 && !found; k++) {
			struct tcache_bin *b = k ? &tc->sbins[cls] : &tc->bins[cls];
			void **top = __atomic_load_n(&b->top, __ATOMIC_RELAXED);
			uint16_t n = (uint16_t)(b->empty - (uint16_t)(uintptr_t)top) / sizeof(void *);
			for (unsigned i = 0; top && i < n && i < max && !found; i++)
				found = __atomic_load_n(&top[i], __ATOMIC_RELAXED) == p;
		}
	}
	pcpm_unlock(&registry_lock);
	return found;
}

void tcache_check_double_free(void *p, struct page *head, const char *call)
{
	if (unlikely(pcpm_nested()))
		return; /* the confirmation takes locks; a signal handler may not wait for them */
	struct tcache *tc = tcache_self();
	unsigned cls = head->cls;
	struct tcache_bin *own[2] = { &tc->bins[cls], &tc->sbins[cls] };
	for (unsigned k = 0; k < 2 && tc->state == TC_ACTIVE; k++)
		for (unsigned i = 0, n = tcache_bin_count(own[k]); i < n; i++)
			if (own[k]->top[i] == p)
				pcpm_fatal("%s(): double free %p", call, p);
	if (slab_object_is_free(head, p) || sheaf_holds(cls, p))
		pcpm_fatal("%s(): double free %p", call, p);
	if (tcache_in_other_cache(p, cls))
		pcpm_fatal("%s(): double free %p", call, p);
}


/* Bytes of the free objects on tc's stacks: racy reads of another thread's stacks, a
 * snapshot, as mallinfo is (a count read mid-update is off by one object, never out of its
 * array).  Registry lock held. */
static size_t tc_bytes(const struct tcache *tc)
{
	size_t bytes = 0;
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		/* (one of the class's two stacks has no slots; the other's array is
		 * slots_max) */
		unsigned max = __atomic_load_n(&tc->slots_max[c], __ATOMIC_RELAXED);
		unsigned n = MIN(tcache_bin_count(&tc->bins[c]) + tcache_bin_count(&tc->sbins[c]), max);
		bytes += (size_t)n * pcpm_class_size[c];
	}
	return bytes;
}

void tcache_stats_add(struct pcpm_stats *s)
{
	/* flagged while the lock is held: a handler that interrupts this runs in the no-wait
	 * mode, as for the slow paths (the program counter alone misses a wait in libc) */
	PCPM_INSIDE_BEGIN();
	bool locked = likely(!pcpm_nested()) ? (pcpm_lock(&registry_lock), true)
					      : pcpm_trylock(&registry_lock);
	struct tc_counts sum = dead;
	if (!locked) {
		/* a signal handler that interrupted a registry lock holder (perhaps this thread)
		 * must not wait (kernel-pcp.md §12.2): the exited threads' totals (static,
		 * racy read of counters that only grow) and this thread's own, not the others' */
		counts_add(&sum, tcache_self());
	} else {
		for (struct tcache *tc = registry; tc; tc = tc->next) {
			counts_add(&sum, tc);
			s->tcache_bytes += tc_bytes(tc);
		}
		pcpm_unlock(&registry_lock);
	}
	s->tcache_grown_bytes += __atomic_load_n(&pcpm_tcache_grown, __ATOMIC_RELAXED);
	s->malloc_calls += sum.malloc_calls;
	s->free_calls += sum.free_calls;
	s->tcache_refills += sum.refills;
	s->fbatch_flushes += sum.flushes;
	s->large_alloc += sum.large_allocs;
	PCPM_INSIDE_END();
	s->malloc_calls += atomic_load_explicit(&nocache_malloc, memory_order_relaxed);
	s->free_calls += atomic_load_explicit(&nocache_free, memory_order_relaxed);
}

size_t tcache_cached_bytes(void)
{
	size_t bytes = 0;
	if (pcpm_nested())
		return 0; /* a handler: the registry lock may be its own thread's */
	PCPM_INSIDE_BEGIN();
	pcpm_lock(&registry_lock);
	for (struct tcache *tc = registry; tc; tc = tc->next)
		bytes += tc_bytes(tc);
	pcpm_unlock(&registry_lock);
	PCPM_INSIDE_END();
	return bytes;
}

void tcache_lock_registry(void)
{
	pcpm_lock(&registry_lock);
}

void tcache_unlock_registry(void)
{
	pcpm_unlock(&registry_lock);
}

/* In a fork child only the forking thread exists: forget the other caches (their objects
 * stay allocated in the child, as with every allocator) but keep their counts. */
void tcache_fork_child(void)
{
	pcpm_lock_reset(&registry_lock);
	for (struct tcache *tc = registry; tc; tc = tc->next) {
		if (tc == tcache_self())
			continue;
		counts_add(&dead, tc);
	}
	struct tcache *me = tcache_self();
	if (me->state == TC_ACTIVE) {
		registry = me;
		me->next = me->prev = NULL;
	} else {
		registry = NULL;
	}
	pcpm_tcache_live = registry != NULL;
	pcpm_tcache_grown = registry ? me->grown : 0;
}
