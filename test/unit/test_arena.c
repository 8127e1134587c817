/*
 * test_arena.c - descriptor lookup: every byte of a block maps to its page's descriptor
 * (interior pointers included), and pointers pcpmalloc does not own - stack, static data,
 * glibc's heap, the reserved but uncommitted tail of the arena - are recognised as foreign.
 */
#include "unit.h"
#include "api.h"
#include "config.h"

static int static_var;

int main(void)
{
	int stack_var;
	pcpm_init();
	struct page *pg = zone_alloc_run(&pcpm_zone, 37, 0);
	CHECK(pg);
	char *base = page_address(pg);
	CHECK_EQ((uintptr_t)base & (PAGE_SIZE - 1), 0);
	for (size_t off = 0; off < 37 * PAGE_SIZE; off += 511) {
		struct page *d = pcpm_page_of(base + off);
		CHECK(d == pg + off / PAGE_SIZE);
		CHECK(page_address(d) == base + (off & ~(PAGE_SIZE - 1)));
	}
	/* foreign pointers */
	CHECK(pcpm_page_of(&stack_var) == NULL);
	CHECK(pcpm_page_of(&static_var) == NULL);
	void *g = malloc(100); /* glibc's malloc: this test links the core as a library */
	CHECK(pcpm_page_of(g) == NULL);
	free(g);
	CHECK(pcpm_page_of(NULL) == NULL);
	CHECK(pcpm_page_of((void *)0x1000) == NULL);
	size_t committed = atomic_load(&pcpm_arena0.committed);
	CHECK(pcpm_page_of(pcpm_arena0.base + committed) == NULL);	/* reserved only */
	CHECK(pcpm_page_of(pcpm_arena0.base + committed - 1) != NULL); /* last committed byte */
	CHECK(pcpm_page_of((void *)~0UL) == NULL);

	/* huge blocks are found through the radix map, interior pointers included */
	char *h = pcpm_malloc(9UL << 20);
	CHECK(h);
	CHECK(pcpm_page_of(h) == NULL);
	struct region *r = pcpm_region_of(h + (5UL << 20));
	CHECK(r && r->kind == REGION_HUGE && r->base == h);
	CHECK(pcpm_usable_size(h) >= (9UL << 20));
	pcpm_free(h);
	/* small and large blocks: usable sizes and the descriptors that back them */
	for (size_t n = 1; n < (1UL << 20); n = n * 3 + 1) {
		char *p = pcpm_malloc(n);
		CHECK(p);
		struct page *d = pcpm_page_of(p + n - 1);
		CHECK(d && (d->state == PG_SLAB || d->state == PG_NONE || d->state == PG_LARGE));
		CHECK(pcpm_usable_size(p) >= n);
		pcpm_free(p);
	}
	zone_free_run(&pcpm_zone, pg, 37);
	printf("arena: base %p, %zu bytes committed\n", (void *)pcpm_arena0.base, committed);
	return 0;
}
