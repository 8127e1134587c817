/*
 * fuzz_ops.c - the operation interpreter and shadow model (see fuzz_ops.h).
 *
 * Input format: a sequence of operations, each one opcode byte followed by its arguments;
 * bytes past the end read as 0, so every byte string is a valid program.  Sizes are drawn
 * from four ranges chosen by the top bits of a byte: tiny (0..255), slab (0..16 KiB), page
 * runs (up to 4 MiB) and a table of edges (class boundaries, the huge threshold, sizes that
 * must fail such as SIZE_MAX and PTRDIFF_MAX + 1).
 */
#define _GNU_SOURCE
#include "fuzz_ops.h"
#include "api.h"
#include "trim.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fz_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("fuzz_ops: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

/* ---- input reading ------------------------------------------------------------------ */

static uint8_t next8(struct fz_ctx *c)
{
	return c->pos < c->len ? c->in[c->pos++] : 0;
}

static uint16_t next16(struct fz_ctx *c)
{
	uint16_t v = next8(c);
	return (uint16_t)(v | next8(c) << 8);
}

/* Sizes that sit on a boundary of the design, or must fail. */
static const size_t edge_sizes[] = {
	0, 1, 8, 15, 16, 17, 128, 129, 1024, 1025,
	4095, 4096, 4097, 8191, 8192, 8193, 12288, 16383, 16384, 16385,
	32768, 32769, 65536, (1UL << 20) - 1, 1UL << 20, (2UL << 20) + 1, (4UL << 20) - 4096,
	(4UL << 20) - 1, 4UL << 20, (4UL << 20) + 1, (4UL << 20) + 4096, 5UL << 20,
	(8UL << 20) + 123, 9UL << 20, 33UL << 20, 65UL << 20, 80UL << 20,
	/* impossible: NULL + ENOMEM */
	SIZE_MAX, SIZE_MAX - 4095, SIZE_MAX / 2, (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX,
	1UL << 47, 1UL << 62,
	/* the paged slab classes (20, 24, 28 KiB) and the order-3 page run above them
	 * (appended: the indices above stay those of the checked-in inputs) */
	20479, 20480, 20481, 24575, 24576, 24577, 28671, 28672, 28673, 32767,
};
#define NR_EDGES (sizeof(edge_sizes) / sizeof(edge_sizes[0]))

/* Above this a request may fail for lack of address space: ENOMEM is then the answer. */
#define FZ_POSSIBLE (1UL << 30)

static size_t next_size(struct fz_ctx *c)
{
	uint8_t b = next8(c);
	switch (b >> 6) {
	case 0:
		return b & 63 ? next8(c) : 0;
	case 1:
		return next16(c) % (SLAB_MAX_SIZE + 1);
	case 2:
		/* bit 5: any size of the paged classes and the run above them, 16 KiB + 1 ..
		 * 32 KiB (else one in 256 would land there) */
		if (b & 32)
			return SLAB_MAX_SIZE + 1 + next16(c) % SLAB_MAX_SIZE;
		return SLAB_MAX_SIZE + ((size_t)next16(c) << 6) + (b & 31);
	default:
		return edge_sizes[next8(c) % NR_EDGES];
	}
}

/* Alignment argument: mostly powers of two 1..16 MiB, sometimes any value (often invalid). */
static size_t next_align(struct fz_ctx *c)
{
	uint8_t b = next8(c);
	if (b & 0x80) {
		switch (b & 7) {
		case 0:
			return 0;
		case 1:
			return SIZE_MAX / 2 + 2; /* above glibc's memalign limit: EINVAL */
		case 2:
			return (size_t)1 << 63;
		default:
			return next16(c);
		}
	}
	return (size_t)1 << (b % 25);
}

/* ---- patterns --------------------------------------------------------------------------- */

static inline uint8_t pat(uint32_t seed, size_t off)
{
	if (!seed)
		return 0;
	uint32_t x = seed ^ (uint32_t)(off >> 6) * 0x9e3779b1u;
	return (uint8_t)(x ^ x >> 13 ^ off);
}

/*
 * The bytes a pattern covers: all of a block up to 64 KiB; beyond, the first and last 4 KiB
 * and 64 bytes of every page (of every MiB above 16 MiB, so a 80 MiB block does not become
 * resident in full).  Calls fn(b, start, end) for each range inside [0, lim).
 */
#define FULL_LIMIT (64UL << 10)
#define SAMPLE_LIMIT (16UL << 20)

typedef void (*range_fn)(const struct fz_block *b, size_t s, size_t e, const char *what);

static void for_ranges(const struct fz_block *b, size_t lim, range_fn fn, const char *what)
{
	size_t u = MIN(b->usable, lim);
	if (b->usable <= FULL_LIMIT) {
		fn(b, 0, u, what);
		return;
	}
	size_t stride = b->usable <= SAMPLE_LIMIT ? PAGE_SIZE : (1UL << 20);
	fn(b, 0, MIN(u, 4096), what);
	for (size_t off = 4096; off + 64 <= u && off < b->usable - 4096; off += stride)
		fn(b, off, off + 64, what);
	if (u > b->usable - 4096)
		fn(b, b->usable - 4096, u, what);
}

static void fill_range(const struct fz_block *b, size_t s, size_t e, const char *what)
{
	(void)what;
	for (size_t i = s; i < e; i++)
		b->p[i] = pat(b->seed, i);
}

static void verify_range(const struct fz_block *b, size_t s, size_t e, const char *what)
{
	for (size_t i = s; i < e; i++)
		if (b->p[i] != pat(b->seed, i))
			fz_fail("%s: block %p (%zu bytes, usable %zu, seed %u): byte %zu is 0x%02x, "
				"expected 0x%02x",
				what, (void *)b->p, b->req, b->usable, b->seed, i, b->p[i],
				pat(b->seed, i));
}

void fz_fill(const struct fz_block *b)
{
	for_ranges(b, b->usable, fill_range, NULL);
}

void fz_verify(const struct fz_block *b, size_t lim, const char *what)
{
	for_ranges(b, lim, verify_range, what);
}

/* ---- the shadow model ------------------------------------------------------------------- */

static void check_new(struct fz_ctx *c, struct fz_block *b, const char *call)
{
	uintptr_t a = (uintptr_t)b->p;
	if (a & 15)
		fz_fail("%s(%zu): %p is not 16-byte aligned", call, b->req, (void *)b->p);
	/* README: blocks of 16 KiB and more are page aligned */
	if (b->req >= SLAB_MAX_SIZE && (a & (PAGE_SIZE - 1)))
		fz_fail("%s(%zu): %p is not page aligned", call, b->req, (void *)b->p);
	if (b->align > 16 && (a & (b->align - 1)))
		fz_fail("%s(align %zu, %zu): %p is not aligned", call, b->align, b->req,
			(void *)b->p);
	b->usable = pcpm_usable_size(b->p);
	if (b->usable < b->req)
		fz_fail("%s(%zu): usable size %zu is smaller", call, b->req, b->usable);
	for (int i = 0; i < FZ_SLOTS; i++) {
		const struct fz_block *o = &c->slot[i];
		if (!o->p || o == b)
			continue;
		if (b->p < o->p + o->usable && o->p < b->p + b->usable)
			fz_fail("%s(%zu): [%p, +%zu) overlaps the live block [%p, +%zu)", call,
				b->req, (void *)b->p, b->usable, (void *)o->p, o->usable);
	}
}

/* The result of an allocation call that may fail: NULL is right only for impossible sizes
 * (errno ENOMEM); a possible size must succeed while we hold less than FZ_LIVE_LIMIT. */
static _Thread_local int oom_ok;

static int check_result(void *p, size_t size, int err, const char *call)
{
	if (p)
		return 1;
	if (err != ENOMEM)
		fz_fail("%s(%zu) failed with errno %d, not ENOMEM", call, size, err);
	if (size <= FZ_POSSIBLE && !oom_ok)
		fz_fail("%s(%zu) failed (ENOMEM) for a possible size", call, size);
	return 0;
}

static size_t live_limit(const struct fz_ctx *c)
{
	return c->live_limit ? c->live_limit : FZ_LIVE_LIMIT;
}

static void take_slot(struct fz_ctx *c, int i, void *p, size_t req, size_t align, int zero,
		      const char *call)
{
	struct fz_block *b = &c->slot[i];
	b->p = p;
	b->req = req;
	b->align = align;
	b->seed = 0;
	check_new(c, b, call);
	if (zero)
		fz_verify(b, req, call); /* seed 0: zeros */
	c->serial += 2;
	b->seed = c->serial | 1;
	fz_fill(b);
	c->live += req;
}

static void drop_slot(struct fz_ctx *c, int i)
{
	c->live -= c->slot[i].req;
	c->slot[i].p = NULL;
}

int fz_alloc_filled(struct fz_block *b, size_t size, uint32_t seed)
{
	b->p = pcpm_malloc(size);
	if (!b->p)
		return 0;
	b->req = size;
	b->align = 16;
	b->usable = pcpm_usable_size(b->p);
	if (b->usable < size || ((uintptr_t)b->p & 15))
		fz_fail("malloc(%zu) on a hand-off thread: %p, usable %zu", size, (void *)b->p,
			b->usable);
	b->seed = seed | 1;
	fz_fill(b);
	return 1;
}

static int pow2(size_t a)
{
	return a && !(a & (a - 1));
}

enum {
	OP_MALLOC,
	OP_CALLOC,
	OP_REALLOC,
	OP_REALLOCARRAY,
	OP_POSIX_MEMALIGN,
	OP_ALIGNED_ALLOC,
	OP_MEMALIGN,
	OP_VALLOC,
	OP_PVALLOC,
	OP_FREE,
	OP_FREE_SIZED,
	OP_USABLE,
	OP_TRIM,
	OP_GIVE,
	OP_TAKE,
	OP_THREAD_EXIT,
	OP_WRITE, /* refill a block with a new pattern (a program writing its memory) */
	OP_FREE_KEYED, /* a live block whose second word equals the free-list key, then free */
	NR_OPS
};

static void op_alloc(struct fz_ctx *c, int op, int i)
{
	struct fz_block *b = &c->slot[i];
	if (b->p) { /* occupied: free it first, as a program would reuse the variable */
		fz_verify(b, b->usable, "free before reuse");
		pcpm_free(b->p);
		drop_slot(c, i);
	}
	size_t size = next_size(c), align = 16, n = size, m = 1;
	int err, zero = 0;
	void *p = NULL;
	const char *call = "malloc";
	if (size <= FZ_POSSIBLE && c->live + size > live_limit(c))
		return;
	errno = 0;
	switch (op) {
	case OP_MALLOC:
		p = pcpm_malloc(size);
		break;
	case OP_CALLOC:
		call = "calloc";
		/* nmemb * size: sometimes overflowing */
		m = (size_t)next8(c) + 1;
		if (m == 256)
			m = SIZE_MAX / 2;
		n = size / m ? size / m : size;
		if (__builtin_mul_overflow(n, m, &size)) {
			p = pcpm_calloc(m, n);
			if (p || errno != ENOMEM)
				fz_fail("calloc(%zu, %zu) overflows: %p, errno %d", m, n, p, errno);
			return;
		}
		p = pcpm_calloc(m, n);
		zero = 1;
		break;
	case OP_POSIX_MEMALIGN: {
		call = "posix_memalign";
		align = next_align(c);
		void *out = (void *)0x5a5a;
		errno = 4242;
		int r = pcpm_posix_memalign(&out, align, size);
		int valid = pow2(align) && align >= sizeof(void *);
		if (!valid) {
			if (r != EINVAL || out != (void *)0x5a5a || errno != 4242)
				fz_fail("posix_memalign(align %zu): returned %d, out %p, errno %d", align,
					r, out, errno);
			return;
		}
		if (r) {
			/* glibc: ENOMEM returned and left in errno (issue 26 item 5) */
			if (out != (void *)0x5a5a || errno != r)
				fz_fail("posix_memalign failed (%d): out %p, errno %d", r, out, errno);
			check_result(NULL, align > FZ_POSSIBLE ? SIZE_MAX : size, r, call);
			return;
		}
		p = out;
		break;
	}
	case OP_ALIGNED_ALLOC:
		call = "aligned_alloc";
		align = next_align(c);
		p = pcpm_aligned_alloc(align, size);
		if (!pow2(align)) {
			if (p || errno != EINVAL)
				fz_fail("aligned_alloc(%zu, %zu): %p, errno %d, not EINVAL", align, size,
					p, errno);
			return;
		}
		break;
	case OP_MEMALIGN:
		call = "memalign";
		align = next_align(c);
		p = pcpm_memalign(align, size);
		if (align > SIZE_MAX / 2 + 1) {
			if (p || errno != EINVAL)
				fz_fail("memalign(%zu, %zu): %p, errno %d, not EINVAL", align, size, p,
					errno);
			return;
		}
		/* glibc rounds a non-power of two up: the result is aligned to that */
		if (align < 16)
			align = 16;
		while (!pow2(align))
			align += align & -align;
		break;
	case OP_VALLOC:
		call = "valloc";
		align = PAGE_SIZE;
		p = pcpm_valloc(size);
		break;
	case OP_PVALLOC:
		call = "pvalloc";
		align = PAGE_SIZE;
		p = pcpm_pvalloc(size);
		if (p)
			size = ALIGN_UP(size ? size : 1, PAGE_SIZE); /* the usable size promised */
		break;
	}
	err = errno;
	/* an alignment above what can be mapped fails like an impossible size */
	if (!check_result(p, align > FZ_POSSIBLE ? SIZE_MAX : size, err, call))
		return;
	take_slot(c, i, p, size, align < 16 ? 16 : align, zero, call);
}

static void op_realloc(struct fz_ctx *c, int op, int i)
{
	struct fz_block *b = &c->slot[i];
	size_t size = next_size(c);
	if (b->p && size <= FZ_POSSIBLE && c->live - b->req + size > live_limit(c))
		return;
	if (!b->p && size <= FZ_POSSIBLE && c->live + size > live_limit(c))
		return;
	errno = 0;
	void *q;
	if (op == OP_REALLOCARRAY) {
		size_t m = (size_t)next8(c) + 1, n = size / m;
		if (m == 256) { /* overflow: ENOMEM, the block stays */
			q = pcpm_reallocarray(b->p, SIZE_MAX / 2, 3);
			if (q || errno != ENOMEM)
				fz_fail("reallocarray overflow: %p, errno %d", q, errno);
			if (b->p)
				fz_verify(b, b->usable, "reallocarray overflow");
			return;
		}
		size = n * m;
		q = pcpm_reallocarray(b->p, m, n);
	} else {
		q = pcpm_realloc(b->p, size);
	}
	int err = errno;
	if (!b->p) { /* realloc(NULL, n) is malloc(n) */
		if (check_result(q, size, err, "realloc(NULL)"))
			take_slot(c, i, q, size, 16, 0, "realloc(NULL)");
		return;
	}
	if (size == 0) { /* glibc: frees, returns NULL */
		if (q)
			fz_fail("realloc(%p, 0) returned %p, not NULL", (void *)b->p, q);
		drop_slot(c, i);
		return;
	}
	if (!q) { /* failure keeps the old block intact */
		check_result(NULL, size, err, "realloc");
		fz_verify(b, b->usable, "realloc failure");
		return;
	}
	struct fz_block nb = *b;
	nb.p = q;
	nb.req = size;
	nb.align = 16;
	struct fz_block saved = *b;
	b->p = NULL; /* the old block is gone: no overlap check against it */
	check_new(c, &nb, "realloc");
	saved.p = q;
	fz_verify(&saved, MIN(saved.usable, size), "realloc kept");
	c->live += size - saved.req;
	c->serial += 2;
	nb.seed = c->serial | 1;
	*b = nb;
	fz_fill(b);
}

void fz_run(struct fz_ctx *c, const uint8_t *data, size_t len)
{
	c->in = data;
	c->len = len;
	c->pos = 0;
	oom_ok = c->oom_ok; /* (test_oom is single-threaded) */
	while (c->pos < c->len) {
		uint8_t op = next8(c) % NR_OPS;
		int i = next8(c) % FZ_SLOTS;
		struct fz_block *b = &c->slot[i];
		switch (op) {
		case OP_MALLOC:
		case OP_CALLOC:
		case OP_POSIX_MEMALIGN:
		case OP_ALIGNED_ALLOC:
		case OP_MEMALIGN:
		case OP_VALLOC:
		case OP_PVALLOC:
			op_alloc(c, op, i);
			break;
		case OP_REALLOC:
		case OP_REALLOCARRAY:
			op_realloc(c, op, i);
			break;
		case OP_FREE:
		case OP_FREE_SIZED:
			if (b->p) {
				fz_verify(b, b->usable, "free");
				if (op == OP_FREE)
					pcpm_free(b->p);
				else /* preload's free_sized: the same path under its own name */
					pcpm_free_call(b->p, "free_sized");
				drop_slot(c, i);
			} else if (op == OP_FREE) {
				pcpm_free(NULL);
			}
			break;
		case OP_USABLE:
			if (b->p) {
				size_t u = pcpm_usable_size(b->p);
				if (u != b->usable)
					fz_fail("usable size of %p changed from %zu to %zu", (void *)b->p,
						b->usable, u);
			} else if (pcpm_usable_size(NULL) != 0) {
				fz_fail("malloc_usable_size(NULL) != 0");
			}
			break;
		case OP_TRIM:
			if (c->allow_trim) {
				int r = pcpm_trim(next8(c));
				if (r != 0 && r != 1)
					fz_fail("malloc_trim returned %d", r);
			}
			break;
		case OP_GIVE:
			if (b->p && c->ho) {
				fz_verify(b, b->usable, "hand-off");
				if (!c->ho->give(c, b))
					pcpm_free(b->p);
				drop_slot(c, i);
			}
			break;
		case OP_TAKE:
			if (!b->p && c->ho) {
				size_t size = next16(c) % (SLAB_MAX_SIZE * 4);
				if (c->ho->take(c, b, size)) {
					check_new(c, b, "malloc on another thread");
					fz_verify(b, b->usable, "received");
					c->live += b->req;
				}
			}
			break;
		case OP_THREAD_EXIT:
			if (c->ho && c->ho->thread_exit)
				c->ho->thread_exit(c);
			break;
		case OP_FREE_KEYED:
			/* The free path takes a block whose second word is PCPM_FREE_KEY for a
			 * possible double free and confirms it on the slow path; live data that
			 * happens to hold the key must be freed normally, not reported. */
			if (b->p && b->usable >= 16) {
				fz_verify(b, b->usable, "free");
				((uintptr_t *)b->p)[1] = PCPM_FREE_KEY;
				if (next8(c) & 1)
					pcpm_free(b->p);
				else
					pcpm_free_call(b->p, "free_sized");
				drop_slot(c, i);
			}
			break;
		case OP_WRITE:
			if (b->p) {
				fz_verify(b, b->usable, "rewrite");
				c->serial += 2;
				b->seed = c->serial | 1;
				fz_fill(b);
			}
			break;
		}
	}
	fz_free_all(c);
}

void fz_free_all(struct fz_ctx *c)
{
	for (int i = 0; i < FZ_SLOTS; i++) {
		if (c->slot[i].p) {
			fz_verify(&c->slot[i], c->slot[i].usable, "free at end");
			pcpm_free(c->slot[i].p);
			drop_slot(c, i);
		}
	}
	if (c->live)
		fz_fail("shadow model: %zu live bytes after freeing everything", c->live);
}

void fz_check_empty(const char *when)
{
	pcpm_trim(0);
	struct pcpm_mallinfo mi;
	pcpm_mallinfo(&mi);
	if (mi.uordblks || mi.hblks || mi.hblkhd)
		fz_fail("%s: leak: %zu bytes of pages in use, %zu huge mappings (%zu bytes) after "
			"everything was freed",
			when, mi.uordblks, mi.hblks, mi.hblkhd);
}
