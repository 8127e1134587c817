/*
 * lockstat.h - the lock profile of the process-wide locks, in the spirit of the kernel's
 * lock_stat (Documentation/locking/lockstat.rst): per lock instance, acquisitions, contended
 * acquisitions, time spent waiting and the time each hold lasted.  The counters live beside
 * the lock and are written by its holder, so counting adds no shared atomic.  Every hold is
 * timed (two time-stamp counter reads: the process-wide locks are taken a few times per 1000
 * calls, so sampling saved nothing and hid the rare long holds, a zone growth among them), and
 * none is left out: the mean covers them all, the longest is kept, and the holds longer than
 * LOCKSTAT_LONG cycles (about 100 us: a system call, a page fault storm, or a holder the
 * scheduler preempted - 32 threads on 2 CPUs when bench/scale.sh simulates a large machine)
 * are also counted apart, so a reader tells a slow path from a preempted one.  Per-CPU locks
 * (pcp, sheaves) are not profiled here: they are not process-wide.  Leaf header (os layer
 * only).
 * Thread-safety: lockstat_lock/_unlock/_trylock are the lock operations themselves; readers
 * (stats) read the counters racily.
 */
#ifndef PCPM_LOCKSTAT_H
#define PCPM_LOCKSTAT_H

#include "os.h"

#define LOCKSTAT_LONG (1u << 18) /* cycles (about 100 us at 2.5 GHz): a long hold */

struct lock_stat {
	uint64_t acquired;    /* acquisitions (lock and successful trylock) */
	uint64_t contended;   /* ... that had to wait */
	uint64_t wait_ns;     /* time spent waiting, ns */
	uint64_t hold_cycles; /* total of every hold, time-stamp counter cycles */
	uint64_t hold_max;    /* the longest hold, cycles */
	uint64_t long_holds;  /* holds of LOCKSTAT_LONG cycles or more (in the total too) */
	uint64_t long_cycles; /* ... and their total, so a reader can take them out again */
	uint64_t t0;	      /* start of the current hold (0 between holds) */
};

/* Counts an acquisition that waited wait_ns (0: it did not) and starts timing the hold; lock
 * held. */
static inline void lockstat_acquired(struct lock_stat *st, uint64_t wait_ns)
{
	if (wait_ns) {
		st->contended++;
		st->wait_ns += wait_ns;
	}
	st->acquired++;
	st->t0 = pcpm_cycles();
}

/* Ends the hold (before the unlock). */
static inline void lockstat_releasing(struct lock_stat *st)
{
	uint64_t d = pcpm_cycles() - st->t0;
	if (unlikely(d >= LOCKSTAT_LONG)) {
		st->long_holds++;
		st->long_cycles += d;
	}
	if (unlikely(d > st->hold_max))
		st->hold_max = d;
	st->hold_cycles += d;
	/* no time stamp stays behind: memcheck's leak check reads every word of .bss, and a
	 * stale absolute count can fall inside a block and make its leak "possibly lost" */
	st->t0 = 0;
}

static inline uint64_t lockstat_lock(pcpm_lock_t *l, struct lock_stat *st)
{
	uint64_t w = pcpm_lock(l);
	lockstat_acquired(st, w);
	return w;
}

static inline bool lockstat_trylock(pcpm_lock_t *l, struct lock_stat *st)
{
	if (!pcpm_trylock(l))
		return false;
	lockstat_acquired(st, 0);
	return true;
}

static inline void lockstat_unlock(pcpm_lock_t *l, struct lock_stat *st)
{
	lockstat_releasing(st);
	pcpm_unlock(l);
}

/* Sums of a lock family (every instance of one named lock), for the statistics.  held: the
 * timed holds, which are all of them (acquired); hold_max: the longest of any instance. */
struct lock_sum {
	uint64_t acquired, contended, wait_ns, hold_cycles, held, busiest, hold_max, long_holds;
	uint64_t long_cycles;
};

static inline void lock_sum_add(struct lock_sum *s, const struct lock_stat *st)
{
	uint64_t a = __atomic_load_n(&st->acquired, __ATOMIC_RELAXED);
	uint64_t m = __atomic_load_n(&st->hold_max, __ATOMIC_RELAXED);
	s->acquired += a;
	s->contended += __atomic_load_n(&st->contended, __ATOMIC_RELAXED);
	s->wait_ns += __atomic_load_n(&st->wait_ns, __ATOMIC_RELAXED);
	s->hold_cycles += __atomic_load_n(&st->hold_cycles, __ATOMIC_RELAXED);
	s->held += a;
	s->long_holds += __atomic_load_n(&st->long_holds, __ATOMIC_RELAXED);
	s->long_cycles += __atomic_load_n(&st->long_cycles, __ATOMIC_RELAXED);
	if (m > s->hold_max)
		s->hold_max = m;
	if (a > s->busiest)
		s->busiest = a;
}

/* Mean hold time of the family, ns (0 when no hold was timed). */
static inline uint64_t lock_sum_hold_ns(const struct lock_sum *s)
{
	if (!s->held)
		return 0;
	return (uint64_t)((double)s->hold_cycles / (double)s->held * pcpm_ns_per_cycle());
}

/* The family's longest hold, ns. */
static inline uint64_t lock_sum_hold_max_ns(const struct lock_sum *s)
{
	return (uint64_t)((double)s->hold_max * pcpm_ns_per_cycle());
}

/* Time spent in the family's long holds, ns (part of the mean). */
static inline uint64_t lock_sum_long_hold_ns(const struct lock_sum *s)
{
	return (uint64_t)((double)s->long_cycles * pcpm_ns_per_cycle());
}

#endif
