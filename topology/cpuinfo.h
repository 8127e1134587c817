/*
 * cpuinfo.h - one CPU's caches (struct pcpm_cpu_cache) and what cpuinfo.c computes without
 * hwloc or the allocator: the slice arithmetic, the provisional sizes, the sources' names and
 * the CPU count of a fake machine.  Shared by the library and the pcpmalloc-topology tool;
 * nothing here allocates.  Sizes in bytes.  Thread-safe (each call writes its arguments only).
 */
#ifndef PCPM_CPUINFO_H
#define PCPM_CPUINFO_H

#include <stddef.h>

/* One CPU: its caches and NUMA node, as discovery found them; the pcp sizing reads them. */
struct pcpm_cpu_cache {
	int package, core, node; /* logical indexes; -1 when unknown */
	size_t l2_bytes;	 /* this CPU's L2 (bytes; 0 when none) */
	int l2_shared;		 /* CPUs sharing that L2 */
	size_t llc_bytes;	 /* its last-level data/unified cache (bytes) */
	int llc_shared;		 /* CPUs sharing that LLC */
	int llc_level;		 /* 2, 3, ... */
	size_t slice_bytes;	 /* per_cpu_data_slice_size: llc_bytes / llc_shared */
	size_t l2_share_bytes;	 /* l2_bytes / l2_shared, or 0 when the L2 is the LLC */
	int node_cpus;		 /* CPUs on its NUMA node */
	int node_os;		 /* the kernel's number of that node (mbind); -1 when unknown */
};

/* Where the sizes in force come from (pcpm_topology_state). */
enum {
	TOPO_FAILED = -1,     /* hwloc could not read the described machine: provisional sizes */
	TOPO_PROVISIONAL = 0, /* sysconf at start; lazy discovery not run or found nothing */
	TOPO_HWLOC = 1,	      /* a described machine, or PCPMALLOC_TOPOLOGY=now */
	TOPO_SYSFS = 2,	      /* lazy discovery: the kernel's cacheinfo */
	TOPO_CPUID = 3,	      /* lazy discovery: CPUID, sysfs having no cacheinfo */
};
/* "provisional", "hwloc", "sysfs", "cpuid" or "failed" for a TOPO_* state. */
const char *pcpm_topology_source_name(int state);

/* The start-up sizes of every CPU (sysconf's L2 and L3, the L3 shared by nr_online CPUs). */
void pcpm_provisional_cache(struct pcpm_cpu_cache *c, int nr_online);
/* Fills in l2_share_bytes and slice_bytes from the sizes and sharing counts. */
void pcpm_cpu_cache_derive(struct pcpm_cpu_cache *c);

/* The most CPUs a fake machine may have: the kernel's largest NR_CPUS on x86_64 (8192).
 * A larger description is refused: hwloc builds a flat one of 100,000 PUs in minutes, in
 * every process that loads the library. */
#define PCPM_FAKE_MAX_CPUS 8192

/* CPUs of a fake machine without loading hwloc: product of a synthetic description's
 * arities (PCPM_FAKE_MAX_CPUS + 1 once it passes PCPM_FAKE_MAX_CPUS), or the PU objects of
 * an XML file; 0 when unknown or malformed. */
int pcpm_fake_cpu_count(const char *xml, const char *synthetic);

#endif
