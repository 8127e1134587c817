/*
 * topology.h - CPUs and their cache slices, which size every pcp (kernel-pcp.md §6, and
 * "pcpmalloc's choices": high_max = the pages of the CPU's L2 share + LLC slice).
 *
 * Two sources.  At start, provisional values from sysconf(_SC_LEVEL2_CACHE_SIZE /
 * _SC_LEVEL3_CACHE_SIZE) and the CPU count: cheap enough for any process.  Later, once the
 * process has done enough allocator work (PCPMALLOC_TOPOLOGY=lazy), the kernel's cacheinfo in
 * sysfs replaces them, or CPUID where the kernel exports none (machine.c; when neither
 * answers they stay, with the reason in pcpm_topology_why)
 * (pcpm_topology_maybe_discover, from the malloc slow path, with no
 * allocator lock held; plain system calls, so no thread and no library: an allocator must
 * start no thread the program did not ask for, and a dlopen inside the caller's malloc could
 * deadlock on the caller's own locks).  hwloc (dlopen'ed) reads described machines.  Topology only produces sizes:
 * it publishes them by raising pcpm_topology_gen, and the pcp layer pulls them (pageset
 * sizes, one zone per NUMA node) at its next allocation, as the kernel's page allocator does
 * not know who sized it.  PCPMALLOC_TOPOLOGY_XML / _SYNTHETIC load a fake machine.
 * Thread-safety: pcpm_topology_init() runs once during allocator init; discovery runs once
 * (an atomic claim) and publishes each CPU's entry before the pcps are resized.
 */
#ifndef PCPM_TOPOLOGY_H
#define PCPM_TOPOLOGY_H

#include "cpuinfo.h"

#include <stdbool.h>
#include <stddef.h>

/* pcp slots (the highest CPU id of the affinity mask at start-up, + 1; the possible CPUs
 * when the mask cannot be read) and the CPUs this process may run on. */
extern int pcpm_nr_cpus;
extern int pcpm_nr_online;
/* Where the sizes in force come from: a TOPO_* state (cpuinfo.h). */
extern int pcpm_topology_state;
/* Why the sources before the one in force gave nothing ("" when there is nothing to say);
 * written once by discovery before the state changes. */
extern char pcpm_topology_why[192];

/* Raised (release) each time new sizes are published; the pcp layer compares it with the
 * generation it last pulled. */
extern _Atomic unsigned pcpm_topology_gen;

void pcpm_topology_init(void);

/* Cache of one CPU (cpu < pcpm_nr_cpus). */
const struct pcpm_cpu_cache *pcpm_cpu_cache(int cpu);

/* Called on every pcp refill (slow path) with the pages the zone manages (its committed
 * heap): counts the refills and marks discovery due. */
void pcpm_topology_note_refill(size_t heap_pages);
/* From the periodic work: marks discovery due when the refills were done early. */
void pcpm_topology_tick(size_t heap_pages);

/* From the malloc slow path, no lock held: discovery once when it is due, in the calling
 * thread and without starting any: this machine from sysfs (lazy), hwloc for a described
 * machine or PCPMALLOC_TOPOLOGY=now. */
extern int pcpm_topology_due;
void pcpm_topology_discover(void);
static inline void pcpm_topology_maybe_discover(void)
{
	if (__builtin_expect(__atomic_load_n(&pcpm_topology_due, __ATOMIC_RELAXED), 0))
		pcpm_topology_discover();
}

#endif
