/*
 * secure.c - the checks of PCPMALLOC_SECURE=1 (see secure.h; the front end that runs them is
 * secure_mode.c).  The canary idea is that of
 * SLUB's red zones (SLAB_RED_ZONE) and the junk fill that of its poisoning (SLAB_POISON,
 * POISON_FREE); the random object order mirrors CONFIG_SLAB_FREELIST_RANDOM.
 */
#include "secure.h"

#include <string.h>

int pcpm_secure PCPM_HOT;
struct secure_keys pcpm_secure_keys PCPM_HOT;

static inline uint8_t canary_byte(uintptr_t link_key)
{
	uint8_t c = (uint8_t)(link_key >> 24);
	return c == SECURE_JUNK || c == 0 ? 0xa5 : c;
}

void pcpm_secure_init(uintptr_t link_key)
{
	pcpm_secure_keys.canary = 0x0101010101010101ULL * canary_byte(link_key);
	pcpm_secure_keys.trailer = link_key >> 1;
}

void secure_overflow(const void *p, const char *call)
{
	pcpm_fatal("%s(): heap overflow past the end of %p", call, p);
}

void secure_junk_fail(const void *p, const char *call)
{
	pcpm_fatal("%s(): write after free in %p", call, p);
}

void *secure_arm_small_full(void *p, size_t slot, size_t n, const char *call)
{
	const uint64_t *w = (const uint64_t *)p;
	uint64_t diff = 0;
	/* OR the differences, test once: vectorises */
	for (size_t i = 2, nw = secure_junk_words(slot); i < nw; i++)
		diff |= w[i] ^ SECURE_JUNK_WORD;
	if (unlikely(diff))
		secure_junk_fail(p, call);
	return __secure_arm_small(p, slot, n, 1, call);
}

size_t secure_small_size(const void *p, size_t slot, const char *call)
{
	return __secure_small_size(p, slot, call);
}

/*
 * The canary of large blocks and huge mappings (small blocks: __secure_arm_small and
 * __secure_check_small in secure.h) is checked at its first and its last 8 bytes only
 * (unaligned loads, overlapping when it is shorter than 16): an overflow running on from the
 * end of the block always hits the first, one that skips ahead to the end of the page the
 * last.  A canary shorter than 8 bytes ends on a word boundary (pages are multiples of 4096):
 * it is the top bytes of the word before `to`, checked and written with a mask.
 */
static inline uint64_t canary_mask(size_t len) /* len 1..7: the top len bytes of a word */
{
	return ~0ULL << (8 * (8 - len));
}

static inline void check_canary(const void *p, const char *from, const char *to, const char *call)
{
	uint64_t cw = pcpm_secure_keys.canary, a, b;
	size_t len = (size_t)(to - from);
	if (likely(len >= 8)) {
		memcpy(&a, from, 8);
		memcpy(&b, to - 8, 8);
		if (unlikely((a ^ cw) | (b ^ cw)))
			secure_overflow(p, call);
	} else if (len && !((uintptr_t)to & 7)) {
		memcpy(&a, to - 8, 8);
		if (unlikely((a ^ cw) & canary_mask(len)))
			secure_overflow(p, call);
	} else {
		for (const char *q = from; q < to; q++)
			if (unlikely((uint8_t)*q != (uint8_t)cw))
				secure_overflow(p, call);
	}
}

static inline void fill_canary(char *from, char *to)
{
	uint64_t cw = pcpm_secure_keys.canary, a;
	size_t len = to > from ? (size_t)(to - from) : 0;
	if (likely(len >= 8)) {
		memcpy(from, &cw, 8);
		memcpy(to - 8, &cw, 8);
	} else if (len && !((uintptr_t)to & 7)) {
		uint64_t m = canary_mask(len);
		memcpy(&a, to - 8, 8);
		a = (a & ~m) | (cw & m);
		memcpy(to - 8, &a, 8);
	} else {
		for (char *q = from; q < to; q++)
			*q = (char)cw;
	}
}

void secure_check_canary(const void *p, const char *from, const char *to, const char *call)
{
	check_canary(p, from, to, call);
}

void secure_fill_canary(char *from, char *to)
{
	fill_canary(from, to);
}

void secure_resize_small(void *p, size_t slot, size_t n, const char *call)
{
	__secure_check_small(p, slot, call);
	char *end = (char *)p + slot - SECURE_TRAILER, *from = (char *)p + n;
	uint64_t cw = pcpm_secure_keys.canary;
	secure_store64(from, cw);
	secure_store64(end - from >= 8 ? end - 8 : from, cw);
	secure_store64(end, (uint64_t)n ^ (uintptr_t)p ^ pcpm_secure_keys.trailer);
}

/* Sampling of the full junk check: a per-thread countdown, so no shared cache line. */
static __thread unsigned junk_sample __attribute__((tls_model("initial-exec")));

void *secure_arm_small(void *p, size_t slot, size_t n, const char *call)
{
	if (++junk_sample >= SECURE_JUNK_SAMPLE)
		junk_sample = 0;
	return __secure_arm_small(p, slot, n, junk_sample, call);
}
