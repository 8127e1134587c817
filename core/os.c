/*
 * os.c - the OS primitives of pcpmalloc (see os.h).  The only file that issues mmap,
 * mprotect, madvise and futex calls (clock reads: clock.c, below it).  Calls libc, the
 * kernel and clock.c only.
 */
#define _GNU_SOURCE
#include "os.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/mempolicy.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

static long futex(_Atomic int *uaddr, int op, int val)
{
	return syscall(SYS_futex, (int *)uaddr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

/*
 * Drepper's three-state mutex ("Futexes are tricky"), with a short spin first: most
 * holds (a batch of pages or objects) are shorter than a futex round trip.
 */
uint64_t pcpm_lock_wait(pcpm_lock_t *l)
{
	uint64_t t0 = pcpm_now_ns();
	for (int i = 0; i < 100; i++) {
		__builtin_ia32_pause();
		if (atomic_load_explicit(&l->v, memory_order_relaxed) == 0 && pcpm_trylock(l))
			goto out;
	}
	/* a futex wait that finds the word changed fails with EAGAIN (EINTR for a signal): the
	 * caller's errno is kept here, once per wait, not on every call's fast path (free and
	 * successful allocations leave errno alone, as glibc since 2.33 and POSIX) */
	int saved_errno = errno;
	int c = atomic_exchange_explicit(&l->v, 2, memory_order_acquire);
	while (c != 0) {
		futex(&l->v, FUTEX_WAIT, 2);
		c = atomic_exchange_explicit(&l->v, 2, memory_order_acquire);
	}
	errno = saved_errno;
out:;
	uint64_t dt = pcpm_now_ns() - t0;
	return dt ? dt : 1;
}

void pcpm_unlock_wake(pcpm_lock_t *l)
{
	int saved_errno = errno;
	futex(&l->v, FUTEX_WAKE, 1);
	errno = saved_errno;
}

/*
 * The memory system calls, made directly rather than through libc's mmap, munmap, mprotect,
 * madvise and mremap: the start-up calls them under the init lock, and a program's preloaded
 * wrapper of one of those names that looks its target up with dlsym would wait there for the
 * loader's lock while another thread holds that lock and waits for the init lock (issue 26
 * item 1; test_init_race wraps mmap).  Same results and errno as libc's.  Sanitizer builds
 * keep libc's names: ASan and TSan watch mappings through their interceptors.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define os_mmap mmap
#define os_munmap munmap
#define os_mprotect mprotect
#define os_madvise madvise
#define os_mremap mremap
#else
static inline void *os_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static inline int os_munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

static inline int os_mprotect(void *addr, size_t len, int prot)
{
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

static inline int os_madvise(void *addr, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, addr, len, advice);
}

static inline void *os_mremap(void *old, size_t oldlen, size_t len, int flags, ...)
{
	void *dst = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		dst = va_arg(ap, void *);
		va_end(ap);
	}
	return (void *)syscall(SYS_mremap, old, oldlen, len, flags, dst);
}
#endif

#ifdef PCPM_FAULT_INJECT
/*
 * Out-of-memory injection, compiled into test builds only (meson's pcpcore_test library):
 * after pcpm_fault_after more calls of mmap/mprotect/mremap/madvise, the next
 * pcpm_fault_count calls fail (-1: all of them) as the kernel fails them when memory or
 * address space runs out.  pcpm_fault_after < 0 disables it.  munmap never fails here.
 */
_Atomic long pcpm_fault_after = -1, pcpm_fault_count, pcpm_fault_hits;

static bool fault(int err)
{
	if (atomic_load_explicit(&pcpm_fault_after, memory_order_relaxed) < 0)
		return false;
	if (atomic_fetch_sub_explicit(&pcpm_fault_after, 1, memory_order_relaxed) > 0)
		return false;
	atomic_store_explicit(&pcpm_fault_after, 0, memory_order_relaxed);
	long c = atomic_load_explicit(&pcpm_fault_count, memory_order_relaxed);
	if (c == 0) {
		atomic_store_explicit(&pcpm_fault_after, -1, memory_order_relaxed);
		return false;
	}
	if (c > 0)
		atomic_fetch_sub_explicit(&pcpm_fault_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&pcpm_fault_hits, 1, memory_order_relaxed);
	errno = err;
	return true;
}
#define FAULT(err) unlikely(fault(err))
#else
#define FAULT(err) false
#endif

void *pcpm_os_reserve(size_t len, size_t align)
{
	size_t over = len + (align > PAGE_SIZE ? align : 0);
	if (FAULT(ENOMEM))
		return NULL;
	char *p = os_mmap(NULL, over, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (align <= PAGE_SIZE)
		return p;
	char *a = (char *)ALIGN_UP((uintptr_t)p, align);
	if (a > p)
		os_munmap(p, a - p);
	if (a + len < p + over)
		os_munmap(a + len, (p + over) - (a + len));
	return a;
}

bool pcpm_os_reserve_at(void *p, size_t len)
{
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older kernels take it as a hint */
#endif
	if (FAULT(ENOMEM))
		return false;
	int e = errno;
	char *q = os_mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
		       -1, 0);
	errno = e;
	if (q == MAP_FAILED)
		return false;
	if (q != p) { /* a kernel that ignored the flag placed it elsewhere */
		os_munmap(q, len);
		return false;
	}
	return true;
}

size_t pcpm_os_as_limit(void)
{
	struct rlimit rl;
	/* the system call, not getrlimit(): no wrapper of the program's on a failing path */
	if (syscall(SYS_prlimit64, 0, RLIMIT_AS, NULL, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < PCPM_USER_VA_BYTES)
		return (size_t)rl.rlim_cur;
	return PCPM_USER_VA_BYTES;
}

bool pcpm_os_as_limited(void)
{
	struct rlimit rl;
	int e = errno;
	bool lim = getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
	errno = e;
	return lim;
}

bool pcpm_os_guard(void *p, size_t len)
{
	return os_mprotect(p, len, PROT_NONE) == 0;
}

/*
 * Guard regions without a VMA of their own: MADV_GUARD_INSTALL/REMOVE (Linux 6.13) put
 * markers in the page tables that fault on any access, under the mmap lock taken for
 * reading; mprotect splits the mapping and merges it back, under the lock for writing.
 * Kernels without them (EINVAL), or a mapping that refuses them (mlock'ed), get mprotect;
 * removal then undoes whichever the process has used (both are no-ops where absent).
 */
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#define MADV_GUARD_REMOVE 103
#endif
static _Atomic int guard_madvise = -1; /* -1 not known yet, 1 works, 0 not on this kernel */
static _Atomic bool guard_mprotect;    /* set once a guard was made with mprotect */

bool pcpm_os_guard_install(void *p, size_t len)
{
	int m = atomic_load_explicit(&guard_madvise, memory_order_relaxed);
	if (m != 0) {
		if (os_madvise(p, len, MADV_GUARD_INSTALL) == 0) {
			if (m < 0)
				atomic_store_explicit(&guard_madvise, 1, memory_order_release);
			return true;
		}
		if (m < 0 && errno == EINVAL)
			atomic_store_explicit(&guard_madvise, 0, memory_order_relaxed);
	}
	if (!atomic_load_explicit(&guard_mprotect, memory_order_relaxed))
		atomic_store_explicit(&guard_mprotect, true, memory_order_release);
	return os_mprotect(p, len, PROT_NONE) == 0;
}

bool pcpm_os_guard_remove(void *p, size_t len)
{
	bool ok = true;
	if (atomic_load_explicit(&guard_madvise, memory_order_acquire) > 0)
		ok = os_madvise(p, len, MADV_GUARD_REMOVE) == 0;
	if (atomic_load_explicit(&guard_mprotect, memory_order_acquire))
		ok = os_mprotect(p, len, PROT_READ | PROT_WRITE) == 0 && ok;
	return ok;
}

bool pcpm_os_reserve_over(void *p, size_t len)
{
	if (FAULT(ENOMEM))
		return false;
	int e = errno;
	bool ok = os_mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
		       -1, 0) != MAP_FAILED;
	errno = e;
	return ok;
}

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4 /* Linux 5.7 */
#endif
int pcpm_os_move_away(void *old, size_t len, void *dst)
{
	if (FAULT(ENOMEM))
		return -1;
	void *p = os_mremap(old, len, len, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, dst);
	if (p != MAP_FAILED) {
		/* old is still mapped, empty: swap it for a reservation in one call (MAP_FIXED
		 * replaces; no window in which another mmap could take the range) */
		if (pcpm_os_reserve_over(old, len))
			return 1;
		os_munmap(old, len); /* never leave it readable and writable */
		return 0;
	}
	if (errno != EINVAL)
		return -1;
	if (os_mremap(old, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst) == MAP_FAILED)
		return -1;
	return pcpm_os_reserve_at(old, len) ? 1 : 0;
}

bool pcpm_os_commit(void *p, size_t len)
{
	if (FAULT(ENOMEM))
		return false;
	return os_mprotect(p, len, PROT_READ | PROT_WRITE) == 0;
}

void *pcpm_os_map(size_t len, size_t align)
{
	size_t over = len + (align > PAGE_SIZE ? align : 0);
	if (FAULT(ENOMEM))
		return NULL;
	char *p = os_mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (align <= PAGE_SIZE)
		return p;
	char *a = (char *)ALIGN_UP((uintptr_t)p, align);
	if (a > p)
		os_munmap(p, a - p);
	if (a + len < p + over)
		os_munmap(a + len, (p + over) - (a + len));
	return a;
}

void pcpm_os_unmap(void *p, size_t len)
{
	os_munmap(p, len);
}

void *pcpm_os_remap(void *old, size_t oldlen, size_t len, void *dst)
{
	if (FAULT(ENOMEM))
		return NULL;
	void *p = dst ? os_mremap(old, oldlen, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst)
		      : os_mremap(old, oldlen, len, 0);
	return p == MAP_FAILED ? NULL : p;
}

bool pcpm_os_purge(void *p, size_t len)
{
	int e = errno;
	bool ok = !FAULT(EAGAIN) && os_madvise(p, len, MADV_DONTNEED) == 0;
	if (!ok)
		pcpm_purge_errno = errno;
	errno = e;
	return ok;
}

int pcpm_purge_errno;

bool pcpm_os_resident(const void *p, size_t len, unsigned char *vec)
{
	int e = errno;
	bool ok = syscall(SYS_mincore, p, len, vec) == 0;
	errno = e;
	return ok;
}

int pcpm_os_bind_node(void *p, size_t len, int os_node, bool strict)
{
	/* nodemask: one bit per node, 1024 nodes (CONFIG_NODES_SHIFT 10, the largest x86 one) */
	unsigned long mask[1024 / (8 * sizeof(unsigned long))] = { 0 };
	if (os_node < 0 || os_node >= 1024) {
		errno = EINVAL;
		return -1;
	}
	mask[os_node / (8 * sizeof(unsigned long))] = 1UL << (os_node % (8 * sizeof(unsigned long)));
	long r = syscall(SYS_mbind, p, len, strict ? MPOL_BIND : MPOL_PREFERRED, mask,
			 (unsigned long)(8 * sizeof(mask)), 0UL);
	return r == 0 ? 0 : -1;
}

const char *pcpm_getenv(const char *name)
{
	size_t n = strlen(name);
	char **e = environ;
	if (!e)
		return NULL;
	for (; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

size_t pcpm_env_prefixed(const char *prefix, const char **out, size_t max)
{
	size_t n = 0, plen = strlen(prefix);
	char **e = environ;
	if (!e)
		return 0;
	for (; *e; e++) {
		/* first byte inline: most entries differ there and cost no call */
		if ((*e)[0] != prefix[0] || strncmp(*e, prefix, plen) != 0)
			continue;
		if (n < max)
			out[n] = *e;
		n++;
	}
	return n;
}

const char *pcpm_env_find(const char *const *entries, size_t n, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < n; i++)
		if (strncmp(entries[i], name, len) == 0 && entries[i][len] == '=')
			return entries[i] + len + 1;
	return NULL;
}

/* Reads a small file into buf with raw syscalls (no stdio: it would allocate). */
/* System calls, not libc's open/read/close: this runs under the init lock, where a program's
 * wrapper of those (one that looks its target up with dlsym) could wait for the loader's lock
 * (issue 26 item 1), and they are cancellation points. */
static ssize_t read_small_file(const char *path, char *buf, size_t len)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = syscall(SYS_read, fd, buf, len - 1);
	syscall(SYS_close, fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

int pcpm_possible_cpus(void)
{
	char buf[256];
	int e = errno;
	int max = -1;
	/* The list looks like "0-15" or "0,2-5"; the largest id + 1 is the slot count. */
	if (read_small_file("/sys/devices/system/cpu/possible", buf, sizeof(buf)) > 0) {
		for (char *s = buf; *s;) {
			if (*s >= '0' && *s <= '9') {
				int v = (int)strtol(s, &s, 10);
				max = v > max ? v : max;
			} else {
				s++;
			}
		}
	}
	errno = e;
	if (max < 0) {
		long n = pcpm_sysconf(_SC_NPROCESSORS_ONLN);
		max = n > 0 ? (int)n - 1 : 0;
	}
	return max + 1;
}

void *pcpm_os_map_shared_file(const char *path, size_t len)
{
	int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = open(path, flags, 0600);
	if (fd < 0 && errno == EEXIST) {
		struct stat st;
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
		    unlink(path) == 0)
			fd = open(path, flags, 0600);
	}
	if (fd < 0)
		return NULL;
	void *p = MAP_FAILED;
	if (ftruncate(fd, (off_t)len) == 0)
		p = os_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int e = errno;
	if (p == MAP_FAILED)
		unlink(path);
	close(fd);
	errno = e;
	return p == MAP_FAILED ? NULL : p;
}

size_t pcpm_rss_bytes(void)
{
	char buf[128];
	int e = errno;
	size_t rss = 0;
	if (read_small_file("/proc/self/statm", buf, sizeof(buf)) > 0) {
		char *s = buf;
		strtoul(s, &s, 10);
		rss = strtoul(s, &s, 10) * PAGE_SIZE;
	}
	errno = e;
	return rss;
}

static void vmsg(const char *fmt, va_list ap)
{
	char buf[512];
	int e = errno;
	int n = snprintf(buf, sizeof(buf), "pcpmalloc: ");
	n += vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	ssize_t w = write(2, buf, n);
	(void)w;
	errno = e;
}

size_t pcpm_bappend(char *buf, size_t len, size_t n, const char *fmt, ...)
{
	if (n >= len)
		return len ? len - 1 : 0;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
	if (m > 0)
		n = n + (size_t)m < len ? n + (size_t)m : len - 1;
	return n;
}

void pcpm_write_stderr(const char *buf, size_t n)
{
	int e = errno;
	while (n) {
		ssize_t w = write(2, buf, n);
		if (w <= 0)
			break;
		buf += w;
		n -= (size_t)w;
	}
	errno = e;
}

void pcpm_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

void pcpm_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	abort();
}

/* One getrandom gives two values: the second is kept for the next call (start-up draws the
 * slab and tcache keys back to back: one system call fewer).  Each value is handed out once
 * (exchange); a fork child drops it (pcpm_random_fork_child) so as not to share it. */
static _Atomic uint64_t spare PCPM_HOT;

uint64_t pcpm_random64(void)
{
	uint64_t r = atomic_exchange_explicit(&spare, 0, memory_order_relaxed);
	if (r)
		return r;
	uint64_t two[2] = { 0, 0 };
	int e = errno;
	/* the system call: start-up draws under the init lock (see read_small_file) */
	if (syscall(SYS_getrandom, two, sizeof(two), GRND_NONBLOCK) == (long)sizeof(two)) {
		atomic_store_explicit(&spare, two[1] | 1, memory_order_relaxed);
		r = two[0];
	} else {
		r = pcpm_now_ns() ^ ((uintptr_t)&r << 16) ^ (uint64_t)getpid() << 40;
	}
	errno = e;
	return r | 1;
}

void pcpm_random_fork_child(void)
{
	atomic_store_explicit(&spare, 0, memory_order_relaxed);
}

/* os.h's nesting flags: signal-handler depth, the no-lock child, the "inside a slow path" flag */
__thread int pcpm_sig_depth __attribute__((tls_model("initial-exec")));
int pcpm_nolock_all;
__thread int pcpm_inside __attribute__((tls_model("initial-exec")));

/* ---- glibc's own allocator, for foreign blocks (os.h) -------------------------------- */

/* glibc's functions, looked up once on the first foreign block: dlsym(RTLD_NEXT) from this
 * library finds the next definition after it, libc's (preload/ exports __libc_free and
 * friends itself, so a plain reference would find pcpmalloc's own). */
static struct {
	void (*free)(void *);
	void *(*realloc)(void *, size_t);
	size_t (*usable)(void *);
	_Atomic int state; /* 0: not looked up, 1: found, 2: not there */
} glibc;

static void foreign_resolve(const void *p, const char *call)
{
	int st = atomic_load_explicit(&glibc.state, memory_order_acquire);
	if (unlikely(st == 0)) {
		int e = errno;
		glibc.free = (void (*)(void *))dlsym(RTLD_NEXT, "__libc_free");
		glibc.realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "__libc_realloc");
		glibc.usable = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
		errno = e;
		st = glibc.free && glibc.realloc && glibc.usable ? 1 : 2;
		atomic_store_explicit(&glibc.state, st, memory_order_release);
	}
	if (st != 1)
		pcpm_fatal("%s(): invalid pointer %p", call, p);
}

void pcpm_foreign_free(void *p, const char *call)
{
	foreign_resolve(p, call);
	glibc.free(p);
}

void *pcpm_foreign_realloc(void *p, size_t size)
{
	foreign_resolve(p, "realloc");
	return glibc.realloc(p, size);
}

size_t pcpm_foreign_usable(const void *p, const char *call)
{
	foreign_resolve(p, call);
	return glibc.usable((void *)p);
}
