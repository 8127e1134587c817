/*
 * vg.c - memcheck mode's leaf (see vg.h): detection and block annotation, used by every
 * layer's annotations; the memcheck front end itself (free, realloc, quarantine) is
 * vgmode.c.  Calls nothing of pcpmalloc but config.
 */
#include "vg.h"
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

