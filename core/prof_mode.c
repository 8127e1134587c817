/*
 * prof_mode.c - the heap profiler's front end (PCPMALLOC_PROF=1): which allocations are
 * sampled.  Calls the default functions (alloc.h, free.h, realloc.h, alloc-aligned.h), large.c for the sampled blocks,
 * prof.c's records and prof_dump.c's interval count; called by api.c.
 *
 * Sampling, as tcmalloc's Sampler and jemalloc's prof_sample: the bytes a thread allocates
 * form one stream, sampling points fall in it as a Poisson process of mean interval
 * pcpm_prof_rate bytes (exponential gaps), and an allocation that holds a point is sampled.
 * A block of s bytes is then sampled with probability 1 - exp(-s/rate), and google-pprof
 * (heap_v2) divides by it: the estimate is unbiased.
 *
 * The thread-cache fast path is kept as it is (the instructions of the default mode, no
 * counter): the bytes are counted where objects leave the slab layer for the thread - at
 * each refill, the objects it moved into the cache times the request's size - and at every
 * allocation that has no fast path (calloc, realloc, aligned, paged classes, page runs,
 * huge).  The cost is one subtraction per refill (every 15 objects at most).  What this
 * does not see is a block that a thread frees and allocates again from its own cache
 * (at most 60 objects, 32 KiB above 4 KiB): churn inside the cache never reaches the slabs,
 * so the "allocated" columns undercount such churn; the in-use columns, which follow what
 * stays allocated, are unbiased as long as a class's requests have one size (a refill is
 * counted at the size of the request that found the cache empty).  The sampling points of
 * a refill land on its objects; the allocation that made the refill is the sample, with a
 * weight of the objects that held a point (one but when the rate is close to a refill's
 * bytes).
 *
 * A sampled block is made a page run (large.c) even when it is small, so that its free
 * never takes the fast path: every free that is not a slab object reaches this front end,
 * which looks the address up in prof.c's live table (page aligned only: one cache line).
 * A 16-byte sample costs a 4 KiB page; at the default rate that is under 1% of the heap.
 */
#include "alloc.h"
#include "alloc-aligned.h"
#include "free.h"
#include "realloc.h"
#include "large.h"
#include "prof.h"
#include "prof_dump.h"
#include "prof_mode.h"

#include <errno.h>
#include <string.h>

/* Per thread: bytes left to the next sampling point, and the generator of the gaps.
 * Only this thread's slow paths touch them (a handler that interrupted pcpmalloc samples
 * nothing; one that interrupted the program runs between, never inside, our updates). */
struct prof_tls {
	uint64_t until;
	uint64_t rng;
};
static __thread struct prof_tls prof_tls __attribute__((tls_model("initial-exec")));

#define LN2 0.69314718055994530942

/* Natural logarithm of u in (0, 1] without libm (the library links libc only): u = m 2^e,
 * ln m = 2 atanh((m - 1) / (m + 1)) by its series, |z| < 0.172: 6 terms, error < 1e-10. */
static double prof_ln(double u)
{
	uint64_t bits;
	memcpy(&bits, &u, sizeof(bits));
	int e = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & ((1ull << 52) - 1)) | (1023ull << 52);
	double m;
	memcpy(&m, &bits, sizeof(m));
	if (m > 1.41421356237309504880) {
		m /= 2;
		e++;
	}
	double z = (m - 1) / (m + 1), z2 = z * z;
	double s = z * (1 + z2 * (1.0 / 3 + z2 * (1.0 / 5 + z2 * (1.0 / 7 + z2 * (1.0 / 9 + z2 / 11)))));
	return 2 * s + e * LN2;
}

/* The next exponential gap, in bytes (at least 1). */
static uint64_t next_gap(struct prof_tls *t)
{
	uint64_t x = t->rng; /* xorshift64* */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	x *= 0x2545f4914f6cdd1dull;
	double u = (double)((x >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
	double g = -prof_ln(u) * (double)pcpm_prof_rate;
	if (g < 1)
		return 1;
	return g > 1e15 ? (uint64_t)1e15 : (uint64_t)g;
}

/*
 * Counts nobj objects of size bytes (the current allocation's first) into the thread's
 * stream.  Returns how many of them hold a sampling point (the weight of the sample the
 * current allocation becomes; 0: no sample).  The gaps are exponential, so the process
 * is memoryless: from the end of the object that holds the first point, each later object
 * holds a point with probability 1 - exp(-size/rate) on its own (a fresh gap shorter than
 * it), and the distance from the last object's end to the next point is a fresh gap; no
 * loop over the points, however large the block.
 */
static unsigned count_bytes(uint64_t nobj, size_t size)
{
	struct prof_tls *t = &prof_tls;
	if (!size || size > PTRDIFF_MAX) /* an impossible size fails: nothing allocated */
		return 0;
	if (unlikely(!t->rng)) {
		t->rng = (pcpm_random64() ^ (uintptr_t)t) | 1;
		t->until = next_gap(t);
	}
	uint64_t total = nobj * size; /* nobj > 1 only for refills of slab classes */
	if (likely(t->until > total)) {
		t->until -= total;
		return 0;
	}
	unsigned w = 1;
	for (uint64_t i = (t->until - 1) / size + 1; i < nobj; i++)
		w += next_gap(t) <= size;
	t->until = next_gap(t);
	return w;
}

/* A block of its own for a sample: a page run (or a huge mapping above 4 MiB). */
static void *sample_block(size_t n, size_t align)
{
	bool run;
	void *q = large_alloc(n ? n : 1, align, &run);
	if (q)
		pcpm_count_malloc(run);
	return q;
}

/* Where the program called: the entry's return address and the frame pointer it came with
 * (the saved one of the entry's own frame, which __builtin_frame_address makes it set up);
 * prof.c's frame-pointer walk starts there. */
struct caller {
	uintptr_t leaf, fp;
};
#define CALLER()                                                                                   	((struct caller){ (uintptr_t)__builtin_return_address(0),                                  			  *(const uintptr_t *)__builtin_frame_address(0) })

static void record(void *q, size_t n, unsigned weight, struct caller c)
{
	uintptr_t pcs[PROF_MAX_DEPTH];
	unsigned d = prof_backtrace(pcs, PROF_MAX_DEPTH, c.leaf, c.fp);
	prof_sample_add(q, n, weight, prof_bucket_get(pcs, d));
	/* the bytes a sample stands for, about: the rate for small blocks, the block for large */
	pcpm_prof_allocated((uint64_t)weight * MAX(n, pcpm_prof_rate));
}

static inline bool page_aligned(const void *p)
{
	return !((uintptr_t)p & (PAGE_SIZE - 1));
}

/* The block p of n bytes that dfl_malloc_slow just returned: counted, and replaced by a
 * sampled block when it holds a point.  The count touches only this thread's own words; the
 * sample's work runs flagged as inside pcpmalloc (a handler that interrupts it is nested). */
static void *after_malloc(void *p, size_t n, struct caller c)
{
	uint64_t nobj = 1;
	if (n <= SLAB_MAX_SIZE) { /* a refill: the objects it left on the stack count too */
		struct tcache *tc = tcache_self();
		unsigned cls = size_to_class(n);
		if (tc->state == TC_ACTIVE)
			nobj += tcache_bin_count(&tc->bins[cls]);
	}
	unsigned w = count_bytes(nobj, n);
	if (likely(!w))
		return p;
	PCPM_INSIDE_BEGIN();
	void *q = p;
	if (!page_aligned(p) || n <= pcpm_paged_max) {
		q = sample_block(n, 0);
		if (q && (n > SLAB_MAX_SIZE || !tcache_push(p, size_to_class(n))))
			dfl_free(p, "malloc");
	}
	if (q)
		record(q, n, w, c);
	else
		q = p; /* no memory for a page: this one goes unsampled */
	PCPM_INSIDE_END();
	return q;
}

static void *malloc_slow(size_t n, struct caller c)
{
	void *p = dfl_malloc_slow(n);
	if (unlikely(!p) || unlikely(pcpm_nested()))
		return p;
	return after_malloc(p, n, c);
}

void *prof_malloc(size_t n)
{
	/* malloc and pcpm_malloc_slow reach here by tail calls: the program's call site */
	return malloc_slow(n, CALLER());
}

void prof_free_generic(void *p, const char *call)
{
	if (p && page_aligned(p))
		prof_sample_forget(p, NULL);
	dfl_free_generic(p, call);
}

void *prof_calloc(size_t n)
{
	void *p = NULL;
	if (n <= SLAB_MAX_SIZE)
		p = tcache_pop(size_to_class(n));
	if (!p)
		p = malloc_slow(n, CALLER());
	return p ? dfl_calloc_clear(p, n) : NULL;
}

/* The realloc of p: a sampled block is forgotten first (realloc may move it, and another
 * thread may then get p and sample it), and remembered again when p stays allocated because
 * realloc failed.  (lock-free: a handler that interrupted pcpmalloc does it too) */
static void *realloc_forgetting(void *p, size_t size)
{
	struct prof_sample was;
	if (!page_aligned(p) || !prof_sample_forget(p, &was))
		return dfl_realloc(p, size);
	void *q = dfl_realloc(p, size);
	if (unlikely(!q))
		prof_sample_restore(p, &was);
	return q;
}

void *prof_realloc(void *p, size_t size)
{
	if (unlikely(pcpm_nested()))
		return realloc_forgetting(p, size);
	struct caller c = CALLER();
	PCPM_INSIDE_BEGIN();
	unsigned w = count_bytes(1, size);
	void *q = realloc_forgetting(p, size);
	if (q && w) {
		void *s = q;
		if (!page_aligned(q) || size <= pcpm_paged_max) {
			s = sample_block(size, 0);
			if (s) {
				memcpy(s, q, size);
				dfl_free(q, "realloc");
			}
		}
		if (s) {
			record(s, size, w, c);
			q = s;
		}
	}
	PCPM_INSIDE_END();
	return q;
}

static void *aligned_at(size_t align, size_t size, struct caller c)
{
	if (unlikely(pcpm_nested()))
		return dfl_aligned_alloc(align, size);
	PCPM_INSIDE_BEGIN();
	void *q = NULL;
	unsigned w = count_bytes(1, size);
	if (w && (q = sample_block(size, align)))
		record(q, size, w, c);
	else
		q = dfl_aligned_alloc(align, size);
	PCPM_INSIDE_END();
	return q;
}

void *prof_aligned_alloc(size_t align, size_t size)
{
	return aligned_at(align, size, CALLER());
}

int prof_posix_memalign(void **out, size_t align, size_t size)
{
	/* (api.c's aligned_slow, with the caller: the alignment of every block up to 16) */
	struct caller c = CALLER();
	void *p = align <= 16 ? malloc_slow(size, c) : aligned_at(align, size, c);
	if (!p) {
		errno = ENOMEM;
		return ENOMEM;
	}
	*out = p;
	return 0;
}
