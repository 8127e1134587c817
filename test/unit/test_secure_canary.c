/*
 * test_secure_canary.c - secure mode's canary words (core/secure.h): for any key and any slot
 * address, no byte that the free-time check reads is 0, so an overflow that writes a string's
 * terminating NUL one byte past the end (the commonest heap overflow) always changes the
 * canary.  A byte of key ^ address alone is 0 for one slot in 256: a NUL overflow out of
 * such a slot went unseen.
 */
#include "secure.h"
#include "unit.h"

#include <stdint.h>
#include <string.h>

int main(void)
{
	unsigned long long seed = 0x9e3779b97f4a7c15ULL;
	static char slot[4096] __attribute__((aligned(16)));
	long checked = 0;
	for (int k = 0; k < 256; k++) {
		pcpm_secure_keys.canary = rnd(&seed);
		if (k == 0)
			pcpm_secure_keys.canary = 0; /* the worst key: the address alone */
		for (int i = 0; i < 4096; i++) {
			uintptr_t base = (uintptr_t)(rnd(&seed) & 0x7ffffffffff0ULL);
			uint64_t c = secure_canary((const void *)base);
			for (int b = 0; b < 8; b++)
				CHECK((c >> (8 * b)) & 0xff);
			checked++;
		}
		/* the bytes the check reads, as secure_canary_fill lays them from any end of the
		 * block: none is 0 */
		for (size_t n = 1; n <= 64; n++) {
			memset(slot, 0, sizeof(slot));
			char *p = slot + 16, *end = slot + 16 + 64 + 32;
			uint64_t c = secure_canary(slot);
			secure_canary_fill(c, p + n, end);
			for (char *q = p + n; q < p + n + 8 && q < end; q++)
				CHECK(*q != 0);
			for (char *q = end - 16; q < end; q++)
				CHECK(*q != 0);
		}
	}
	/* secure_canary_fill with every canary length from 16 bytes (the shortest: an unaligned
	 * store that reaches into the last two words, written before it) and every offset of
	 * the block's end in a word: every byte it writes is the pattern's (byte a & 7 of the
	 * canary at address a), the last two words are the canary word whole, the check
	 * passes, and nothing before the block's end or past the slot changed */
	long fills = 0;
	for (size_t len = 16; len <= 120; len++) {
		char *end = slot + 256, *from = end - len;
		uint64_t c = secure_canary(slot);
		memset(slot, 'x', sizeof(slot));
		memset(from, 0, len);
		secure_canary_fill(c, from, end);
		for (char *q = slot; q < from; q++)
			CHECK(*q == 'x');
		for (char *q = end; q < slot + sizeof(slot); q++)
			CHECK(*q == 'x');
		/* written: the first word boundary's 64 bytes on, up to the last two words */
		char *w = (char *)(((uintptr_t)from + 7) & ~(uintptr_t)7) + SECURE_CANARY_CHECK;
		for (char *q = from; q < (w < end - 16 ? w : end - 16); q++)
			CHECK(*q == (char)(c >> (8 * ((uintptr_t)q & 7))));
		CHECK(secure_load64(end - 16) == c && secure_load64(end - 8) == c);
		secure_canary_check(c, from, end, from, "test"); /* aborts when it differs */
		fills++;
	}
	/* secure_is_zero and secure_zero over 0-40 16-byte pieces (the last 64 bytes as one
	 * block overlapping the loop's): a byte set anywhere in [from, to) is seen, one just
	 * outside is not, and the zeroing clears exactly [from, to) */
	long ranges = 0;
	for (size_t len = 0; len <= 640; len += 16) {
		char *from = slot + 64, *to = from + len;
		memset(slot, 0, sizeof(slot));
		CHECK(secure_is_zero(from, to));
		from[-1] = to[0] = 'x';
		CHECK(secure_is_zero(from, to));
		for (char *q = from; q < to; q++) {
			*q = 1;
			CHECK(!secure_is_zero(from, to));
			*q = 0;
		}
		memset(slot, 'y', sizeof(slot));
		secure_zero(from, to);
		for (char *q = slot; q < slot + sizeof(slot); q++)
			CHECK(*q == (q >= from && q < to ? 0 : 'y'));
		ranges++;
	}
	printf("test_secure_canary: %ld canary words, no zero byte; %ld fills, %ld zero ranges\n",
	       checked, fills, ranges);
	return 0;
}
