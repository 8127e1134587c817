/*
 * secure.h - the checks of PCPMALLOC_SECURE=1, the hardened mode (its front end, which runs
 * them, is secure_mode.c): checks that cost time and memory, so they are off by default and
 * the default paths do not pay for them (the mode turns the fast stacks off - capacity 0 - so
 * every call reaches api.c's one choice of front end, and the front end keeps stacks of its
 * own, sbins, popped and pushed with the checks below inlined).  A leaf: calls os.c only.
 *
 *  - small blocks (slab objects): a block of n bytes takes a slot of at least n + 8 bytes;
 *    the bytes from n to the trailer hold a canary, the last 8 bytes of the slot a trailer
 *    (n ^ address ^ key).  free() checks the trailer and the canary's first and last 8 bytes
 *    (an overflow of 1 byte or more from the end of the block hits the first): reported as
 *    "pcpmalloc: free(): heap overflow past the end of 0x...".
 *  - freed slab objects are filled with a junk byte (0xdf) past their two link words, up to
 *    SECURE_JUNK_MAX bytes; malloc checks three of its words when it hands the object out
 *    again (all of it on one reuse in SECURE_JUNK_SAMPLE per thread): a write into a free
 *    block is reported as "pcpmalloc: malloc(): write after free in 0x...".
 *  - slabs hand out their objects in random order (SLAB_FREELIST_RANDOM), shuffled when the
 *    slab is carved.
 *  - large blocks of 64 KiB and more and huge mappings end in a guard page (the bytes
 *    between the end of the request and the guard carry the canary; pcpm_os_guard_install:
 *    MADV_GUARD_INSTALL, or PROT_NONE), realloc resizes large blocks in place and moves the
 *    guard with the end; freed large blocks are junk-filled (first SECURE_JUNK_MAX bytes);
 *    a freed huge mapping's pages move (mremap) to an address no pointer knows and are
 *    cached there, its old range stays reserved PROT_NONE (huge_quarantine.c);
 *    the page descriptor array and the metadata chunks get PROT_NONE guard pages too.
 * Thread-safety: the functions only touch the block they are given.  Messages: one line,
 * then abort() (pcpm_fatal).
 */
#ifndef PCPM_SECURE_H
#define PCPM_SECURE_H

#include "os.h"

#include <string.h>

#define SECURE_TRAILER 8 /* bytes of a small slot that hold the trailer */
#define SECURE_JUNK 0xdf /* fill of freed memory */
/* Bytes of a freed block (slab object or large block) that get the junk fill. */
#define SECURE_JUNK_MAX 4096
/* One reuse of a slab object in this many (per thread) checks all of its junk; the others
 * check the two words after the link and the last junk word. */
#define SECURE_JUNK_SAMPLE 64
/* Large blocks from this size on get a guard page: below it the two mprotect calls per
 * malloc/free pair (and the split arena mapping) would cost more than the block's use;
 * smaller page runs have the canary only. */
#define SECURE_GUARD_MIN (64UL << 10)

/* pcpm_cfg.secure, copied at init for the slow paths' branch. */
extern int pcpm_secure PCPM_HIDDEN;

/* Per-process words of the checks (pcpm_secure_init, from the safe-linking key): canary is
 * the canary byte (never 0 nor SECURE_JUNK) repeated in each byte; trailer is XORed into each
 * small block's trailer. */
struct secure_keys {
	uint64_t canary, trailer;
};
extern struct secure_keys pcpm_secure_keys PCPM_HIDDEN;
/* Once at init, from the slab layer's safe-linking key. */
void pcpm_secure_init(uintptr_t link_key);

#define SECURE_JUNK_WORD (0x0101010101010101ULL * SECURE_JUNK)

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "secure.h: the small-block canary check assumes a little-endian machine"
#endif

static inline uint64_t secure_load64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void secure_store64(void *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

/* Words of a freed slot that hold junk (words 0 and 1 hold the link and the free mark). */
static inline size_t secure_junk_words(size_t slot)
{
	return (slot < SECURE_JUNK_MAX ? slot : SECURE_JUNK_MAX) / 8;
}

/* Reports a write into a free block / an overflow past a small block; both abort. */
void secure_junk_fail(const void *p, const char *call) __attribute__((noreturn, cold));
void secure_overflow(const void *p, const char *call) __attribute__((noreturn, cold));
/* The sampled full junk check of a slab object about to be handed out (all junk words),
 * then __secure_arm_small. */
void *secure_arm_small_full(void *p, size_t slot, size_t n, const char *call);

/*
 * Arms a slab object of slot bytes as a block of n bytes (n + 8 <= slot): checks three junk
 * words (words 2 and 3, right after the link, where a dangling pointer's stale fields sit,
 * and the last junk word), all of them when sample is 0, then writes canary and trailer.
 * The canary [n, slot - 8) is written as two 8-byte stores, at n and at slot - 16; one
 * shorter than 8 bytes spills into the trailer, which is written last.  Inline and free of
 * calls on the common path: it runs in the secure malloc path without the pcpm_inside flag
 * (a signal handler recognises pcpmalloc's code by the program counter).
 */
static inline __attribute__((always_inline)) void *__secure_arm_small(void *p, size_t slot,
								       size_t n, unsigned sample,
								       const char *call)
{
	const uint64_t *w = (const uint64_t *)p;
	if (likely(slot > 16)) {
		if (unlikely(!sample)) /* a tail call: the common path keeps no stack frame */
			return secure_arm_small_full(p, slot, n, call);
		uint64_t diff = (w[2] ^ SECURE_JUNK_WORD) | (w[3] ^ SECURE_JUNK_WORD) |
				(w[secure_junk_words(slot) - 1] ^ SECURE_JUNK_WORD);
		if (unlikely(diff))
			secure_junk_fail(p, call);
	}
	char *end = (char *)p + slot - SECURE_TRAILER, *from = (char *)p + n;
	uint64_t cw = pcpm_secure_keys.canary;
	secure_store64(from, cw);
	secure_store64(end - from >= 8 ? end - 8 : from, cw);
	secure_store64(end, (uint64_t)n ^ (uintptr_t)p ^ pcpm_secure_keys.trailer);
	return p;
}

/* The request size a small block's trailer records; aborts (overflow) when it is not one. */
static inline __attribute__((always_inline)) size_t __secure_small_size(const void *p, size_t slot,
									  const char *call)
{
	const char *end = (const char *)p + slot - SECURE_TRAILER;
	size_t n = (size_t)(secure_load64(end) ^ (uintptr_t)p ^ pcpm_secure_keys.trailer);
	if (unlikely(n > slot - SECURE_TRAILER))
		secure_overflow(p, call);
	return n;
}

/* Checks a live small block's canary and trailer; returns its request size.  The canary's
 * first and last 8 bytes are read (the same words arm wrote); one shorter than 8 bytes is
 * the low bytes of the word at n, compared under a mask. */
static inline __attribute__((always_inline)) size_t __secure_check_small(const void *p, size_t slot,
									   const char *call)
{
	size_t n = __secure_small_size(p, slot, call);
	const char *end = (const char *)p + slot - SECURE_TRAILER, *from = (const char *)p + n;
	size_t len = (size_t)(end - from);
	uint64_t cw = pcpm_secure_keys.canary;
	uint64_t mask = len >= 8 ? ~0ULL : (1ULL << (8 * len)) - 1;
	uint64_t diff = (secure_load64(from) ^ cw) |
			(secure_load64(len >= 8 ? end - 8 : from) ^ cw);
	if (unlikely(diff & mask))
		secure_overflow(p, call);
	return n;
}

/* Junk over [16, min(slot, SECURE_JUNK_MAX)) of a freed slab object, inline with 16-byte
 * stores, two a turn: no call (libc's memset is one for the signal-handler check, and a
 * bounded memset expands to a slow-starting rep stos). */
static inline __attribute__((always_inline)) void __secure_junk_fill(void *p, size_t slot)
{
	typedef uint64_t junk16 __attribute__((vector_size(16)));
	const junk16 jv = {SECURE_JUNK_WORD, SECURE_JUNK_WORD};
	char *q = (char *)p + 16;
	char *end = (char *)p + (slot < SECURE_JUNK_MAX ? slot : SECURE_JUNK_MAX);
	if ((end - q) & 16) { /* an odd number of 16-byte pieces */
		memcpy(q, &jv, 16);
		q += 16;
	}
	for (; q < end; q += 32) {
		memcpy(q, &jv, 16);
		memcpy(q + 16, &jv, 16);
		__asm__("" : : "r"(q)); /* keeps the loop from becoming a memset call */
	}
}

/* A small block being freed: canary and trailer checked, then the junk fill. */
static inline __attribute__((always_inline)) void __secure_free_small(void *p, size_t slot,
								       const char *call)
{
	__secure_check_small(p, slot, call);
	__secure_junk_fill(p, slot);
}

/* Out-of-line forms of the above, for the less frequent paths (slow path, memalign, signal
 * handlers, realloc). */
void *secure_arm_small(void *p, size_t slot, size_t n, const char *call);
/* The n recorded in a small block's trailer; aborts when the trailer is corrupt. */
size_t secure_small_size(const void *p, size_t slot, const char *call);
/* realloc in place: checks the canary and trailer of a live small block, then moves them to
 * the end of its new size n (n + 8 <= slot). */
void secure_resize_small(void *p, size_t slot, size_t n, const char *call);

/* The canary of [from, to) - its first and last 8 bytes, what the check reads - and its
 * check (small blocks, large blocks, huge mappings); to is 8-byte aligned in all three. */
void secure_fill_canary(char *from, char *to);
void secure_check_canary(const void *p, const char *from, const char *to, const char *call);


#endif
