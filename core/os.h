/*
 * os.h - the one OS layer of pcpmalloc: locks, virtual memory, environment, messages, and
 * the signal-nesting flags every slow path reads (pcpm_nested, at the end); the clocks are
 * clock.h's (clock.c, below os.c), included here.
 *
 * Every mmap/mprotect/madvise, futex and environment read of the allocator lives
 * behind these calls (mimalloc's prim layer is the model).  Nothing here calls malloc.
 * Thread-safety: all functions are thread-safe; pcpm_lock_t is a mutex.
 */
#ifndef PCPM_OS_H
#define PCPM_OS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

/*
 * PCPM_HOT: small globals that every process writes while the allocator starts.  They go to
 * .data, whose page ld.so has already written (it zeroes the start of .bss there), instead
 * of being spread over the pages of .bss, each of which costs a page fault on first touch
 * (two when it is read before it is written).  Worth about 5 faults per process start.
 */
#define PCPM_HOT __attribute__((section(".data.pcpm_hot")))

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define PCPM_NOINLINE __attribute__((noinline))
#define PCPM_COLD __attribute__((cold, noinline))
#define PCPM_HIDDEN __attribute__((visibility("hidden")))

/* Base page: 4 KiB, the kernel's order-0 page on x86-64 (PAGE_SHIFT 12). */
#define PAGE_SHIFT 12
#define PAGE_SIZE (1UL << PAGE_SHIFT)
#define CACHELINE 64
/*
 * Layout of data that several CPUs touch (the kernel's __read_mostly and
 * ____cacheline_aligned): PCPM_READ_MOSTLY for globals written at start-up and read on
 * every path (they share PCPM_HOT's section: written once, then read); PCPM_CACHELINE_ALIGNED
 * starts a field or object on a cache line of its own, for locks and fields that several CPUs
 * write, so they do not invalidate the lines that others only read.
 */
#define PCPM_READ_MOSTLY PCPM_HOT
#define PCPM_CACHELINE_ALIGNED __attribute__((aligned(CACHELINE)))

/* Each argument evaluated once, as the kernel's min()/max(): MAX(f(), 0) with the plain
 * ternary called f twice (new_slabs: pcp_alloc_bulk's first batch of slab pages leaked, 2 MiB
 * in use per 32 order-4 slabs after malloc_trim).  Both in the ternary's type; not for
 * constant expressions. */
#define MIN(a, b)                                                                          \
	({                                                                                 \
		__typeof__(1 ? (a) : (b)) min_a_ = (a), min_b_ = (b);                      \
		min_a_ < min_b_ ? min_a_ : min_b_;                                         \
	})
#define MAX(a, b)                                                                          \
	({                                                                                 \
		__typeof__(1 ? (a) : (b)) max_a_ = (a), max_b_ = (b);                      \
		max_a_ > max_b_ ? max_a_ : max_b_;                                         \
	})
#define ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((uintptr_t)(a)-1))

/*
 * pcpm_lock_t: a futex mutex (0 free, 1 held, 2 held with waiters).  It spins briefly and
 * then sleeps, so a holder that is preempted does not make others spin forever - the reason
 * kernel-pcp.md §12.1 gives for not using a pure spinlock in user space.
 */
typedef struct {
	_Atomic int v;
} pcpm_lock_t;

#define PCPM_LOCK_INIT { 0 }

/* Slow path of pcpm_lock(); returns the nanoseconds spent waiting. */
uint64_t pcpm_lock_wait(pcpm_lock_t *l);

static inline bool pcpm_trylock(pcpm_lock_t *l)
{
	int z = 0;
	return atomic_compare_exchange_strong_explicit(&l->v, &z, 1, memory_order_acquire,
						       memory_order_relaxed);
}

/* Takes the lock; returns 0 when it was free, else the nanoseconds spent waiting (>= 1). */
static inline uint64_t pcpm_lock(pcpm_lock_t *l)
{
	if (likely(pcpm_trylock(l)))
		return 0;
	return pcpm_lock_wait(l);
}

void pcpm_unlock_wake(pcpm_lock_t *l);
static inline void pcpm_unlock(pcpm_lock_t *l)
{
	if (unlikely(atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2))
		pcpm_unlock_wake(l);
}

/* Re-initialise a lock in a fork child (the parent's holders do not exist there). */
static inline void pcpm_lock_reset(pcpm_lock_t *l)
{
	atomic_store_explicit(&l->v, 0, memory_order_relaxed);
}

/*
 * Virtual memory.  Sizes are bytes, multiples of PAGE_SIZE; align is a power of two.
 * pcpm_os_reserve: PROT_NONE, not committed (no swap/overcommit charge); NULL on failure.
 * pcpm_os_commit: make [p, p+len) read/write; false on failure (ENOMEM).
 * pcpm_os_map: a committed read/write anonymous mapping aligned to align; NULL on failure.
 * pcpm_os_remap: mremap [old, old+oldlen) to len bytes, in place (dst NULL) or moved onto
 *   the reservation at dst; the new address, NULL on failure (the old mapping stays).
 * pcpm_os_purge: give the pages back to the kernel (MADV_DONTNEED: they read as zero after).
 *   False when madvise failed (EAGAIN, or EINVAL on mlock'ed pages): the pages keep their
 *   contents, so the caller must not treat them as zeroed (and may report it).  errno is
 *   preserved.
 */
void *pcpm_os_reserve(size_t len, size_t align);
/* Reserves [p, p+len) exactly (PROT_NONE, MAP_FIXED_NOREPLACE); false when any of it is
 * mapped already or the kernel refuses (ENOMEM); errno preserved. */
bool pcpm_os_reserve_at(void *p, size_t len);
/* Is the address space limited (RLIMIT_AS, ulimit -v)?  Reservations then count in full. */
bool pcpm_os_as_limited(void);
/*
 * The address space a process may map: bytes.  x86-64 and arm64 with 4-level page tables give
 * user space 2^47 bytes (mmap never goes above that without an address hint, even with 5
 * levels); RLIMIT_AS, when lower, caps it.  A request above it fails whatever the allocator
 * gives back (issue 26 item 6).  Thread-safe; errno kept.
 */
#define PCPM_USER_VA_BYTES ((size_t)1 << 47)
size_t pcpm_os_as_limit(void);
bool pcpm_os_commit(void *p, size_t len);
void *pcpm_os_map(size_t len, size_t align);
void pcpm_os_unmap(void *p, size_t len);
void *pcpm_os_remap(void *old, size_t oldlen, size_t len, void *dst);
bool pcpm_os_purge(void *p, size_t len); /* false: madvise failed (errno kept) */
/* mincore: vec[i] & 1 set when page i of [p, p+len) (p page aligned, len / PAGE_SIZE pages)
 * is resident; false when it failed (errno kept).  A page that is not resident reads zero
 * unless it was swapped out (pcpm_os_purge makes it read zero either way). */
bool pcpm_os_resident(const void *p, size_t len, unsigned char *vec);
extern int pcpm_purge_errno; /* errno of the last failed purge (racy; for the report) */
/* Makes [p, p+len) inaccessible (a guard page: PROT_NONE); false on failure. */
bool pcpm_os_guard(void *p, size_t len);
/* A guard over [p, p+len) inside a read/write anonymous mapping (page aligned): every access
 * faults (SIGSEGV) until pcpm_os_guard_remove, after which the pages read as zero.
 * MADV_GUARD_INSTALL where the kernel has it (no VMA split), else mprotect; one of the pair
 * is used for the whole process.  False on failure.  Thread-safe. */
bool pcpm_os_guard_install(void *p, size_t len);
bool pcpm_os_guard_remove(void *p, size_t len);
/* Replaces whatever is mapped at [p, p+len) (page aligned) by an empty PROT_NONE reservation
 * in one call (MAP_FIXED: no moment in which another mmap could take the range); the pages
 * that were there are freed.  False on failure (ENOMEM; errno preserved). */
bool pcpm_os_reserve_over(void *p, size_t len);
/*
 * Moves the pages of the read/write mapping [old, old+len) onto the reservation dst (len
 * bytes, page aligned; mremap moves page tables, so the pages stay resident, no copy, no
 * fault) and leaves [old, old+len) reserved PROT_NONE and empty, so that any access there
 * faults (SIGSEGV) while the pages live on at dst: the secure mode's huge cache.  mremap's
 * MREMAP_DONTUNMAP (Linux 5.13 for private anonymous memory) keeps old mapped between the
 * two calls; older kernels get a plain move and a MAP_FIXED_NOREPLACE reservation.
 * Returns 1 moved and old reserved, 0 moved but old left unmapped (the reservation failed),
 * -1 nothing moved (errno set).  Thread-safe.
 */
int pcpm_os_move_away(void *old, size_t len, void *dst);

#ifdef PCPM_FAULT_INJECT
/* Test builds only (os.c): make the Nth and following VM calls fail. */
extern _Atomic long pcpm_fault_after, pcpm_fault_count, pcpm_fault_hits;
#endif

/*
 * pcpm_os_bind_node: mbind(2) [p, p+len) (page aligned) to the kernel's node os_node, by raw
 * syscall (no libnuma): strict = MPOL_BIND (pages only from that node), else MPOL_PREFERRED
 * (that node first, others when it is full).  Pages not yet faulted follow the policy; returns
 * 0, or -1 with errno from the kernel (EINVAL for a node the machine lacks).
 */
int pcpm_os_bind_node(void *p, size_t len, int os_node, bool strict);

/* (the clocks, pcpm_now_ms, pcpm_now_ns, pcpm_cycles: clock.h) */

/*
 * glibc's own allocator, for blocks that are not pcpmalloc's (arena.h: pcpm_owns): a plugin
 * loaded with RTLD_DEEPBIND, any code that reaches glibc's malloc directly.  glibc's
 * __libc_free, __libc_realloc and malloc_usable_size are looked up once with
 * dlsym(RTLD_NEXT) on the first foreign block (never during initialisation); when they
 * cannot be found the call aborts as for any invalid pointer.  errno as glibc leaves it.
 */
void pcpm_foreign_free(void *p, const char *call);
void *pcpm_foreign_realloc(void *p, size_t size);
size_t pcpm_foreign_usable(const void *p, const char *call);

/* getenv() that reads environ directly: usable before libc finished starting up. */
const char *pcpm_getenv(const char *name);

/*
 * The environment entries ("NAME=value") that start with prefix, in one pass over environ:
 * up to max of them are stored in out; returns how many there are.  Lets the tunables be
 * read with one scan of the environment instead of one per tunable.
 */
size_t pcpm_env_prefixed(const char *prefix, const char **out, size_t max);
/* The value of name among entries found by pcpm_env_prefixed; NULL when absent. */
const char *pcpm_env_find(const char *const *entries, size_t n, const char *name);

/* Number of possible CPUs (from /sys/devices/system/cpu/possible; no malloc). >= 1. */
int pcpm_possible_cpus(void);
/*
 * sysconf() without the program's wrapper: glibc's own name for it, which a preloaded
 * sysconf() does not replace.  The start-up calls it under the init lock, where a wrapper that
 * looks its target up with dlsym would wait for the loader's lock while another thread holds
 * that lock and waits for the init lock (issue 26 item 1; test_init_race).  Thread-safe; -1
 * with errno as sysconf.
 */
long __sysconf(int name);
static inline long pcpm_sysconf(int name)
{
	return __sysconf(name);
}

/*
 * A mapping of a file shared with other processes (the live page, live.h): creates path with
 * mode 0600 (O_EXCL and O_NOFOLLOW: never another user's file or a symlink; a file of this
 * user left there by a dead process of the same pid is replaced), sizes it to len bytes
 * (zero-filled) and maps it read/write, MAP_SHARED.  NULL on failure, errno set.
 */
void *pcpm_os_map_shared_file(const char *path, size_t len);

/* Current resident set size in bytes (/proc/self/statm). */
size_t pcpm_rss_bytes(void);

/* printf-style message to stderr prefixed "pcpmalloc: ", one write(2); never allocates. */
void pcpm_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Same, then abort(): the report for corrupted heaps and invalid/double frees. */
void pcpm_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, cold));

/*
 * snprintf-style append at buf[n] (buf holds len bytes); returns the new length, clamped so
 * that buf stays NUL-terminated.  For messages built on the stack: never allocates.
 */
size_t pcpm_bappend(char *buf, size_t len, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Writes n bytes to stderr (one write(2) where the kernel allows); keeps errno. */
void pcpm_write_stderr(const char *buf, size_t n);

/* A per-process random 64-bit value (getrandom, falling back to clock and address bits). */
uint64_t pcpm_random64(void);
/* In the child after fork(): forgets the value pcpm_random64 kept (the parent keeps it). */
void pcpm_random_fork_child(void);

/*
 * Nesting (kernel-pcp.md §12.2): is this thread inside a signal handler that may have
 * interrupted pcpmalloc, or inside pcpmalloc's own slow path?  Every layer reads it: the slow
 * paths of every layer keep to trylocks while pcpm_nested() holds.  The variables live in
 * os.c; the handler wrapper (preload/signal.c) and tcache.c's enter/exit set them.
 */
/*
 * Signal handlers (see tcache.c): pcpm_sig_depth > 0 while this thread runs a handler that
 * preload/ wrapped; the slow paths then take no lock they could wait for.  Enter/exit are
 * async-signal-safe and nest; exit returns with every signal blocked (the handler's return
 * restores the interrupted mask), so it must be the handler's last call.
 */
extern __thread int pcpm_sig_depth __attribute__((tls_model("initial-exec"))) PCPM_HIDDEN;

/*
 * Set for good in the child of a fork() called by a signal handler that had interrupted
 * pcpmalloc (pcpm_fork_prepare could take no lock without deadlocking on the interrupted
 * code's): the locks other threads held at the fork stay taken in the child, so every
 * thread of the child keeps to the no-wait paths of the handlers.
 */
extern int pcpm_nolock_all PCPM_HIDDEN;

/* Must the slow paths avoid waiting for a lock (a signal handler, or such a child)? */
static inline bool pcpm_nested(void)
{
	return pcpm_sig_depth || pcpm_nolock_all;
}

/*
 * The per-thread "inside allocator" flag of kernel-pcp.md §12.2, kept by the slow paths only
 * (the fast paths run entirely in pcpmalloc's own code, which the signal wrapper recognises
 * from the interrupted program counter).  A handler that interrupted neither runs the normal
 * paths, and may leave with siglongjmp.  PCPM_INSIDE_BEGIN/END bracket a slow path.
 */
extern __thread int pcpm_inside __attribute__((tls_model("initial-exec"))) PCPM_HIDDEN;
#define PCPM_INSIDE_BEGIN()                                                                        \
	int pcpm_was_inside_ = pcpm_inside;                                                        \
	pcpm_inside = 1;                                                                           \
	atomic_signal_fence(memory_order_seq_cst)
#define PCPM_INSIDE_END()                                                                          \
	do {                                                                                       \
		atomic_signal_fence(memory_order_seq_cst);                                         \
		pcpm_inside = pcpm_was_inside_;                                                    \
	} while (0)

#endif
