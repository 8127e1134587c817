/*
 * signal.c - sigaction() and signal() of libpcpmalloc.so: every handler the program installs
 * runs inside pcpm_signal_enter()/pcpm_signal_exit(), so that malloc and free called from a
 * handler that interrupted this thread inside pcpmalloc neither deadlock nor corrupt
 * (kernel-pcp.md §12.2 "Re-entrancy"; tcache.c explains the mechanism).
 *
 * The kernel sees one trampoline (always SA_SIGINFO); the program's handler, its flags and
 * mask are kept per signal and are what sigaction() reports back.  SIG_DFL and SIG_IGN pass
 * through unchanged.  Handlers installed without these calls (raw rt_sigaction, libc's own
 * internal handlers) are not wrapped.  Thread-safety: the table is written under a lock;
 * the trampoline reads one entry with relaxed atomics (a handler changed while a signal is
 * in flight runs the old or the new one, as with the kernel).
 */
#define _GNU_SOURCE
#include "alloc.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* glibc's implementation, exported under this name as well (GLIBC_2.2.5). */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

struct user_handler {
	_Atomic(void *) fn; /* sa_handler or sa_sigaction as given */
	_Atomic int flags;  /* the program's sa_flags */
};
static struct user_handler handlers[NSIG];
static pcpm_lock_t table_lock = PCPM_LOCK_INIT;

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	void *fn = atomic_load_explicit(&handlers[sig].fn, memory_order_relaxed);
	int flags = atomic_load_explicit(&handlers[sig].flags, memory_order_relaxed);
	if (flags & SA_RESETHAND) /* the kernel reset it to SIG_DFL on delivery */
		atomic_store_explicit(&handlers[sig].fn, NULL, memory_order_relaxed);
	if (!fn)
		return;
	pcpm_signal_enter();
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
	else
		((void (*)(int))fn)(sig);
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
