/*
 * machine.h - this machine's caches for lazy discovery and the tool (see machine.c): sysfs
 * cacheinfo, then CPUID, then the provisional sizes, with the reason.
 */
#ifndef PCPM_MACHINE_H
#define PCPM_MACHINE_H

#include "topology.h"

#include <stdbool.h>
#include <stddef.h>

/* Where to look: the folder standing for /sys (NULL: /sys; PCPMALLOC_SYSFS_ROOT), whether
 * CPUID may be used (PCPMALLOC_CPUID), the /proc/cpuinfo file (NULL: /proc/cpuinfo). */
struct pcpm_machine_src {
	const char *sysfs_root;
	bool cpuid;
	const char *cpuinfo;
};

/*
 * Fills cpus[0..ncpus) from the first source that answers and returns it (TOPO_SYSFS,
 * TOPO_CPUID), or TOPO_PROVISIONAL with cpus[] unchanged.  why (len bytes) gets why the
 * sources before it gave nothing ("" for sysfs).  scratch: nscratch ints for the APIC ids of
 * CPUs 0..nscratch-1 (every online CPU counts in a cache's sharing, not only the process's:
 * nscratch >= the CPU count).  No allocation, no lock; thread-safe (writes only its
 * arguments).
 */
int pcpm_machine_walk(struct pcpm_cpu_cache *cpus, int ncpus, int nr_online,
		      const struct pcpm_machine_src *src, int *scratch, int nscratch, char *why,
		      size_t len);

/* APIC ids the library makes room for: CPUs numbered above are not counted in sharing. */
#define PCPM_MACHINE_MAX_CPUS 8192

#endif
