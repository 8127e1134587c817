/*
 * test_slab.c - the size class table and the kmem_cache layer: every request size maps to
 * the smallest class that fits, classes keep 16-byte alignment and bounded waste, the
 * reciprocal gives exact object indexes, bulk alloc/free hands out distinct objects inside
 * their slabs and empty slabs go back, and every slab page's fast descriptor (16 bytes, four
 * to a cache line) carries what free's fast path reads, cleared when the slab goes back.
 */
#include "unit.h"
#include "config.h"
#include "slab.h"
#include "topology.h"

#include <string.h>

int main(void)
{
	pcpm_config_init();
	pcpm_topology_init();
	pcpm_zone_init(&pcpm_zone);
	pcpm_pcp_init();
	pcpm_slab_init(0);

	/* table: sizes strictly increase, 16-aligned, top class is 16 KiB */
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		CHECK_EQ(pcpm_class_size[c] % 16, 0);
		if (c)
			CHECK(pcpm_class_size[c] > pcpm_class_size[c - 1]);
		/* waste bound: above 128 B a request of (previous class + 1) wastes < 1/8 (the
		 * paged classes: one SLAB_PAGED_STEP, a page multiple) */
		if (c >= SLAB_PAGED_FIRST) {
			CHECK_EQ(pcpm_class_size[c] - pcpm_class_size[c - 1], SLAB_PAGED_STEP);
			CHECK_EQ(pcpm_class_size[c] % PAGE_SIZE, 0);
		} else if (c > 8) {
			uint32_t prev = pcpm_class_size[c - 1], cur = pcpm_class_size[c];
			CHECK((cur - prev - 1) * 8 <= cur);
		}
	}
	CHECK_EQ(pcpm_class_size[0], 16);
	CHECK_EQ(pcpm_class_size[SLAB_PAGED_FIRST - 1], SLAB_MAX_SIZE);
	CHECK_EQ(pcpm_class_size[NR_SIZE_CLASSES - 1], SLAB_PAGED_MAX);
	/* every size maps to the smallest class that holds it, fast path == formula */
	for (size_t n = 0; n <= SLAB_MAX_SIZE; n++) {
		unsigned c = size_to_class(n);
		CHECK_EQ(c, size_to_class_slow(n));
		CHECK(pcpm_class_size[c] >= n);
		if (c)
			CHECK(pcpm_class_size[c - 1] < n);
	}
	/* the paged classes: the smallest that holds the request */
	for (size_t n = SLAB_MAX_SIZE + 1; n <= SLAB_PAGED_MAX; n++) {
		unsigned c = size_to_paged_class(n);
		CHECK_EQ(c, size_to_class_slow(n));
		CHECK(c >= SLAB_PAGED_FIRST && c < NR_SIZE_CLASSES);
		CHECK(pcpm_class_size[c] >= n && pcpm_class_size[c - 1] < n);
	}
	/* caches are set up at their first use, once */
	CHECK_EQ(pcpm_caches[5].size, 0);
	CHECK(kmem_cache_of(5) == &pcpm_caches[5]);
	CHECK_EQ(pcpm_caches[5].size, pcpm_class_size[5]);
	CHECK_EQ(pcpm_caches[5].cls, 5);
	/* exact object index for every offset of every slab */
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c++) {
		struct kmem_cache *s = kmem_cache_of(c);
		CHECK(s->order <= (c >= SLAB_PAGED_FIRST ? SLAB_MAX_ORDER : s->size > 8192 ? 4 : 3));
		/* paged classes: at most 1/8 of the slab wasted, or the least of orders 3..max */
		if (c >= SLAB_PAGED_FIRST && (PAGE_SIZE << s->order) % s->size > (PAGE_SIZE << s->order) / 8)
			for (unsigned o = 3; o <= SLAB_MAX_ORDER; o++)
				CHECK((PAGE_SIZE << o) % s->size > (PAGE_SIZE << o) / 8);
		CHECK(s->objects >= 1);
		CHECK((PAGE_SIZE << s->order) % s->size <= (PAGE_SIZE << s->order) / 2);
		for (size_t off = 0; off < (PAGE_SIZE << s->order); off++)
			CHECK_EQ((off * s->reciprocal) >> 32, off / s->size);
		/* the free fast path's one compare (slab_fast_lim): for every offset of the slab
		 * and every carved count, "an object's start, below carved" exactly */
		CHECK(s->lim_step >= 1 && s->lim_step <= s->size);
		for (uint32_t off = 0; off < (PAGE_SIZE << s->order); off++) {
			uint32_t low = off * s->reciprocal;
			if (off % s->size == 0 && off / s->size <= s->objects)
				CHECK_EQ(low, (off / s->size) * s->lim_step);
			else
				CHECK(low >= slab_fast_lim(s, s->objects));
			CHECK(!(low < slab_fast_lim(s, 0)));
		}
	}

	/* bulk: objects distinct, inside a PG_SLAB page of the right class, index valid */
	for (unsigned c = 0; c < NR_SIZE_CLASSES; c = c + 7 < SLAB_PAGED_FIRST ? c + 7 : c == SLAB_PAGED_FIRST + 1 ? NR_SIZE_CLASSES : SLAB_PAGED_FIRST + 1) {
		struct kmem_cache *s = &pcpm_caches[c];
		enum { N = 3000 };
		static void *objs[N + 31];
		int n = 0;
		while (n < N) {
			unsigned got = slab_alloc_bulk(c, 5, 31, &objs[n], 0);
			CHECK(got >= 5 && got <= 31);
			for (unsigned i = 0; i < got; i++) /* marked free until handed out */
				CHECK_EQ(((uintptr_t *)objs[n + i])[1], PCPM_FREE_KEY);
			n += (int)got;
		}
		for (int i = 0; i < n; i++) {
			struct page *pg = pcpm_page_of(objs[i]);
			CHECK(pg && pg->state == PG_SLAB);
			CHECK_EQ(pg->cls, c);
			CHECK(slab_obj_index(pg->slab_head, objs[i]) >= 0);
			CHECK(slab_obj_index(pg->slab_head, (char *)objs[i] + 8) < 0);
			/* the fast descriptor (arena.h: struct page_fast) of the object's page:
			 * 16 bytes, four pages to a cache line, with what free's fast path reads,
			 * and its one compare passes the object and fails an interior pointer */
			struct page_fast *fp = page_fast(pg);
			CHECK_EQ((char *)page_fast(pg + 1) - (char *)fp, 16);
			CHECK_EQ((uintptr_t)page_fast(pg - (page_pfn(pg) & 3)) % 64, 0);
			CHECK_EQ(fp->addr_lo, (uint32_t)(uintptr_t)pg->slab_head->addr);
			CHECK_EQ(fp->reciprocal, s->reciprocal);
			CHECK_EQ(fp->bin8, 2 * c);
			CHECK_EQ(fp->cls, c);
			uint32_t soff = (uint32_t)(uintptr_t)objs[i] - fp->addr_lo;
			CHECK(soff * fp->reciprocal < fp->fast_lim);
			CHECK(!((soff + 8) * fp->reciprocal < fp->fast_lim));
			memset(objs[i], (int)i, s->size);
		}
		struct page_fast *fp0 = page_fast(pcpm_page_of(objs[0]));
		/* no overlap: sort addresses and compare neighbours */
		for (int i = 1; i < n; i++) {
			void *v = objs[i];
			int j = i - 1;
			while (j >= 0 && objs[j] > v) {
				objs[j + 1] = objs[j];
				j--;
			}
			objs[j + 1] = v;
		}
		for (int i = 1; i < n; i++)
			CHECK((char *)objs[i] - (char *)objs[i - 1] >= (long)s->size);
		uint64_t slabs = s->nr_slabs;
		CHECK(slabs >= (uint64_t)(n + s->objects - 1) / s->objects);
		/* back in batches of up to 31, as the caches give them: some from one slab,
		 * some spread over more slabs than one call links chains for */
		for (int i = 0; i < n; i += 31) {
			int k = n - i < 31 ? n - i : 31;
			for (int j = 0; j < k; j++)
				((uintptr_t *)objs[i + j])[1] = PCPM_FREE_KEY;
			slab_free_bulk(c, &objs[i], (unsigned)k);
		}
		/* empty slabs went back to the pcp beyond min_partial */
		CHECK(s->nr_slabs <= s->min_partial);
		CHECK(s->slab_free > 0 || slabs <= s->min_partial);
		CHECK(slab_shrink_all() > 0 || s->nr_slabs == 0);
		CHECK_EQ(s->nr_slabs, 0);
		CHECK_EQ(fp0->fast_lim, 0); /* a discarded slab's pages: no object there */
	}
	/* every page the slabs took is back in the zone, the order-4/5 slabs that come in
	 * batches (pcp_alloc_bulk) included: MAX(pcp_alloc_bulk(...), 0) once called it twice
	 * and the first batch never came back */
	pcp_drain_all();
	CHECK(pcpm_zone.managed_pages > 0);
	CHECK_EQ(pcpm_zone.free_pages, pcpm_zone.managed_pages);
	printf("slab: %d classes, 16..%d bytes\n", NR_SIZE_CLASSES, SLAB_MAX_SIZE);
	return 0;
}
