/*
 * clock.h - the allocator's clocks, defined by clock.c (os.h includes it).  No libc
 * clock_gettime: a program may wrap it and look its target up with dlsym, which waits for the
 * loader's lock (issue 26); the kernel's vDSO function is found once in the vDSO's own symbol
 * table, else the system call.  Thread-safety: every function is thread-safe.
 */
#ifndef PCPM_CLOCK_H
#define PCPM_CLOCK_H

#include <stdint.h>

/* Monotonic clocks: coarse milliseconds (vDSO, ~4 ms resolution) and nanoseconds. */
uint64_t pcpm_now_ms(void);
uint64_t pcpm_now_ns(void);
/* The time-stamp counter (rdtsc; the monotonic clock in ns elsewhere): a few ns to read. */
static inline uint64_t pcpm_cycles(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	return pcpm_now_ns();
#endif
}
/* Nanoseconds per pcpm_cycles() step, measured against the monotonic clock between the
 * library's start (pcpm_cycles_mark at init) and now; 1 before the mark or without rdtsc. */
void pcpm_cycles_mark(void);
double pcpm_ns_per_cycle(void);

#endif
