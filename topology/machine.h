/*
 * machine.h - this machine's caches for lazy discovery and the tool (see machine.c): sysfs
 * cacheinfo, then CPUID, then the provisional sizes, with the reason.
 */
#ifndef PCPM_MACHINE_H
#define PCPM_MACHINE_H

#include "sysfs.h"

#include <stdbool.h>
#include <stddef.h>

/* Where to look: the folder standing for /sys (NULL: /sys; PCPMALLOC_SYSFS_ROOT), whether
 * CPUID may be used (PCPMALLOC_CPUID), the /proc/cpuinfo file (NULL: /proc/cpuinfo). */
struct pcpm_machine_src {
	const char *sysfs_root;
	bool cpuid;
	const char *cpuinfo;
};

/* APIC ids the walk makes room for: CPUs numbered above are not counted in sharing. */
#define PCPM_MACHINE_MAX_CPUS 8192

/* The walk's working memory, the caller's (the library maps it: nothing large on the stack
 * of a thread that may be a PTHREAD_STACK_MIN one). */
struct pcpm_machine_scratch {
	struct pcpm_sysfs_buf io;		/* paths and file contents */
	int apicid[PCPM_MACHINE_MAX_CPUS];	/* every online CPU's APIC id (CPUID source) */
	char why[192];				/* the result's reason (see below) */
};

/*
 * Fills cpus[0..ncpus) from the first source that answers and returns it (TOPO_SYSFS,
 * TOPO_CPUID), or TOPO_PROVISIONAL with cpus[] unchanged.  scratch->why gets why the sources
 * before it gave nothing ("" for sysfs).  Every online CPU counts in a cache's sharing, not
 * only the process's.  No allocation, no lock, no cancellation point, a few hundred bytes of
 * stack; thread-safe (writes only its arguments).
 */
int pcpm_machine_walk(struct pcpm_cpu_cache *cpus, int ncpus, int nr_online,
		      const struct pcpm_machine_src *src, struct pcpm_machine_scratch *scratch);

#endif
