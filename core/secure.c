/*
 * secure.c - the keys and reports of PCPMALLOC_SECURE=1 and the canary of huge mappings (see
 * secure.h; the front end that runs the checks is secure_mode.c).  Calls os.c only.
 */
#include "secure.h"

#include <string.h>

int pcpm_secure PCPM_HOT;
unsigned pcpm_secure_prot PCPM_HOT = SECURE_P_ZERO | SECURE_P_CANARY | SECURE_P_QUAR;
struct secure_keys pcpm_secure_keys PCPM_HOT;

void pcpm_secure_init(uintptr_t link_key)
{
	uint8_t b = (uint8_t)(link_key >> 24);
	pcpm_secure_keys.fill = 0x0101010101010101ULL * (b ? b : 0xa5);
	pcpm_secure_keys.size = link_key >> 1;
	uint64_t c = pcpm_random64();
	pcpm_secure_keys.canary = c ? c : 0x5ca1ab1e0ddba11ULL;
}

void secure_overflow(const void *p, const char *call)
{
	pcpm_fatal("%s(): heap overflow past the end of %p", call, p);
}

void secure_underflow(const void *p, const char *call)
{
	pcpm_fatal("%s(): heap underflow before %p", call, p);
}

void secure_uaf(const void *p, const char *call)
{
	pcpm_fatal("%s(): write after free in %p", call, p);
}

void secure_double_free(const void *p, const char *call)
{
	pcpm_fatal("%s(): double free %p", call, p);
}

void secure_size_mismatch(const void *p, size_t size, size_t n, const char *call)
{
	pcpm_fatal("%s(): size %zu for %p, a block of %zu bytes", call, size, p, n);
}

/*
 * The canary of huge mappings fills the whole gap between the block's end and its tail guard
 * page (less than a page: at most 4 KiB written at allocation and read at free, small beside
 * a mapping of 4 MiB and more), so a write anywhere past the end is caught - one running on
 * from the end of the block and a single store that skips ahead alike; past the gap the
 * guard page faults.  Checked a word at a time (unaligned loads; the last word overlaps the
 * one before it when the gap is not a multiple of 8: the fill byte is the same in every
 * byte).  A canary shorter than 8 bytes ends on a word boundary (pages are multiples of
 * 4096): it is the top bytes of the word before `to`, checked and written with a mask.
 */
static inline uint64_t canary_mask(size_t len) /* len 1..7: the top len bytes of a word */
{
	return ~0ULL << (8 * (8 - len));
}

void secure_check_canary(const void *p, const char *from, const char *to, const char *call)
{
	uint64_t cw = pcpm_secure_keys.fill, a, b;
	size_t len = (size_t)(to - from);
	if (likely(len >= 8)) {
		uint64_t diff = 0;
		for (const char *q = from; q + 8 <= to; q += 8) {
			memcpy(&a, q, 8);
			diff |= a ^ cw;
		}
		memcpy(&b, to - 8, 8);
		if (unlikely(diff | (b ^ cw)))
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

void secure_fill_canary(char *from, char *to)
{
	uint64_t cw = pcpm_secure_keys.fill, a;
	size_t len = to > from ? (size_t)(to - from) : 0;
	if (likely(len >= 8)) {
		memset(from, (uint8_t)cw, len);
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
