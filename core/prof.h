/*
 * prof.h - the heap profiler's records (prof.c): one bucket per distinct allocation stack
 * with its sampled counters, the table of sampled blocks still live, and the stack walk.
 * The sampling decision (prof_mode.c) and the dumps (prof_dump.c) sit above it.  Mirrors
 * gperftools' HeapProfileTable (a bucket per stack, alloc and free counts) and jemalloc's
 * prof_gctx/prof_tctx, without their locks: every operation here is lock-free and never
 * allocates (the tables are mapped once, at start-up), so a signal handler, the loader or
 * a fork child may run it at any point.
 */
#ifndef PCPM_PROF_H
#define PCPM_PROF_H

#include "os.h"

#include <stdatomic.h>
#include <stdint.h>

#define PROF_MAX_DEPTH 48 /* frames kept per stack (gperftools keeps 32, jemalloc 128) */

/*
 * One allocation stack.  The counters are sums over its sampled blocks, unscaled (the
 * reader scales them by the sampling rate): objects and requested bytes allocated, and
 * objects and bytes freed since; in use = allocated - freed.  Written with relaxed
 * atomics by any thread; a reader sees each counter whole, and a dump taken while others
 * allocate is a racy but consistent-enough snapshot (as every statistics read here).
 */
struct prof_bucket {
	_Atomic uint64_t alloc_objs, alloc_bytes;
	_Atomic uint64_t free_objs, free_bytes;
	uint64_t hash;
	uint32_t depth;		  /* frames in pcs (0: the overflow bucket, no stack) */
	uintptr_t pcs[];	  /* return addresses, innermost first */
};

/* Maps the tables (start-up, before any other thread allocates): false when out of memory. */
bool prof_tables_init(void);
/* The child of a fork: every record forgotten, a fresh profile starts (no lock to reset). */
void prof_tables_fork_child(void);

/*
 * The calling thread's stack, innermost first, without pcpmalloc's own frames: with the
 * unwinder of libgcc_s when the program loaded it (see prof.c), else a frame-pointer walk
 * bounded by the thread's stack mapping.  leaf: the return address the API entry was called
 * with, fp: the frame pointer it was called with (pcpmalloc's own code keeps no frame
 * pointers, so the walk starts from the program's), either 0 when unknown.  Returns the
 * frames written, at most max.  Async-signal-safe; never allocates, takes no lock.
 */
unsigned prof_backtrace(uintptr_t *pcs, unsigned max, uintptr_t leaf, uintptr_t fp);

/* The bucket of this stack, made on first sight; the overflow bucket when the tables are full. */
struct prof_bucket *prof_bucket_get(const uintptr_t *pcs, unsigned depth);

/*
 * Records the sampled block p (bytes: its request; weight: objects it stands for, one but
 * for a refill that held more than one sampling point) in bucket b.  False when the live
 * table has no room in p's set: then nothing is counted (a block that is counted must be
 * found again at its free).
 */
bool prof_sample_add(void *p, size_t bytes, unsigned weight, struct prof_bucket *b);
/* A sampled block's record, as prof_sample_forget found it. */
struct prof_sample {
	struct prof_bucket *b;
	size_t bytes;	 /* its request */
	unsigned weight; /* objects it stands for */
};
/* The free of p: true when p was a sampled block (its bucket's freed counters updated; its
 * record copied to *was unless was is NULL). */
bool prof_sample_forget(void *p, struct prof_sample *was);
/* Undoes prof_sample_forget(p, was) for a block that stayed allocated (a realloc that
 * failed): p is live again and its bucket's freed counters go back.  When p's set has no
 * room any more the sample is dropped (counted), as at its allocation. */
void prof_sample_restore(void *p, const struct prof_sample *was);
/* Is p a sampled block still live?  (realloc's choice; a racy read is enough there.) */
bool prof_sample_live(const void *p);

/* Calls fn for every bucket (the overflow one included), in no order. */
void prof_for_each_bucket(void (*fn)(const struct prof_bucket *b, void *arg), void *arg);

/* Samples dropped (live table set full), for the dump's and leak report's notes. */
uint64_t prof_dropped(void);

/* Is pc inside libpcpmalloc's own code?  (the walk skips those frames) */
bool prof_own_pc(uintptr_t pc);

#endif
