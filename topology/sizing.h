/*
 * sizing.h - the one formula that turns a CPU's cache share into its pcp sizes
 * (kernel-pcp.md "pcpmalloc's choices", §3 and §6).  Pure: no globals, no allocation, so the
 * library (core/pcp.c), the tool (pcpmalloc-topology) and the unit tests share it.
 */
#ifndef PCPM_SIZING_H
#define PCPM_SIZING_H

#include <stddef.h>

enum { HIGH_POLICY_CACHE = 0, HIGH_POLICY_HEAP = 1 };

/* Inputs for one CPU.  Overrides use -1 (AUTO) for "not set". */
struct pcpm_size_in {
	size_t l2_share_bytes;	/* the CPU's share of its L2 (0 when the L2 is the LLC) */
	size_t slice_bytes;	/* LLC size / CPUs sharing the LLC (per_cpu_data_slice_size) */
	size_t heap_pages;	/* pages the batch and heap-policy formulas see (>= the 1 GiB floor) */
	int split;		/* CPUs on this CPU's NUMA node (heap policy) */
	int policy;		/* HIGH_POLICY_* */
	int batch, high_min, high_max; /* PCPMALLOC_BATCH / _HIGH_MIN / _HIGH_MAX or -1 */
	int free_high_batch;	/* PCPMALLOC_FREE_HIGH_BATCH: -1 auto, 0, 1 */
	int slice_factor;	/* PCPMALLOC_SLICE_FACTOR (3) */
};

struct pcpm_size_out {
	int batch, high_min, high_max;
	int free_high_batch; /* 1: set PCPF_FREE_HIGH_BATCH */
};

/* The 1 GiB floor the batch formula sees (kernel-pcp.md §12.4, see pcp.c). */
#define PCPM_SIZING_FLOOR_PAGES ((size_t)1 << (30 - 12))

/* zone_batchsize() on managed pages: 2^n - 1, at most 63 at 4 KiB pages. */
int pcpm_zone_batchsize(size_t managed_pages);

/* The low watermark of a zone of managed pages (min_free_kbytes sqrt rule, §3.2). */
size_t pcpm_low_wmark_pages(size_t managed_pages);

void pcpm_size_pcp(const struct pcpm_size_in *in, struct pcpm_size_out *out);

#endif
