/*
 * lockstat.h - the lock profile of the process-wide locks, in the spirit of the kernel's
 * lock_stat (Documentation/locking/lockstat.rst): per lock instance, acquisitions, contended
 * acquisitions, time spent waiting and a sampled hold time.  The counters live beside the
 * lock and are written by its holder, so counting adds no shared atomic; the hold time is
 * read from the clock on one acquisition in LOCKSTAT_SAMPLE (the first, then every 64th), so
 * the mean costs two time-stamp counter reads per 64 holds.  A timed hold longer than
 * LOCKSTAT_PREEMPTED cycles (about 100 us) is left out of the mean and counted apart: the
 * holder was preempted (32 threads on 2 CPUs when bench/scale.sh simulates a large machine),
 * which a machine with a CPU per thread does not see.  Per-CPU locks (pcp, sheaves) are not
 * profiled here: they are not process-wide.  Leaf header (os layer only).
 * Thread-safety: lockstat_lock/_unlock/_trylock are the lock operations themselves; readers
 * (stats) read the counters racily.
 */
#ifndef PCPM_LOCKSTAT_H
#define PCPM_LOCKSTAT_H

#include "os.h"

#define LOCKSTAT_SAMPLE 64		/* one hold in 64 is timed (a power of two) */
#define LOCKSTAT_PREEMPTED (1u << 18) /* cycles: a longer hold was preempted */

struct lock_stat {
	uint64_t acquired;  /* acquisitions (lock and successful trylock) */
	uint64_t contended; /* ... that had to wait */
	uint64_t wait_ns;   /* time spent waiting, ns */
	uint64_t hold_cycles; /* total of the timed holds, time-stamp counter cycles */
	uint64_t held;	      /* timed holds */
	uint64_t preempted;   /* timed holds left out (longer than LOCKSTAT_PREEMPTED) */
	uint64_t t0;	      /* start of the hold being timed, 0: this hold is not timed */
};

/* Counts an acquisition that waited wait_ns (0: it did not); lock held. */
static inline void lockstat_acquired(struct lock_stat *st, uint64_t wait_ns)
{
	if (wait_ns) {
		st->contended++;
		st->wait_ns += wait_ns;
	}
	if (unlikely((++st->acquired & (LOCKSTAT_SAMPLE - 1)) == 0))
		st->t0 = pcpm_cycles();
}

/* Ends the hold (before the unlock). */
static inline void lockstat_releasing(struct lock_stat *st)
{
	if (unlikely(st->t0)) {
		uint64_t d = pcpm_cycles() - st->t0;
		if (d < LOCKSTAT_PREEMPTED) {
			st->hold_cycles += d;
			st->held++;
		} else {
			st->preempted++;
		}
		st->t0 = 0;
	}
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

/* Sums of a lock family (every instance of one named lock), for the statistics. */
struct lock_sum {
	uint64_t acquired, contended, wait_ns, hold_cycles, held, busiest;
};

static inline void lock_sum_add(struct lock_sum *s, const struct lock_stat *st)
{
	uint64_t a = __atomic_load_n(&st->acquired, __ATOMIC_RELAXED);
	s->acquired += a;
	s->contended += __atomic_load_n(&st->contended, __ATOMIC_RELAXED);
	s->wait_ns += __atomic_load_n(&st->wait_ns, __ATOMIC_RELAXED);
	s->hold_cycles += __atomic_load_n(&st->hold_cycles, __ATOMIC_RELAXED);
	s->held += __atomic_load_n(&st->held, __ATOMIC_RELAXED);
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

#endif
