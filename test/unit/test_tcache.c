/*
 * test_tcache.c - thread-cache capacities and free_high for thread caches: classes above
 * 4 KiB hold at most 32 KiB of objects; a thread that only frees (the consumer of a
 * producer/consumer pair) gives back its whole full stack and keeps one batch of room, and
 * gets its full capacity back when it allocates that class again; a thread that allocates
 * between its flushes keeps the full capacity.  Also the kmem_caches' min_partial bound.
 */
#include "unit.h"
#include "api.h"
#include "tcache.h"

#include <pthread.h>
#include <string.h>

#define N 400
static void *objs[N];
static unsigned cls;

/* Objects on this thread's stack of class c. */
static unsigned on_stack(unsigned c)
{
	return tcache_bin_count(&tcache_self()->bins[c]);
}

static void *consumer(void *arg)
{
	(void)arg;
	unsigned full = pcpm_tcache_cap[cls], batch = tcache_fbatch();
	for (int i = 0; i < N; i++)
		pcpm_free(objs[i]);
	/* only frees: the stack never held more than one batch after the first flushes */
	CHECK_EQ(tcache_self()->cap[cls], batch);
	CHECK(on_stack(cls) <= batch);
	/* allocating this class until a refill gives the full capacity back */
	void *mine[64];
	unsigned k = 0;
	while (tcache_self()->cap[cls] != full && k < 64)
		mine[k++] = pcpm_malloc(pcpm_class_size[cls]);
	CHECK_EQ(tcache_self()->cap[cls], full);
	while (k)
		pcpm_free(mine[--k]);
	return NULL;
}

static void *churner(void *arg)
{
	(void)arg;
	unsigned full = pcpm_tcache_cap[cls];
	unsigned long long seed = 7;
	void *slot[256] = { 0 };
	for (int i = 0; i < 20000; i++) {
		unsigned k = (unsigned)(rnd(&seed) % 256);
		if (slot[k])
			pcpm_free(slot[k]);
		slot[k] = pcpm_malloc(pcpm_class_size[cls]);
		CHECK(slot[k]);
	}
	/* allocations between the flushes: the capacity stays */
	CHECK_EQ(tcache_self()->cap[cls], full);
	for (int k = 0; k < 256; k++)
		pcpm_free(slot[k]);
	return NULL;
}

int main(void)
{
	CHECK(pcpm_init());
	unsigned batch = tcache_fbatch();
	/* capacities: above 4 KiB at most 32 KiB of objects, 2 to 4 (the paged classes 2) */
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		uint32_t size = pcpm_class_size[c];
		if (c >= SLAB_PAGED_FIRST) {
			CHECK_EQ(pcpm_tcache_cap[c], 2);
		} else if (size > 4096) {
			CHECK(pcpm_tcache_cap[c] >= 2 && pcpm_tcache_cap[c] <= 4);
			CHECK(pcpm_tcache_cap[c] == 2 || pcpm_tcache_cap[c] * size <= 32768);
		} else {
			CHECK(pcpm_tcache_cap[c] >= batch);
		}
	}
	CHECK_EQ(pcpm_tcache_cap[size_to_class(8192)], 4);
	CHECK_EQ(pcpm_tcache_cap[size_to_class(12288)], 2);

	/* producer here, consumer on another thread; 64 B: capacity 4 batches */
	cls = size_to_class(64);
	CHECK(pcpm_tcache_cap[cls] > batch);
	for (int i = 0; i < N; i++) {
		objs[i] = pcpm_malloc(64);
		CHECK(objs[i]);
		memset(objs[i], 0x5a, 64);
	}
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, consumer, NULL), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(pthread_create(&t, NULL, churner, NULL), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);

	/* kmem_caches keep at most 64 KiB of partial slabs (at least 2; 1 for slabs above
	 * order 3) before freeing empty ones */
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		struct kmem_cache *s = kmem_cache_of(c);
		size_t slab = (size_t)4096 << s->order;
		unsigned floor = s->order > 3 ? 1 : 2;
		CHECK(s->min_partial >= floor && s->min_partial <= 10);
		CHECK(s->min_partial == floor || s->min_partial * slab <= 65536);
	}
	printf("tcache: %u objects per batch; free_high for a freeing thread, full capacity back on refill\n",
	       batch);
	return 0;
}
