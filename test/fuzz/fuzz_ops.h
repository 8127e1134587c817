/*
 * fuzz_ops.h - an interpreter that reads a byte string as a sequence of allocation calls on
 * pcpmalloc's core (the pcpm_* API of core/api.h, linked as a normal library beside the
 * process malloc) and checks every result against a shadow model.
 *
 * Shared by the libFuzzer target (fuzz_pcpm.c, built with clang) and the replay/stress driver
 * (fuzz_replay.c, built with gcc, under ASan+UBSan in the default test run and under TSan
 * with -Dsanitize=thread).  What is checked, for every call:
 *   - alignment: 16 bytes always, a page from 16 KiB up, the requested alignment for the
 *     aligned forms, a page for valloc/pvalloc;
 *   - usable size >= requested, and unchanged until the block is freed or resized;
 *   - contents: every block is filled with a pattern of its serial number, verified before
 *     every free, realloc and hand-off; realloc keeps min(old usable, new size) bytes;
 *   - calloc and the zero pattern: calloc memory reads as zero;
 *   - no two live blocks overlap (over their usable sizes);
 *   - errors: impossible sizes give NULL + ENOMEM, bad alignments EINVAL (posix_memalign
 *     returns the code and leaves errno and *out alone), a failed realloc keeps the block;
 *   - leaks (optional, fz_check_empty): once everything is freed and trimmed, the zone has
 *     every page back and no huge mapping is left.
 * A failed check prints one line "fuzz_ops: ..." and aborts, so libFuzzer keeps the input.
 *
 * Thread-safety: one struct fz_ctx per thread; the hand-off hooks decide how blocks move
 * between threads.
 */
#ifndef FUZZ_OPS_H
#define FUZZ_OPS_H

#include <stddef.h>
#include <stdint.h>

#define FZ_SLOTS 64
#define FZ_LIVE_LIMIT (320UL << 20) /* live bytes (requested) above which allocations skip */

struct fz_block {
	unsigned char *p; /* NULL: empty slot */
	size_t req;	  /* requested bytes */
	size_t usable;	  /* pcpm_usable_size at allocation (or resize) */
	size_t align;	  /* alignment asked for (16 for the plain forms) */
	uint32_t seed;	  /* pattern seed; 0 means "reads as zero" (calloc, not yet refilled) */
};

struct fz_ctx;

/*
 * How blocks cross threads.  give: hand block b (already verified) to another thread, which
 * frees it there; returns 0 when it could not (the caller frees it).  take: receive a block
 * allocated (and filled) by another thread into *b; returns 0 when there is none.
 * thread_exit: end the other thread (its thread cache is flushed); may be NULL.
 */
struct fz_handoff {
	int (*give)(struct fz_ctx *c, const struct fz_block *b);
	int (*take)(struct fz_ctx *c, struct fz_block *b, size_t size);
	void (*thread_exit)(struct fz_ctx *c);
};

struct fz_ctx {
	struct fz_block slot[FZ_SLOTS];
	const uint8_t *in;
	size_t len, pos;
	uint32_t serial; /* pattern seeds: odd, never 0 */
	size_t live;	 /* requested bytes of the live blocks */
	const struct fz_handoff *ho;
	int allow_trim;	   /* 0 in concurrent stress: trim flushes only the caller's cache */
	size_t live_limit; /* 0: FZ_LIVE_LIMIT */
	int oom_ok;	   /* memory may run out (test_oom): NULL + ENOMEM is right for any size */
};

/* Runs the whole input; frees every block it left live before returning. */
void fz_run(struct fz_ctx *c, const uint8_t *data, size_t len);

/* Fill a block with its pattern / verify it (seed 0: zeros) over the first lim bytes. */
void fz_fill(const struct fz_block *b);
void fz_verify(const struct fz_block *b, size_t lim, const char *what);

/* Allocates size bytes with pcpm_malloc, fills it; aborts on failure (a possible size). */
int fz_alloc_filled(struct fz_block *b, size_t size, uint32_t seed);

/* Frees every block of c (verified first). */
void fz_free_all(struct fz_ctx *c);

/*
 * After every thread's blocks are freed and every thread cache flushed: trims and checks
 * that no page is in use in the zone and no huge mapping is left (a leak otherwise).
 */
void fz_check_empty(const char *when);

void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
