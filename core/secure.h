/*
 * secure.h - the checks of PCPMALLOC_SECURE=1, the hardened mode (its front end, which runs
 * them, is secure_mode.c with secure_large.c): checks that cost time and memory, so they are
 * off by default and the default paths do not pay for them (the mode turns the fast stacks
 * off - capacity 0 - so every call reaches api.c's one choice of front end).  A leaf: calls
 * os.c only.  GrapheneOS hardened_malloc is the reference design; the canaries are SLUB's red
 * zones (SLAB_RED_ZONE), zero on free its init_on_free.
 *
 * A small block (slab object) of n bytes takes a slot of at least n + 32 bytes:
 *
 *   slot: | size word | canary word | n bytes of the block ... | canary to the slot's end |
 *           ^ slot       ^ slot + 8   ^ p = slot + 16 (or slot + align - 16 + 16)
 *
 *  - the 16 bytes before p: the size word (n, p's offset in the slot, XORed with the address
 *    and a key) and the canary word C = key ^ slot, the slot's live mark;
 *  - after the block, byte-exact from p + n to the slot's end (16 bytes or more), the canary
 *    pattern: the byte at address a is byte (a & 7) of C, so the word at any address is C
 *    rotated (secure_canary_at).  free() and realloc() check the header and the canary's
 *    first SECURE_CANARY_CHECK bytes and its last two words; the last two words of a slot
 *    are canary or zero in every state, so free() checks the previous slot's too, and the
 *    next slot's first two words (a link, a size word or zero; its mark);
 *  - a free slot reads zero except its first two words (free-list link, PCPM_FREE_KEY: the
 *    free mark a second free finds); free() zeroes it, malloc() checks that it still is zero
 *    (a write after free is reported when the slot is handed out again) and hands out zeroed
 *    memory, so calloc clears nothing.
 * Messages: one line, then abort() (pcpm_fatal).  Thread-safety: the functions only touch
 * the block they are given.
 */
#ifndef PCPM_SECURE_H
#define PCPM_SECURE_H

#include "os.h"

#include <string.h>

#define SECURE_HDR 16	      /* bytes in front of a small block: size word, canary word */
#define SECURE_TAIL_MIN 16    /* canary bytes after a small block, at least */
#define SECURE_SMALL_EXTRA 32 /* SECURE_HDR + SECURE_TAIL_MIN */
/* Canary bytes after a block that free() and realloc() check (then the last word). */
#define SECURE_CANARY_CHECK 64
/* Bytes of canary in front of a large block (its header included). */
#define SECURE_LARGE_FRONT 64

/* pcpm_cfg.secure, copied at init. */
extern int pcpm_secure PCPM_HIDDEN;

/*
 * The protections of secure mode that can be left out, one bit each in pcpm_secure_prot
 * (set: on; all on by default; copied at init from PCPMALLOC_SECURE_ZERO, _CANARY and
 * _QUARANTINE), so that each one's price can be measured (bench/RESULTS.md, "Secure mode:
 * what each protection costs"):
 *  - SECURE_P_ZERO: zero on free and the write-after-free check (small slots at malloc, page
 *    runs when they leave the quarantine); off, calloc clears what it hands out;
 *  - SECURE_P_CANARY: the canary after a small block and the neighbours' checks at free
 *    (the header's size and canary words stay: the live mark, the request size);
 *  - SECURE_P_QUAR: the quarantine of freed slots (the thread's ring) and page runs (the
 *    FIFO of secure_runs.c); off, a freed block is the next one of its size handed out.
 */
#define SECURE_P_ZERO 1u
#define SECURE_P_CANARY 2u
#define SECURE_P_QUAR 4u
extern unsigned pcpm_secure_prot PCPM_HIDDEN;

static inline bool secure_on(unsigned prot)
{
	return pcpm_secure_prot & prot;
}

/* Per-process words (pcpm_secure_init, from the safe-linking key and getrandom): canary
 * and size are XORed into each block's header words; fill is the canary byte of huge
 * mappings repeated (never 0). */
struct secure_keys {
	uint64_t canary, size, fill;
};
extern struct secure_keys pcpm_secure_keys PCPM_HIDDEN;
void pcpm_secure_init(uintptr_t link_key);

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "secure.h: the canary pattern assumes a little-endian machine"
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

/* The canary word of the slot (or large block) starting at base: the key XOR the address,
 * with no zero byte, so that the commonest overflow, a string's terminating NUL one byte
 * past the end, always changes it (a random byte would match 1 time in 256). */
static inline uint64_t secure_canary(const void *base)
{
	return (pcpm_secure_keys.canary ^ (uintptr_t)base) | 0x0101010101010101ULL;
}

/* The 8 canary bytes at address a, as one (unaligned) word: c rotated by a's byte offset. */
static inline uint64_t secure_canary_at(uint64_t c, const void *a)
{
	unsigned s = 8 * ((uintptr_t)a & 7);
	return s ? (c >> s) | (c << (64 - s)) : c;
}

/* The size word of a block of n bytes at p, off bytes into its slot (or page run). */
static inline uint64_t secure_size_word(const void *p, size_t n, size_t off)
{
	return ((uint64_t)n | (uint64_t)off << 32) ^ (uintptr_t)p ^ pcpm_secure_keys.size;
}

/* Reports; all abort. */
void secure_overflow(const void *p, const char *call) __attribute__((noreturn, cold));
void secure_underflow(const void *p, const char *call) __attribute__((noreturn, cold));
void secure_uaf(const void *p, const char *call) __attribute__((noreturn, cold));
void secure_double_free(const void *p, const char *call) __attribute__((noreturn, cold));
void secure_size_mismatch(const void *p, size_t size, size_t n, const char *call)
	__attribute__((noreturn, cold));

/* Writes the canary over [from, end) (end 16-byte aligned, end - from >= 16): its first
 * SECURE_CANARY_CHECK bytes and more, and its last two words, the bytes the check reads.
 * The last two words first, whole and aligned (the neighbouring slot's free reads them from
 * another thread, small_check_neighbours, and must see them whole); then the bytes up to
 * the first word boundary in one unaligned store, which may reach into the last two words
 * but writes there the bytes they already hold (the pattern is a function of the address),
 * so no reader sees a word half changed; then whole aligned words.  (Before, the bytes up
 * to the boundary went one by one whenever fewer than 24 canary bytes followed the block,
 * half of wl-churn's mallocs: about 15 instructions each.) */
static inline __attribute__((always_inline)) void secure_canary_fill(uint64_t c, char *from,
								     char *end)
{
	secure_store64(end - 16, c);
	secure_store64(end - 8, c);
	__asm__("" ::: "memory"); /* the aligned words before the unaligned store */
	secure_store64(from, secure_canary_at(c, from));
	char *a = (char *)ALIGN_UP((uintptr_t)from, 8);
	char *lim = a + SECURE_CANARY_CHECK < end - 16 ? a + SECURE_CANARY_CHECK : end - 16;
	for (char *q = a; q < lim; q += 8)
		secure_store64(q, c);
}

/* Checks what secure_canary_fill wrote; aborts (overflow past p's end) when it changed. */
static inline __attribute__((always_inline)) void
secure_canary_check(uint64_t c, const char *from, const char *end, const void *p, const char *call)
{
	const char *lim = end - 16 < from + SECURE_CANARY_CHECK ? end - 16 : from + SECURE_CANARY_CHECK;
	uint64_t cr = secure_canary_at(c, from);
	uint64_t diff = (secure_load64(end - 16) ^ c) | (secure_load64(end - 8) ^ c);
	for (const char *q = from; q < lim; q += 8)
		diff |= secure_load64(q) ^ cr;
	if (unlikely(diff))
		secure_overflow(p, call);
}

/* secure_arm without the canary (SECURE_P_CANARY off): the header's size word and the
 * canary word, the live mark, only.  Returns slot + off. */
static inline __attribute__((always_inline)) void *secure_arm_header(char *slot, size_t n,
								     size_t off)
{
	char *p = slot + off;
	uint64_t c = secure_canary(slot);
	secure_store64(p - 16, secure_size_word(p, n, off));
	secure_store64(p - 8, c);
	if (off > SECURE_HDR)
		secure_store64(slot + 8, c);
	return p;
}

/*
 * Arms the zeroed slot of size bytes as a block of n bytes at slot + off (off: 16, or the
 * alignment; n + off + 16 <= size): header at p - 16, canary from p + n to the slot's end;
 * with off > 16 the slot's own first words carry the live mark as well.  Returns p.
 */
static inline __attribute__((always_inline)) void *secure_arm(char *slot, size_t size, size_t n,
							      size_t off)
{
	char *p = secure_arm_header(slot, n, off);
	secure_canary_fill(secure_canary(slot), p + n, slot + size);
	return p;
}

/* Zero checks and fills of [from, to) (both 16-byte aligned: aligned loads), inline with 16-byte vectors: no
 * call (the secure paths run without the pcpm_inside flag; a signal handler recognises
 * pcpmalloc's code by the program counter, libc's memset is not).  Aligned vector accesses:
 * the compiler folds each load into its OR (one instruction per 16 bytes). */
typedef uint64_t secure_v16 __attribute__((vector_size(16), may_alias));

static inline __attribute__((always_inline)) bool secure_is_zero(const char *from, const char *to)
{
	/* 128 bytes per iteration into four independent accumulators: with unaligned loads
	 * and 64 bytes per iteration the loop took 13 instructions per 64 bytes, 105 per
	 * malloc of wl-larson-sized's 8-1000 B blocks (callgrind); now 11 per 128.  From 64
	 * bytes on, the last 64 are read as one block that ends at to, overlapping what the
	 * loop read: no loop over the last 16-byte pieces (3-4 instructions each) */
	const secure_v16 *q = (const secure_v16 *)__builtin_assume_aligned(from, 16);
	const secure_v16 *e = (const secure_v16 *)to;
	secure_v16 a0 = {0, 0}, a1 = {0, 0}, a2 = {0, 0}, a3 = {0, 0};
	if (e - q < 4) {
		for (; q < e; q++)
			a0 |= *q;
		return !(a0[0] | a0[1]);
	}
	for (; e - q > 8; q += 8) {
		a0 |= q[0] | q[4];
		a1 |= q[1] | q[5];
		a2 |= q[2] | q[6];
		a3 |= q[3] | q[7];
	}
	if (e - q > 4) {
		a0 |= q[0];
		a1 |= q[1];
		a2 |= q[2];
		a3 |= q[3];
	}
	a0 |= e[-4];
	a1 |= e[-3];
	a2 |= e[-2];
	a3 |= e[-1];
	a0 |= a1 | a2 | a3;
	return !(a0[0] | a0[1]);
}

/* Above this many bytes secure_zero calls memset (libc's, with the widest stores the CPU
 * has); below, the call and its dispatch cost more than the 16-byte stores. */
#define SECURE_ZERO_MEMSET 512

static inline __attribute__((always_inline)) void secure_zero(char *from, char *to)
{
	if (to - from >= SECURE_ZERO_MEMSET) {
		memset(from, 0, (size_t)(to - from));
		return;
	}
	const secure_v16 z = {0, 0};
	secure_v16 *q = (secure_v16 *)__builtin_assume_aligned(from, 16), *e = (secure_v16 *)to;
	if (e - q < 4) {
		for (; q < e; q++) {
			*q = z;
			__asm__("" : : "r"(q)); /* keeps the loop from becoming a memset call */
		}
		return;
	}
	/* 64 bytes per iteration (7 instructions, not 16), then the last 64 bytes as one block
	 * that ends at to, over what the loop cleared: no loop over 16-byte pieces */
	for (; e - q > 4; q += 4) {
		q[0] = z;
		q[1] = z;
		q[2] = z;
		q[3] = z;
		__asm__("" : : "r"(q));
	}
	e[-4] = z;
	e[-3] = z;
	e[-2] = z;
	e[-1] = z;
}

/* The canary of huge mappings: [from, to) filled with the fill byte, its first and last 8
 * bytes checked (to is 8-byte aligned). */
void secure_fill_canary(char *from, char *to);
void secure_check_canary(const void *p, const char *from, const char *to, const char *call);

#endif
