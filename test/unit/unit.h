/* unit.h - tiny assertion helpers for the layer tests (the core runs beside glibc malloc). */
#ifndef UNIT_H
#define UNIT_H
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		long long _a = (long long)(a), _b = (long long)(b);                                \
		if (_a != _b) {                                                                    \
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s = %lld, %s = %lld\n", __FILE__,  \
				__LINE__, #a, _a, #b, _b);                                         \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* xorshift64*: deterministic random sequences */
static inline unsigned long long rnd(unsigned long long *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

#ifdef _GNU_SOURCE
#include <sched.h>

/* Pins the test to CPU 0, so that pcp_cpu() and its pageset stay the same for the whole test
 * (for the tests that define _GNU_SOURCE: sched_setaffinity). */
static inline void unit_pin_cpu0(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	CHECK(sched_setaffinity(0, sizeof(set), &set) == 0);
}
#endif
#endif
