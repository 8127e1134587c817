/*
 * signal.c - sigaction() and signal() of libpcpmalloc.so: every handler the program installs
 * runs inside pcpm_signal_enter()/pcpm_signal_exit(), so that malloc and free called from a
 * handler that interrupted this thread inside pcpmalloc neither deadlock nor corrupt
 * (kernel-pcp.md §12.2 "Re-entrancy"; tcache.c explains the mechanism) - when the signal
 * interrupted pcpmalloc: its slow paths (the per-thread pcpm_inside flag) or any instruction
 * of libpcpmalloc.so (the fast paths, told by the interrupted program counter).
 *
 * The kernel sees one trampoline (always SA_SIGINFO); the program's handler, its flags and
 * mask are kept per signal and are what sigaction() reports back.  SIG_DFL and SIG_IGN pass
 * through unchanged.  Handlers installed without these calls (raw rt_sigaction, libc's own
 * internal handlers) are not wrapped.  Thread-safety: the table is written under a lock;
 * the trampoline reads one entry with relaxed atomics (a handler changed while a signal is
 * in flight runs the old or the new one, as with the kernel).
 */
#define _GNU_SOURCE
#include "api.h"
#include "tcache_signal.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <string.h>
#include <ucontext.h>

#define EXPORT __attribute__((visibility("default")))

/* glibc's implementation, exported under this name as well (GLIBC_2.2.5). */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

struct user_handler {
	_Atomic(void *) fn; /* sa_handler or sa_sigaction as given */
	_Atomic int flags;  /* the program's sa_flags */
};
static struct user_handler handlers[NSIG] PCPM_HOT; /* sh installs handlers: no page of its own */
static pcpm_lock_t table_lock PCPM_HOT = PCPM_LOCK_INIT;

/* The executable segments of libpcpmalloc.so, from its own program headers (the linker's
 * __ehdr_start is this object's ELF header): computed on first use, no call made. */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));
static uintptr_t text_lo[4], text_hi[4];
static _Atomic int text_n = -1;

static void find_text(void)
{
	const ElfW(Ehdr) *eh = &__ehdr_start;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
	uintptr_t bias = (uintptr_t)eh;
	for (int i = 0; i < eh->e_phnum; i++) /* the segment that maps offset 0 */
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			bias -= ph[i].p_vaddr;
			break;
		}
	int n = 0;
	for (int i = 0; i < eh->e_phnum && n < 4; i++)
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X)) {
			text_lo[n] = bias + ph[i].p_vaddr;
			text_hi[n] = text_lo[n] + ph[i].p_memsz;
			n++;
		}
	atomic_store_explicit(&text_n, n, memory_order_release);
}

/* Was this thread inside pcpmalloc when the signal came: in a slow path (the flag), or at
 * an instruction of pcpmalloc's code (a fast path, or these wrappers)?  Conservative: true
 * when the program counter cannot be read on this architecture. */
static bool interrupted_inside(void *ucv)
{
	if (pcpm_inside || pcpm_sig_depth)
		return true;
	uintptr_t pc;
	const ucontext_t *uc = ucv;
#if defined(__x86_64__)
	pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	pc = (uintptr_t)uc->uc_mcontext.pc;
#else
	(void)uc;
	return true;
#endif
	int n = atomic_load_explicit(&text_n, memory_order_acquire);
	if (n < 0) {
		find_text();
		n = atomic_load_explicit(&text_n, memory_order_acquire);
	}
	for (int i = 0; i < n; i++)
		if (pc >= text_lo[i] && pc < text_hi[i])
			return true;
	return false;
}

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	void *fn = atomic_load_explicit(&handlers[sig].fn, memory_order_relaxed);
	int flags = atomic_load_explicit(&handlers[sig].flags, memory_order_relaxed);
	if (flags & SA_RESETHAND) /* the kernel reset it to SIG_DFL on delivery */
		atomic_store_explicit(&handlers[sig].fn, NULL, memory_order_relaxed);
	if (!fn)
		return;
	/* Only a handler that interrupted pcpmalloc runs in the trylock-only mode; any other
	 * runs as the program wrote it (and may siglongjmp out). */
	bool inside = interrupted_inside(uc);
	if (inside)
		pcpm_signal_enter();
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
	else
		((void (*)(int))fn)(sig);
	if (inside)
		pcpm_signal_exit();
}

static bool wraps(const struct sigaction *act)
{
	return act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (sig <= 0 || sig >= NSIG)
		return __sigaction(sig, act, old); /* EINVAL as glibc reports it */
	struct sigaction k;
	const struct sigaction *pass = act;
	pcpm_lock(&table_lock);
	void *prev_fn = atomic_load_explicit(&handlers[sig].fn, memory_order_relaxed);
	int prev_flags = atomic_load_explicit(&handlers[sig].flags, memory_order_relaxed);
	if (wraps(act)) {
		k = *act;
		k.sa_sigaction = trampoline;
		k.sa_flags |= SA_SIGINFO;
		pass = &k;
		atomic_store_explicit(&handlers[sig].flags, act->sa_flags, memory_order_relaxed);
		atomic_store_explicit(&handlers[sig].fn,
				      (act->sa_flags & SA_SIGINFO) ? (void *)act->sa_sigaction
								   : (void *)act->sa_handler,
				      memory_order_relaxed);
	}
	int rc = __sigaction(sig, pass, old);
	if (rc == 0 && old && old->sa_sigaction == trampoline) {
		if (prev_flags & SA_SIGINFO)
			old->sa_sigaction = (void (*)(int, siginfo_t *, void *))prev_fn;
		else
			old->sa_handler = (void (*)(int))prev_fn;
		old->sa_flags = (old->sa_flags & ~SA_SIGINFO) | (prev_flags & SA_SIGINFO);
	}
	if (rc != 0 && wraps(act)) {
		atomic_store_explicit(&handlers[sig].fn, prev_fn, memory_order_relaxed);
		atomic_store_explicit(&handlers[sig].flags, prev_flags, memory_order_relaxed);
	}
	pcpm_unlock(&table_lock);
	return rc;
}

/* signal(): BSD semantics, as glibc's (SA_RESTART, the signal blocked in its handler). */
static sighandler_t install(int sig, sighandler_t h, int flags)
{
	struct sigaction act, old;
	memset(&act, 0, sizeof(act));
	act.sa_handler = h;
	sigemptyset(&act.sa_mask);
	if (sig > 0 && sig < NSIG && !(flags & SA_NODEFER))
		sigaddset(&act.sa_mask, sig);
	act.sa_flags = flags;
	if (sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	return install(sig, h, SA_RESTART);
}

EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return install(sig, h, SA_RESTART);
}

EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return install(sig, h, SA_RESETHAND | SA_NODEFER);
}
