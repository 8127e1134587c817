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
	printf("test_secure_canary: %ld canary words, no zero byte\n", checked);
	return 0;
}
