/*
 * topology.h - CPUs and their cache slices, which size every pcp (kernel-pcp.md §6, and
 * "pcpmalloc's choices": high_max = the pages of the CPU's L2 + LLC slice).
 *
 * This is the provisional source: sysconf(_SC_LEVEL2_CACHE_SIZE / _SC_LEVEL3_CACHE_SIZE)
 * and the CPU count, cheap enough for process start.  hwloc discovery refines it later.
 * Thread-safety: pcpm_topology_init() runs once during allocator init; the rest is read-only.
 */
#ifndef PCPM_TOPOLOGY_H
#define PCPM_TOPOLOGY_H

#include <stddef.h>

struct pcpm_cpu_cache {
	size_t l2_bytes;    /* this CPU's L2 (bytes) */
	size_t llc_bytes;   /* its last-level data/unified cache (bytes) */
	int llc_shared;	    /* CPUs sharing that LLC */
	size_t slice_bytes; /* per_cpu_data_slice_size: llc_bytes / llc_shared */
};

/* Possible CPUs (pcp slots) and the CPUs this process may run on. */
extern int pcpm_nr_cpus;
extern int pcpm_nr_online;

void pcpm_topology_init(void);

/* Cache of one CPU (cpu < pcpm_nr_cpus); provisional values are the same for every CPU. */
const struct pcpm_cpu_cache *pcpm_cpu_cache(int cpu);

#endif
