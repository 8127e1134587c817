/*
 * prof.c - the heap profiler's records (prof.h): stack buckets, the live table of sampled
 * blocks, and the stack walk.  A leaf: calls os.c only; called by the sampling front end
 * (prof_mode.c), the dumps (prof_dump.c), start-up and fork.
 *
 * Nothing here takes a lock or allocates, so that a signal handler that interrupted any of
 * it, a thread inside the dynamic loader, or a fork child can run it (issue 25).  Three
 * tables are mapped once by prof_tables_init:
 *  - the buckets: one per distinct stack, carved from a bump area and published in an
 *    open-addressing index by compare-and-swap (a thread that loses the race for a slot
 *    keeps its copy for the next free slot, so nothing is wasted);
 *  - the live table: the address of every sampled block still allocated, in sets of 8
 *    slots (one cache line) chosen by the address's hash, with its bucket, size and weight
 *    beside it.  A block lives only in its own set: a free looks at one line, and a set
 *    that never holds tombstones needs no clean-up.  A full set drops the sample (counted);
 *    16384 sets hold far more than the samples a heap of tens of GiB has at 512 KiB.
 *
 * The stack walk.  glibc's backtrace() is not usable here: its first call dlopens libgcc_s
 * (a library load, and the loader lock, on the allocating path).  So:
 *  - when the program loaded libgcc_s itself (every C++ program, or `pcpmalloc prof`, which
 *    preloads it), its _Unwind_Backtrace is used: a weak reference the loader resolves when
 *    it relocates this library - no dlopen, no dlsym.  It reads the DWARF unwind tables,
 *    finds them with glibc's _dl_find_object (lock-free since glibc 2.35) and allocates
 *    nothing; it takes a lock only for frames registered at run time by a JIT;
 *  - else a frame-pointer walk, bounded by the stack mapping of the thread (read once per
 *    thread from /proc/self/maps with plain system calls): each frame must lie above the
 *    previous one and inside that mapping, so a program built without frame pointers gives
 *    short stacks, never a fault.  pcpmalloc's own code keeps no frame pointer (the fast
 *    path would pay for it), so the walk starts from the frame pointer and the return
 *    address the front end's entry was called with, which are the program's: the entries
 *    are reached by tail calls from malloc, and a callee-saved register reaches them as
 *    the program left it.
 */
#define _GNU_SOURCE
#include "prof.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

/* ---- the tables ------------------------------------------------------------------------ */

#define BUCKET_SLOTS (1u << 15) /* the index: 256 KiB of pointers */
#define BUCKET_PROBE 64		/* slots tried before the overflow bucket */
#define BUCKET_AREA (8u << 20)	/* bytes of buckets (some 20000 stacks of 48 frames) */
#define LIVE_SETS (1u << 14)	/* sets of 8 slots: 131072 live samples at most */
#define LIVE_WAYS 8

struct live_info {
	struct prof_bucket *b;
	uint64_t bytes_weight; /* requested bytes << 16 | objects it stands for */
};

static _Atomic(struct prof_bucket *) *bucket_index;
static char *bucket_area;
static _Atomic size_t bucket_used;
static struct prof_bucket overflow_bucket; /* stacks the tables had no room for */
static _Atomic uintptr_t *live_ptr;	   /* LIVE_SETS * LIVE_WAYS addresses, 0 = free */
static struct live_info *live_info;
/* live samples per set: a free of a block that was not sampled (most page-aligned frees)
 * reads one byte of this 16 KiB array, which stays in the cache, and not the set's line */
static _Atomic uint8_t *live_count;
static _Atomic uint64_t dropped;

bool prof_tables_init(void)
{
	bucket_index = pcpm_os_map(BUCKET_SLOTS * sizeof(*bucket_index), 0);
	bucket_area = pcpm_os_map(BUCKET_AREA, 0);
	live_ptr = pcpm_os_map(LIVE_SETS * LIVE_WAYS * sizeof(*live_ptr), CACHELINE);
	live_info = pcpm_os_map(LIVE_SETS * LIVE_WAYS * sizeof(*live_info), 0);
	live_count = pcpm_os_map(LIVE_SETS, 0);
	return bucket_index && bucket_area && live_ptr && live_info && live_count;
}

void prof_tables_fork_child(void)
{
	/* the pages read as zero again: an empty profile, as a fresh process's */
	pcpm_os_purge(bucket_index, BUCKET_SLOTS * sizeof(*bucket_index));
	pcpm_os_purge(bucket_area, BUCKET_AREA);
	pcpm_os_purge(live_ptr, LIVE_SETS * LIVE_WAYS * sizeof(*live_ptr));
	pcpm_os_purge(live_info, LIVE_SETS * LIVE_WAYS * sizeof(*live_info));
	pcpm_os_purge(live_count, LIVE_SETS);
	atomic_store(&bucket_used, 0);
	atomic_store(&dropped, 0);
	memset(&overflow_bucket, 0, sizeof(overflow_bucket));
}

static uint64_t stack_hash(const uintptr_t *pcs, unsigned depth)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ depth;
	for (unsigned i = 0; i < depth; i++) {
		h ^= pcs[i];
		h *= 0xff51afd7ed558ccdull; /* murmur3's finaliser constants */
		h ^= h >> 33;
	}
	return h;
}

struct prof_bucket *prof_bucket_get(const uintptr_t *pcs, unsigned depth)
{
	if (!depth || !bucket_index)
		return &overflow_bucket;
	uint64_t h = stack_hash(pcs, depth);
	size_t need = sizeof(struct prof_bucket) + depth * sizeof(uintptr_t);
	struct prof_bucket *mine = NULL;
	for (unsigned i = 0; i < BUCKET_PROBE; i++) {
		_Atomic(struct prof_bucket *) *slot = &bucket_index[(h + i) & (BUCKET_SLOTS - 1)];
		struct prof_bucket *b = atomic_load_explicit(slot, memory_order_acquire);
		if (!b) {
			if (!mine) { /* carve and fill a bucket before publishing it */
				size_t off = atomic_fetch_add_explicit(&bucket_used, need,
								       memory_order_relaxed);
				if (off + need > BUCKET_AREA)
					return &overflow_bucket;
				mine = (struct prof_bucket *)(bucket_area + off);
				mine->hash = h;
				mine->depth = depth;
				memcpy(mine->pcs, pcs, depth * sizeof(uintptr_t));
			}
			if (atomic_compare_exchange_strong_explicit(slot, &b, mine,
								    memory_order_release,
								    memory_order_acquire))
				return mine;
			/* another thread published a bucket here first: b is it */
		}
		if (b->hash == h && b->depth == depth &&
		    !memcmp(b->pcs, pcs, depth * sizeof(uintptr_t)))
			return b; /* (a carved copy of ours stays unused: a lost race, rare) */
	}
	return &overflow_bucket;
}

void prof_for_each_bucket(void (*fn)(const struct prof_bucket *b, void *arg), void *arg)
{
	if (bucket_index)
		for (unsigned i = 0; i < BUCKET_SLOTS; i++) {
			struct prof_bucket *b =
				atomic_load_explicit(&bucket_index[i], memory_order_acquire);
			if (b)
				fn(b, arg);
		}
	fn(&overflow_bucket, arg);
}

/* The first slot of p's set (its index in live_count: that / LIVE_WAYS). */
static inline unsigned live_set(const void *p)
{
	uint64_t x = (uintptr_t)p >> PAGE_SHIFT; /* sampled blocks are page aligned */
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull; /* splitmix64's mixer */
	x ^= x >> 32;
	return (unsigned)(x & (LIVE_SETS - 1)) * LIVE_WAYS;
}

/* Puts p into a free slot of its set with its record: false (counted as dropped) when the
 * set is full.  weight: at most 0xffff. */
static bool live_insert(void *p, size_t bytes, unsigned weight, struct prof_bucket *b)
{
	if (!live_ptr)
		return false;
	unsigned s = live_set(p);
	for (unsigned i = s; i < s + LIVE_WAYS; i++) {
		uintptr_t empty = 0;
		if (atomic_load_explicit(&live_ptr[i], memory_order_relaxed))
			continue;
		if (!atomic_compare_exchange_strong_explicit(&live_ptr[i], &empty, (uintptr_t)p,
							     memory_order_relaxed,
							     memory_order_relaxed))
			continue;
		/* the slot is ours: nobody reads its info before p is freed, which the
		 * program orders after this malloc returned */
		atomic_fetch_add_explicit(&live_count[s / LIVE_WAYS], 1, memory_order_relaxed);
		live_info[i].b = b;
		live_info[i].bytes_weight = (uint64_t)bytes << 16 | weight;
		return true;
	}
	atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
	return false;
}

bool prof_sample_add(void *p, size_t bytes, unsigned weight, struct prof_bucket *b)
{
	if (weight > 0xffff)
		weight = 0xffff;
	if (!live_insert(p, bytes, weight, b))
		return false;
	atomic_fetch_add_explicit(&b->alloc_objs, weight, memory_order_relaxed);
	atomic_fetch_add_explicit(&b->alloc_bytes, (uint64_t)bytes * weight, memory_order_relaxed);
	return true;
}

void prof_sample_restore(void *p, const struct prof_sample *was)
{
	if (!live_insert(p, was->bytes, was->weight, was->b))
		return; /* counted as freed, and as dropped */
	atomic_fetch_sub_explicit(&was->b->free_objs, was->weight, memory_order_relaxed);
	atomic_fetch_sub_explicit(&was->b->free_bytes, (uint64_t)was->bytes * was->weight,
				  memory_order_relaxed);
}

bool prof_sample_forget(void *p, struct prof_sample *was)
{
	if (!live_ptr)
		return false;
	unsigned s = live_set(p);
	/* a count of 0 is exact for p: p's own add happened before its free */
	if (!atomic_load_explicit(&live_count[s / LIVE_WAYS], memory_order_relaxed))
		return false;
	for (unsigned i = s; i < s + LIVE_WAYS; i++) {
		if (atomic_load_explicit(&live_ptr[i], memory_order_relaxed) != (uintptr_t)p)
			continue;
		struct prof_bucket *b = live_info[i].b;
		uint64_t bw = live_info[i].bytes_weight;
		uint64_t w = bw & 0xffff;
		atomic_fetch_add_explicit(&b->free_objs, w, memory_order_relaxed);
		atomic_fetch_add_explicit(&b->free_bytes, (bw >> 16) * w, memory_order_relaxed);
		if (was)
			*was = (struct prof_sample){ b, (size_t)(bw >> 16), (unsigned)w };
		/* release: the info was read before another sample may take the slot */
		atomic_store_explicit(&live_ptr[i], 0, memory_order_release);
		atomic_fetch_sub_explicit(&live_count[s / LIVE_WAYS], 1, memory_order_relaxed);
		return true;
	}
	return false;
}

bool prof_sample_live(const void *p)
{
	if (!live_ptr)
		return false;
	unsigned s = live_set(p);
	for (unsigned i = s; i < s + LIVE_WAYS; i++)
		if (atomic_load_explicit(&live_ptr[i], memory_order_relaxed) == (uintptr_t)p)
			return true;
	return false;
}

uint64_t prof_dropped(void)
{
	return atomic_load_explicit(&dropped, memory_order_relaxed);
}

/* ---- own code ---------------------------------------------------------------------------- */

/* The executable segments of the object this file is linked into (libpcpmalloc.so), from
 * its own program headers: the linker's __ehdr_start is its ELF header. */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));
static uintptr_t own_lo[4], own_hi[4];
static _Atomic int own_n = -1;

/* (UBSan knows __ehdr_start as one Ehdr and flags the program headers behind it) */
__attribute__((no_sanitize("undefined"))) static void find_own_text(void)
{
	const ElfW(Ehdr) *eh = &__ehdr_start;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
	uintptr_t bias = (uintptr_t)eh;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			bias -= ph[i].p_vaddr;
			break;
		}
	int n = 0;
	for (int i = 0; i < eh->e_phnum && n < 4; i++)
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X)) {
			own_lo[n] = bias + ph[i].p_vaddr;
			own_hi[n] = own_lo[n] + ph[i].p_memsz;
			n++;
		}
	atomic_store_explicit(&own_n, n, memory_order_release);
}

bool prof_own_pc(uintptr_t pc)
{
	int n = atomic_load_explicit(&own_n, memory_order_acquire);
	if (n < 0) { /* computing it twice in a race is harmless: same values */
		find_own_text();
		n = atomic_load_explicit(&own_n, memory_order_acquire);
	}
	for (int i = 0; i < n; i++)
		if (pc >= own_lo[i] && pc < own_hi[i])
			return true;
	return false;
}

/* ---- the unwinder of libgcc_s, when the program loaded it -------------------------------- */

struct _Unwind_Context;
typedef int (*unwind_trace_fn)(struct _Unwind_Context *, void *);
extern int _Unwind_Backtrace(unwind_trace_fn fn, void *arg) __attribute__((weak));
extern uintptr_t _Unwind_GetIP(struct _Unwind_Context *ctx) __attribute__((weak));

struct walk {
	uintptr_t *pcs;
	unsigned n, max;
	bool past_own; /* the frames of pcpmalloc itself are behind */
};

static int unwind_frame(struct _Unwind_Context *ctx, void *arg)
{
	struct walk *w = arg;
	uintptr_t ip = _Unwind_GetIP(ctx);
	if (!ip)
		return 5; /* _URC_END_OF_STACK: stop */
	if (!w->past_own && prof_own_pc(ip))
		return 0;
	w->past_own = true;
	w->pcs[w->n++] = ip;
	return w->n < w->max ? 0 : 5;
}

/* ---- the frame-pointer walk -------------------------------------------------------------- */

/* The calling thread's stack mapping, learnt once (and again when the stack pointer lies
 * outside it: an alternate signal stack). */
static __thread uintptr_t stack_lo __attribute__((tls_model("initial-exec")));
static __thread uintptr_t stack_hi __attribute__((tls_model("initial-exec")));

static uintptr_t parse_hex(const char **s)
{
	uintptr_t v = 0;
	for (;; (*s)++) {
		char c = **s;
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
			   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
						  : 16;
		if (d == 16)
			return v;
		v = v << 4 | d;
	}
}

/* The mapping of /proc/self/maps that holds sp, read in small pieces (a thread's stack may
 * be 16 KiB): false when none is found. */
static bool find_stack(uintptr_t sp)
{
	int e = errno;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		errno = e;
		return false;
	}
	char buf[256];
	size_t have = 0;
	bool found = false;
	for (;;) {
		ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = 0;
		char *nl;
		char *line = buf;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			const char *s = line;
			uintptr_t lo = parse_hex(&s);
			uintptr_t hi = *s == '-' ? (s++, parse_hex(&s)) : 0;
			if (sp >= lo && sp < hi) {
				stack_lo = lo;
				stack_hi = hi;
				found = true;
				goto out;
			}
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) /* a line longer than the buffer: its tail */
			have = 0;
	}
out:
	close(fd);
	errno = e;
	return found;
}

static unsigned fp_walk(uintptr_t *pcs, unsigned max, uintptr_t leaf, uintptr_t fp)
{
	unsigned n = 0;
	if (leaf && !prof_own_pc(leaf))
		pcs[n++] = leaf;
	uintptr_t sp = (uintptr_t)&n;
	if ((sp < stack_lo || sp >= stack_hi) && !find_stack(sp))
		return n;
	uintptr_t hi = stack_hi;
	while (n < max) {
		/* (hi - fp, not fp + 16: a garbage fp near the top of the address space wraps) */
		if ((fp & 7) || fp < sp || fp >= hi || hi - fp < 2 * sizeof(uintptr_t))
			break;
		uintptr_t next = ((const uintptr_t *)fp)[0];
		uintptr_t ret = ((const uintptr_t *)fp)[1];
		if (ret < PAGE_SIZE)
			break;
		if (!prof_own_pc(ret))
			pcs[n++] = ret;
		if (next <= fp)
			break;
		fp = next;
	}
	return n;
}

unsigned prof_backtrace(uintptr_t *pcs, unsigned max, uintptr_t leaf, uintptr_t fp)
{
	if (_Unwind_Backtrace && _Unwind_GetIP) {
		struct walk w = { pcs, 0, max, false };
		_Unwind_Backtrace(unwind_frame, &w);
		if (w.n)
			return w.n;
	}
	return fp_walk(pcs, max, leaf, fp);
}
