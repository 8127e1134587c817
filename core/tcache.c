/*
 * tcache.c - thread-cache slow paths: refill, flush, set-up and teardown (see tcache.h).
 */
#include "tcache.h"
#include "config.h"
#include "topology.h"
#include "vgmode.h"

#include <pthread.h>

__thread struct tcache pcpm_tc __attribute__((tls_model("initial-exec")));
uintptr_t pcpm_free_key;
uint16_t pcpm_tcache_cap[NR_SIZE_CLASSES];
static unsigned fbatch;

static pthread_key_t tc_key;
static pcpm_lock_t registry_lock = PCPM_LOCK_INIT;
static struct tcache *registry;
/* counters of caches that are gone (thread exit) and of calls made without a cache */
static struct {
	uint64_t malloc_calls, free_calls, refills, flushes, large_allocs;
} dead;
static _Atomic uint64_t nocache_malloc, nocache_free;

static void tcache_thread_exit(void *arg);

void pcpm_tcache_init(void)
{
	/* Free batch sized by CPU count, as Tim Chen's pagevec patch: 31 above 64 CPUs. */
	fbatch = pcpm_cfg.fbatch != AUTO ? (unsigned)pcpm_cfg.fbatch : (pcpm_nr_cpus > 64 ? 31 : 15);
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		/* Capacity by object size, in the spirit of SLUB's sheaf capacity (4/12/26/60,
		 * doubled for main + spare), never below one batch. */
		uint32_t size = pcpm_class_size[c];
		unsigned cap = size <= 256 ? 4 * fbatch : size <= 1024 ? 2 * fbatch : size <= 4096 ? fbatch : 4;
		/* 0: every call to the slab (PCPMALLOC_TCACHE=0, and memcheck mode, whose
		 * annotations live on the slow paths) */
		pcpm_tcache_cap[c] = pcpm_cfg.tcache && !pcpm_vg ? (uint16_t)cap : 0;
	}
	pcpm_free_key = (uintptr_t)pcpm_random64();
	pthread_key_create(&tc_key, tcache_thread_exit);
}

unsigned tcache_fbatch(void)
{
	return fbatch;
}

static inline unsigned batch_for(unsigned cls)
{
	unsigned cap = pcpm_tcache_cap[cls];
	return cap < fbatch ? cap : fbatch;
}

void tcache_setup(void)
{
	struct tcache *tc = &pcpm_tc;
	if (tc->state != TC_UNINIT)
		return;
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
		tc->bins[c].avail = pcpm_tcache_cap[c];
	tc->state = TC_ACTIVE;
	pcpm_lock(&registry_lock);
	tc->next = registry;
	tc->prev = NULL;
	if (registry)
		registry->prev = tc;
	registry = tc;
	pcpm_unlock(&registry_lock);
	pthread_setspecific(tc_key, tc);
}

/* Objects in the cache to the slab: the n on top of the stack. */
static inline unsigned bin_count(struct tcache *tc, unsigned cls)
{
	return pcpm_tcache_cap[cls] - tc->bins[cls].avail;
}

static void flush_bin(struct tcache *tc, unsigned cls, unsigned n)
{
	struct tcache_bin *b = &tc->bins[cls];
	if (n > bin_count(tc, cls))
		n = bin_count(tc, cls);
	if (!n)
		return;
	void *first = b->head, *last = first;
	for (unsigned i = 1; i < n; i++)
		last = *(void **)last;
	b->head = *(void **)last;
	*(void **)last = NULL;
	b->avail += n;
	tc->flushes++;
	slab_free_bulk(cls, first, n);
}

void *tcache_alloc_slow(unsigned cls)
{
	struct tcache *tc = &pcpm_tc;
	tcache_ensure();
	void *head = tcache_pop(cls);
	if (head)
		return head;
	if (tc->state != TC_ACTIVE) {
		/* no cache (disabled, or after thread exit): one object straight from the slab */
		if (!slab_alloc_bulk(cls, 1, &head, 0))
			return NULL;
		atomic_fetch_add_explicit(&nocache_malloc, 1, memory_order_relaxed);
		((uintptr_t *)head)[1] = 0;
		return head;
	}
	struct tcache_bin *b = &tc->bins[cls];
	unsigned want = batch_for(cls);
	if (want > b->avail)
		want = b->avail;
	unsigned got = slab_alloc_bulk(cls, want ? want : 1, &head, pcpm_free_key);
	if (!got)
		return NULL;
	tc->refills++;
	/* hand out the first, keep the rest */
	void *p = head;
	b->head = *(void **)p;
	b->avail -= got - 1;
	((uintptr_t *)p)[1] = 0;
	tc->malloc_calls++;
	return p;
}

void tcache_free_slow(void *p, unsigned cls)
{
	struct tcache *tc = &pcpm_tc;
	tcache_ensure();
	if (tc->state != TC_ACTIVE) {
		((uintptr_t *)p)[1] = pcpm_free_key;
		*(void **)p = NULL;
		atomic_fetch_add_explicit(&nocache_free, 1, memory_order_relaxed);
		slab_free_bulk(cls, p, 1);
		return;
	}
	flush_bin(tc, cls, batch_for(cls));
	if (!tcache_push(p, cls)) {
		((uintptr_t *)p)[1] = pcpm_free_key;
		*(void **)p = NULL;
		slab_free_bulk(cls, p, 1);
	}
}

void tcache_count_slow(bool is_free)
{
	atomic_fetch_add_explicit(is_free ? &nocache_free : &nocache_malloc, 1, memory_order_relaxed);
}

void tcache_check_double_free(void *p, struct page *head, const char *call)
{
	struct tcache *tc = &pcpm_tc;
	unsigned cls = head->cls;
	unsigned limit = tc->state == TC_ACTIVE ? bin_count(tc, cls) : 0;
	for (void *o = tc->bins[cls].head; o && limit; o = *(void **)o, limit--)
		if (o == p)
			pcpm_fatal("%s(): double free %p", call, p);
	if (slab_object_is_free(head, p))
		pcpm_fatal("%s(): double free %p", call, p);
}

void tcache_flush_all(struct tcache *tc)
{
	if (tc->state != TC_ACTIVE)
		return;
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
		flush_bin(tc, c, bin_count(tc, c));
}

/*
 * pthread key destructor: flush everything, then mark the cache dead so that allocations
 * made by destructors that run after this one go straight to the slabs.
 */
static void tcache_thread_exit(void *arg)
{
	struct tcache *tc = arg;
	if (tc != &pcpm_tc || tc->state != TC_ACTIVE)
		return;
	tcache_flush_all(tc);
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++)
		tc->bins[c].avail = 0;
	tc->state = TC_DEAD;
	pcpm_lock(&registry_lock);
	if (tc->prev)
		tc->prev->next = tc->next;
	else
		registry = tc->next;
	if (tc->next)
		tc->next->prev = tc->prev;
	dead.malloc_calls += tc->malloc_calls;
	dead.free_calls += tc->free_calls;
	dead.refills += tc->refills;
	dead.flushes += tc->flushes;
	dead.large_allocs += tc->large_allocs;
	pcpm_unlock(&registry_lock);
}

void tcache_stats_add(struct pcpm_stats *s)
{
	pcpm_lock(&registry_lock);
	s->malloc_calls += dead.malloc_calls;
	s->free_calls += dead.free_calls;
	s->tcache_refills += dead.refills;
	s->fbatch_flushes += dead.flushes;
	s->large_alloc += dead.large_allocs;
	for (struct tcache *tc = registry; tc; tc = tc->next) {
		s->malloc_calls += tc->malloc_calls;
		s->free_calls += tc->free_calls;
		s->tcache_refills += tc->refills;
		s->fbatch_flushes += tc->flushes;
		s->large_alloc += tc->large_allocs;
	}
	pcpm_unlock(&registry_lock);
	s->malloc_calls += atomic_load_explicit(&nocache_malloc, memory_order_relaxed);
	s->free_calls += atomic_load_explicit(&nocache_free, memory_order_relaxed);
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
		if (tc == &pcpm_tc)
			continue;
		dead.malloc_calls += tc->malloc_calls;
		dead.free_calls += tc->free_calls;
		dead.refills += tc->refills;
		dead.flushes += tc->flushes;
		dead.large_allocs += tc->large_allocs;
	}
	if (pcpm_tc.state == TC_ACTIVE) {
		registry = &pcpm_tc;
		pcpm_tc.next = pcpm_tc.prev = NULL;
	} else {
		registry = NULL;
	}
}
