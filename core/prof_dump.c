/*
 * prof_dump.c - the heap profiler's output (prof_dump.h): start-up, dumps, the leak report.
 * Calls prof.c's tables, config and os; called by init, fork, the front end and preload.
 *
 * A dump is gperftools' heap-profile text format, as google-pprof reads it (its
 * ReadHeapProfile):
 *
 *   heap profile: INUSE_OBJS: INUSE_BYTES [ALLOC_OBJS: ALLOC_BYTES] @ heap_v2/RATE
 *   INUSE_OBJS: INUSE_BYTES [ALLOC_OBJS: ALLOC_BYTES] @ 0xPC 0xPC ...     (one line a stack)
 *
 *   MAPPED_LIBRARIES:
 *   (the process's /proc/self/maps)
 *
 * The counts are the samples' own, unscaled: "heap_v2/RATE" tells pprof the mean sampling
 * interval, and pprof multiplies each line by 1 / (1 - exp(-avg/RATE)), avg being the
 * line's bytes per object, the inverse of the probability that such a block was sampled.
 * The first address of a stack is the caller's return address less one (pprof subtracts
 * one from the others itself: a return address may belong to the next line).
 *
 * Everything here is async-signal-safe: the tables are read without locks, the text is
 * built in a static buffer that one dump at a time owns (an atomic flag), the file is
 * written with open/write.  The leak report alone, at exit, calls dladdr for names.
 */
#define _GNU_SOURCE
#include "prof_dump.h"
#include "config.h"
#include "prof.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

uint64_t pcpm_prof_rate = 512 * 1024;
static bool prof_on;
static _Atomic int dump_busy;
static _Atomic unsigned dump_seq;
static _Atomic uint64_t allocated, next_dump; /* PCPMALLOC_PROF_INTERVAL's count */

/* glibc's sigaction (the preloaded sigaction of preload/signal.c wraps program handlers;
 * this one is the library's own and needs no wrapping: a dump neither allocates nor locks) */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

static void on_signal(int sig)
{
	(void)sig;
	int e = errno;
	pcpm_prof_dump(NULL, 's');
	errno = e;
}

bool pcpm_prof_init(void)
{
	pcpm_prof_rate = (uint64_t)pcpm_cfg.prof_sample;
	if (!prof_tables_init()) {
		pcpm_warn("heap profiling off: its tables could not be mapped (%s)",
			  strerrordesc_np(errno));
		return false;
	}
	prof_on = true;
	next_dump = (uint64_t)pcpm_cfg.prof_interval;
	int sig = pcpm_cfg.prof_signal;
	if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP ||
	    sig == SIGSYS || sig == SIGABRT) {
		/* a fault or abort signal: its handler returning re-runs the faulting instruction
		 * (a crashing program would dump forever instead of dying) */
		pcpm_warn("PCPMALLOC_PROF_SIGNAL=%d: a fault or abort signal; no profile signal", sig);
	} else if (sig) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (__sigaction(pcpm_cfg.prof_signal, &sa, NULL))
			pcpm_warn("PCPMALLOC_PROF_SIGNAL=%d: no handler installed (%s)",
				  pcpm_cfg.prof_signal, strerrordesc_np(errno));
	}
	return true;
}

void pcpm_prof_fork_child(void)
{
	if (!prof_on)
		return;
	prof_tables_fork_child();
	atomic_store(&dump_busy, 0);
	atomic_store(&dump_seq, 0);
	atomic_store(&allocated, 0);
	atomic_store(&next_dump, (uint64_t)pcpm_cfg.prof_interval);
}

/* ---- the output buffer (owned by the dump holding dump_busy) ------------------------------ */

static char obuf[16384];
static size_t olen;
static int ofd;
static int oerr; /* first write error */

static void oflush(void)
{
	size_t off = 0;
	while (off < olen && !oerr) {
		ssize_t w = write(ofd, obuf + off, olen - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			oerr = w < 0 ? errno : EIO;
		else
			off += (size_t)w;
	}
	olen = 0;
}

static void oputs(const char *s, size_t n)
{
	while (n) {
		if (olen == sizeof(obuf))
			oflush();
		size_t k = MIN(n, sizeof(obuf) - olen);
		memcpy(obuf + olen, s, k);
		olen += k;
		s += k;
		n -= k;
	}
}

static void oprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* pcpm_bappend's formats (vsnprintf of integers and strings: no allocation in glibc) */
static void oprintf(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		oputs(line, MIN((size_t)n, sizeof(line) - 1));
}

/* ---- the dump ---------------------------------------------------------------------------- */

struct totals {
	uint64_t in_objs, in_bytes, al_objs, al_bytes;
};

static void add_totals(const struct prof_bucket *b, void *arg)
{
	struct totals *t = arg;
	uint64_t ao = atomic_load_explicit(&b->alloc_objs, memory_order_relaxed);
	uint64_t ab = atomic_load_explicit(&b->alloc_bytes, memory_order_relaxed);
	uint64_t fo = atomic_load_explicit(&b->free_objs, memory_order_relaxed);
	uint64_t fb = atomic_load_explicit(&b->free_bytes, memory_order_relaxed);
	t->al_objs += ao;
	t->al_bytes += ab;
	t->in_objs += ao > fo ? ao - fo : 0;
	t->in_bytes += ab > fb ? ab - fb : 0;
}

static void write_bucket(const struct prof_bucket *b, void *arg)
{
	(void)arg;
	struct totals t = { 0, 0, 0, 0 };
	add_totals(b, &t);
	if (!t.al_objs)
		return;
	oprintf("%lu: %lu [%lu: %lu] @", (unsigned long)t.in_objs, (unsigned long)t.in_bytes,
		(unsigned long)t.al_objs, (unsigned long)t.al_bytes);
	for (unsigned i = 0; i < b->depth; i++)
		oprintf(" 0x%lx", (unsigned long)(b->pcs[i] - (i == 0)));
	if (!b->depth)
		oprintf(" 0x0"); /* the overflow bucket: stacks the tables had no room for */
	oputs("\n", 1);
}

static void copy_maps(void)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		if (olen == sizeof(obuf))
			oflush();
		ssize_t r = read(fd, obuf + olen, sizeof(obuf) - olen);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		olen += (size_t)r;
	}
	close(fd);
}

/* path with %p replaced by the process id (and %% by %) into out. */
static void expand(char *out, size_t len, const char *path)
{
	size_t n = 0;
	out[0] = 0;
	for (const char *s = path; *s && n + 1 < len; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			n = pcpm_bappend(out, len, n, "%d", (int)getpid());
			s++;
		} else if (s[0] == '%' && s[1] == '%') {
			n = pcpm_bappend(out, len, n, "%%");
			s++;
		} else {
			out[n++] = *s;
			out[n] = 0;
		}
	}
}

int pcpm_prof_dump(const char *path, char kind)
{
	char name[512];
	int e = errno;
	if (!prof_on) {
		pcpm_warn("heap profile not written: profiling is off (PCPMALLOC_PROF=1 turns it "
			  "on; secure, junk and memcheck mode keep it off)");
		errno = EINVAL;
		return -1;
	}
	unsigned seq = atomic_fetch_add(&dump_seq, 1);
	if (path) {
		expand(name, sizeof(name), path);
	} else {
		char prefix[400];
		expand(prefix, sizeof(prefix),
		       pcpm_cfg.prof_prefix ? pcpm_cfg.prof_prefix : "pcpmalloc");
		size_t n = strlen(prefix);
		memcpy(name, prefix, n + 1);
		pcpm_bappend(name, sizeof(name), n, ".%d.%u.%c.heap", (int)getpid(), seq, kind);
	}
	int expected = 0;
	if (!atomic_compare_exchange_strong(&dump_busy, &expected, 1)) {
		pcpm_warn("heap profile not written to %s: another dump is in progress", name);
		errno = EBUSY;
		return -1;
	}
	ofd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (ofd < 0) {
		int err = errno;
		atomic_store(&dump_busy, 0);
		pcpm_warn("heap profile not written to %s: %s", name, strerrordesc_np(err));
		errno = err;
		return -1;
	}
	olen = 0;
	oerr = 0;
	struct totals t = { 0, 0, 0, 0 };
	prof_for_each_bucket(add_totals, &t);
	oprintf("heap profile: %lu: %lu [%lu: %lu] @ heap_v2/%lu\n", (unsigned long)t.in_objs,
		(unsigned long)t.in_bytes, (unsigned long)t.al_objs, (unsigned long)t.al_bytes,
		(unsigned long)pcpm_prof_rate);
	prof_for_each_bucket(write_bucket, NULL);
	oputs("\nMAPPED_LIBRARIES:\n", 19);
	copy_maps();
	oflush();
	int err = oerr;
	if (close(ofd) && !err)
		err = errno;
	atomic_store(&dump_busy, 0);
	if (err) {
		pcpm_warn("heap profile %s incomplete: %s", name, strerrordesc_np(err));
		errno = err;
		return -1;
	}
	if (pcpm_cfg.verbose)
		pcpm_warn("heap profile written to %s", name);
	errno = e;
	return 0;
}

void pcpm_prof_allocated(uint64_t bytes)
{
	uint64_t every = (uint64_t)pcpm_cfg.prof_interval;
	if (!every || !bytes)
		return;
	uint64_t now = atomic_fetch_add_explicit(&allocated, bytes, memory_order_relaxed) + bytes;
	uint64_t due = atomic_load_explicit(&next_dump, memory_order_relaxed);
	if (now < due)
		return;
	uint64_t next = due + every;
	while (next <= now) /* one dump for several intervals passed at once */
		next += every;
	if (atomic_compare_exchange_strong(&next_dump, &due, next))
		pcpm_prof_dump(NULL, 'i');
}

/* ---- the leak report ----------------------------------------------------------------------- */

/* e^-x for x >= 0 without libm: x = k ln2 + r, e^-r by its series (r < ln 2: 16 terms). */
static double exp_neg(double x)
{
	if (x > 700)
		return 0;
	int k = (int)(x / 0.69314718055994530942);
	double r = x - k * 0.69314718055994530942, term = 1, s = 1;
	for (int i = 1; i < 16; i++) {
		term *= -r / i;
		s += term;
	}
	while (k-- > 0)
		s *= 0.5;
	return s;
}

/* pprof's heap_v2 factor for a line of this many bytes per object */
static double scale(uint64_t objs, uint64_t bytes)
{
	if (!objs)
		return 0;
	double ratio = (double)bytes / (double)objs / (double)pcpm_prof_rate;
	double p = 1 - exp_neg(ratio);
	return p > 0 ? 1 / p : 0;
}

#define LEAK_MAX 1024 /* stacks listed at most; the rest are summed */

struct leak {
	const struct prof_bucket *b;
	uint64_t objs, bytes; /* sampled, in use */
	double est_objs, est_bytes;
};
static struct leak leaks[LEAK_MAX];
struct leak_scan {
	unsigned n, more;
	uint64_t samples;
	double more_bytes;
};

static void collect(const struct prof_bucket *b, void *arg)
{
	struct leak_scan *s = arg;
	struct totals t = { 0, 0, 0, 0 };
	add_totals(b, &t);
	if (!t.in_objs)
		return;
	s->samples += t.in_objs;
	double f = scale(t.in_objs, t.in_bytes);
	if (s->n == LEAK_MAX) {
		s->more++;
		s->more_bytes += f * (double)t.in_bytes;
		return;
	}
	leaks[s->n++] = (struct leak){ b, t.in_objs, t.in_bytes, f * (double)t.in_objs,
				       f * (double)t.in_bytes };
}

static void leak_frame(unsigned i, uintptr_t pc)
{
	Dl_info di;
	uintptr_t at = i ? pc - 1 : pc;
	if (dladdr((void *)at, &di) && di.dli_fname) {
		if (di.dli_sname)
			oprintf("    #%u 0x%lx in %s+0x%lx (%s+0x%lx)\n", i, (unsigned long)pc,
				di.dli_sname, (unsigned long)(at - (uintptr_t)di.dli_saddr),
				di.dli_fname, (unsigned long)(at - (uintptr_t)di.dli_fbase));
		else
			oprintf("    #%u 0x%lx (%s+0x%lx)\n", i, (unsigned long)pc, di.dli_fname,
				(unsigned long)(at - (uintptr_t)di.dli_fbase));
	} else {
		oprintf("    #%u 0x%lx\n", i, (unsigned long)pc);
	}
}

static void leak_report(void)
{
	struct leak_scan s = { 0, 0, 0, 0 };
	prof_for_each_bucket(collect, &s);
	ofd = 2;
	olen = 0;
	oerr = 0;
	if (!s.n) {
		oprintf("pcpmalloc: no leaks: no sampled block was still allocated at exit (%lu "
			"dropped)\n", (unsigned long)prof_dropped());
		oflush();
		return;
	}
	double total = s.more_bytes, objs = 0;
	oprintf("\n=================================================================\n"
		"==%d==pcpmalloc: detected memory leaks (blocks still allocated at exit, estimated "
		"from samples at one per %lu bytes)\n",
		(int)getpid(), (unsigned long)pcpm_prof_rate);
	for (unsigned k = 0; k < s.n; k++) { /* largest first: a selection, n is small */
		unsigned best = k;
		for (unsigned j = k + 1; j < s.n; j++)
			if (leaks[j].est_bytes > leaks[best].est_bytes)
				best = j;
		struct leak l = leaks[best];
		leaks[best] = leaks[k];
		leaks[k] = l;
		total += l.est_bytes;
		objs += l.est_objs;
		oprintf("\nLeak of %.0f byte(s) in %.0f object(s) (%lu sampled) allocated from:\n",
			l.est_bytes, l.est_objs, (unsigned long)l.objs);
		for (unsigned i = 0; i < l.b->depth; i++)
			leak_frame(i, l.b->pcs[i]);
		if (!l.b->depth)
			oprintf("    (stacks the profiler's tables had no room for)\n");
	}
	if (s.more)
		oprintf("\n... and %u more stacks, %.0f byte(s)\n", s.more, s.more_bytes);
	oprintf("\nSUMMARY: pcpmalloc: an estimated %.0f byte(s) leaked in %.0f allocation(s) "
		"(%lu samples).\n",
		total, objs, (unsigned long)s.samples);
	oflush();
}

void pcpm_prof_at_exit(void)
{
	if (!prof_on)
		return;
	if (pcpm_cfg.prof_final)
		pcpm_prof_dump(NULL, 'f');
	if (pcpm_cfg.leaks) {
		int expected = 0;
		if (!atomic_compare_exchange_strong(&dump_busy, &expected, 1))
			return; /* a dump in progress owns the buffer (a signal at exit) */
		leak_report();
		atomic_store(&dump_busy, 0);
	}
}
