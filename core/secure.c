/*
 * secure.c - the checks of PCPMALLOC_SECURE=1 (see secure.h).  The canary idea is that of
 * SLUB's red zones (SLAB_RED_ZONE) and the junk fill that of its poisoning (SLAB_POISON,
 * POISON_FREE); the random object order mirrors CONFIG_SLAB_FREELIST_RANDOM.
 */
#include "secure.h"

#include <string.h>

int pcpm_secure;

static inline uint8_t canary_byte(void)
{
	uint8_t c = (uint8_t)(pcpm_link_key >> 24);
	return c == SECURE_JUNK || c == 0 ? 0xa5 : c;
}

static inline uint64_t trailer_of(const void *p, size_t n)
{
	return (uint64_t)n ^ (uintptr_t)p ^ (pcpm_link_key >> 1);
}

static PCPM_COLD __attribute__((noreturn)) void overflow(const char *call, const void *p)
{
	pcpm_fatal("%s(): heap overflow past the end of %p", call, p);
}

void *secure_arm_small(void *p, size_t slot, size_t n, const char *call)
{
	/* words 0 and 1 held the free-list link and the free mark; slots are multiples of 16
	 * bytes, so the rest is whole words: OR the differences, test once (vectorises) */
	const uint64_t *w = (const uint64_t *)p + 2;
	uint64_t diff = 0;
	for (size_t i = 0; i < slot / 8 - 2; i++)
		diff |= w[i] ^ (0x0101010101010101ULL * SECURE_JUNK);
	if (unlikely(diff))
		pcpm_fatal("%s(): write after free in %p", call, p);
	char *end = (char *)p + slot - SECURE_TRAILER;
	memset((char *)p + n, canary_byte(), (size_t)(end - ((char *)p + n)));
	uint64_t t = trailer_of(p, n);
	memcpy(end, &t, sizeof(t));
	return p;
}

size_t secure_small_size(const void *p, size_t slot, const char *call)
{
	uint64_t t;
	memcpy(&t, (const char *)p + slot - SECURE_TRAILER, sizeof(t));
	size_t n = (size_t)(t ^ trailer_of(p, 0));
	if (unlikely(n > slot - SECURE_TRAILER))
		overflow(call, p);
	return n;
}

void secure_check_canary(const void *p, const char *from, const char *to, const char *call)
{
	uint8_t c = canary_byte();
	const char *q = from;
	for (; q < to && ((uintptr_t)q & 7); q++)
		if (unlikely((uint8_t)*q != c))
			overflow(call, p);
	uint64_t cw = 0x0101010101010101ULL * c, diff = 0;
	for (; q + 8 <= to; q += 8) /* whole words: OR the differences, test once */
		diff |= *(const uint64_t *)q ^ cw;
	for (; q < to; q++)
		diff |= (uint8_t)*q ^ c;
	if (unlikely(diff))
		overflow(call, p);
}

void secure_fill_canary(char *from, char *to)
{
	if (to > from)
		memset(from, canary_byte(), (size_t)(to - from));
}

void secure_free_small(void *p, size_t slot, const char *call)
{
	size_t n = secure_small_size(p, slot, call);
	secure_check_canary(p, (char *)p + n, (char *)p + slot - SECURE_TRAILER, call);
	memset((char *)p + 16, SECURE_JUNK, slot - 16);
}

uint64_t secure_random(void)
{
	static _Atomic uint64_t ctr;
	static uint64_t seed;
	if (unlikely(!seed))
		seed = pcpm_random64();
	uint64_t z = seed + atomic_fetch_add_explicit(&ctr, 0x9e3779b97f4a7c15ULL, memory_order_relaxed);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void secure_slab_init(struct page *head, uint32_t size, uint32_t objects)
{
	uint16_t order[(PAGE_SIZE << PAGE_ALLOC_COSTLY_ORDER) / 16];
	for (uint32_t i = 0; i < objects; i++)
		order[i] = (uint16_t)i;
	for (uint32_t i = objects - 1; i > 0; i--) { /* Fisher-Yates */
		uint32_t j = (uint32_t)(secure_random() % (i + 1));
		uint16_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	memset(head->addr, SECURE_JUNK, (size_t)size * objects);
	void *next = NULL;
	for (uint32_t i = 0; i < objects; i++) {
		char *o = head->addr + (size_t)order[i] * size;
		fl_store(o, next);
		((uintptr_t *)o)[1] = pcpm_free_key;
		next = o;
	}
	head->freelist = next;
	head->carved = (uint16_t)objects;
}
