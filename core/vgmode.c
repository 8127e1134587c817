/*
 * vgmode.c - memcheck mode (see vgmode.h): detection, block annotation and the quarantine.
 */
#include "vgmode.h"
#include "config.h"

bool pcpm_vg PCPM_HOT;
#ifdef PCPM_HAVE_VALGRIND
static bool on_memcheck; /* pcpm_vg under memcheck, not forced outside it */
#endif

void pcpm_vg_init(void)
{
#ifdef PCPM_HAVE_VALGRIND
	if (RUNNING_ON_VALGRIND) {
		/*
		 * Only memcheck answers its own requests: a stack word is addressable (0).
		 * Other tools (callgrind for bench/fastpath, helgrind, ...) leave the default,
		 * 1, and pcpmalloc keeps its fast paths there.  Asked also when the mode is
		 * forced: pcpm_vg_block_size needs memcheck's answers (PCPMALLOC_VALGRIND=1
		 * under memcheck had realloc copy the whole slot: false invalid reads).
		 */
		int probe = 0;
		unsigned long r = VALGRIND_DO_CLIENT_REQUEST_EXPR(
			1, VG_USERREQ__CHECK_MEM_IS_ADDRESSABLE, &probe, sizeof(probe), 0, 0, 0);
		on_memcheck = r == 0;
	}
	if (pcpm_cfg.valgrind == 1)
		pcpm_vg = true; /* forced: also outside valgrind, where the requests do nothing */
	else if (pcpm_cfg.valgrind == AUTO)
		pcpm_vg = on_memcheck;
	/* memcheck mode needs no exact pcp sizes, and hwloc's x86 backend complains on
	 * stderr under valgrind: no lazy discovery (now, XML, synthetic still run) */
	if (pcpm_vg && on_memcheck && pcpm_cfg.topology == TOPOLOGY_LAZY)
		pcpm_cfg.topology = 2;
	if (pcpm_vg && pcpm_cfg.verbose)
		pcpm_warn("valgrind: memcheck mode: no thread caches, blocks described with client "
			  "requests, %lu MiB quarantine",
			  VG_QUARANTINE_BYTES >> 20);
#endif
}

void pcpm_vg_alloced(void *p, size_t n, size_t usable, bool zeroed)
{
	(void)p, (void)n, (void)usable, (void)zeroed;
	VALGRIND_MAKE_MEM_NOACCESS(p, usable);
	VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zeroed);
}

size_t pcpm_vg_block_size(const void *p, size_t usable)
{
#ifdef PCPM_HAVE_VALGRIND
	/* A block is [p, p+n) addressable followed by no-access bytes up to usable: binary
	 * search for n.  GET_VBITS answers 3 for a no-access byte and reports nothing. */
	if (!on_memcheck)
		return usable;
	size_t lo = 0, hi = usable;
	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2;
		unsigned char vbits;
		if (VALGRIND_GET_VBITS((const char *)p + mid - 1, &vbits, 1) == 1)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
#else
	(void)p;
	return usable;
#endif
}

/* The quarantine: a FIFO ring of freed blocks, bounded in slots and in bytes. */
static pcpm_lock_t q_lock = PCPM_LOCK_INIT;
static struct {
	void *p;
	size_t usable;
} q_ring[VG_QUARANTINE_SLOTS];
static unsigned q_head, q_count;
static size_t q_bytes;

#define Q_EVICT 32 /* blocks given back per lock hold */

void pcpm_vg_quarantine(void *p, size_t usable, void (*release)(void *p))
{
	if (usable > VG_QUARANTINE_BYTES / 4) {
		release(p);
		return;
	}
	void *out[Q_EVICT];
	bool queued = false;
	while (!queued) {
		unsigned n = 0;
		pcpm_lock(&q_lock);
		while (n < Q_EVICT && q_count &&
		       (q_count == VG_QUARANTINE_SLOTS || q_bytes + usable > VG_QUARANTINE_BYTES)) {
			out[n++] = q_ring[q_head].p;
			q_bytes -= q_ring[q_head].usable;
			q_ring[q_head].p = NULL;
			q_head = (q_head + 1) % VG_QUARANTINE_SLOTS;
			q_count--;
		}
		if (q_count < VG_QUARANTINE_SLOTS && q_bytes + usable <= VG_QUARANTINE_BYTES) {
			unsigned tail = (q_head + q_count) % VG_QUARANTINE_SLOTS;
			q_ring[tail].p = p;
			q_ring[tail].usable = usable;
			q_count++;
			q_bytes += usable;
			queued = true;
		}
		pcpm_unlock(&q_lock);
		for (unsigned i = 0; i < n; i++)
			release(out[i]);
	}
}

bool pcpm_vg_quarantine_nested(void *p, size_t usable)
{
	/* the interrupted code may hold q_lock: one try; no eviction (release would take
	 * the normal, locking free paths) */
	if (usable > VG_QUARANTINE_BYTES / 4 || !pcpm_trylock(&q_lock))
		return false;
	bool queued = q_count < VG_QUARANTINE_SLOTS && q_bytes + usable <= VG_QUARANTINE_BYTES;
	if (queued) {
		unsigned tail = (q_head + q_count) % VG_QUARANTINE_SLOTS;
		q_ring[tail].p = p;
		q_ring[tail].usable = usable;
		q_count++;
		q_bytes += usable;
	}
	pcpm_unlock(&q_lock);
	return queued;
}

void pcpm_vg_quarantine_drain(void (*release)(void *p))
{
	for (;;) {
		pcpm_lock(&q_lock);
		if (!q_count) {
			pcpm_unlock(&q_lock);
			return;
		}
		void *p = q_ring[q_head].p;
		q_bytes -= q_ring[q_head].usable;
		q_ring[q_head].p = NULL;
		q_head = (q_head + 1) % VG_QUARANTINE_SLOTS;
		q_count--;
		pcpm_unlock(&q_lock);
		release(p);
	}
}

void pcpm_vg_fork_prepare(void)
{
	pcpm_lock(&q_lock);
}

void pcpm_vg_fork_parent(void)
{
	pcpm_unlock(&q_lock);
}

void pcpm_vg_fork_child(void)
{
	pcpm_lock_reset(&q_lock);
}
