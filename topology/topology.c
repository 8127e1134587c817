/*
 * topology.c - provisional cache sizes from sysconf (see topology.h).  glibc answers the
 * _SC_LEVEL*_CACHE_SIZE queries from its cpuid data without allocating.
 */
#define _GNU_SOURCE
#include "topology.h"
#include "os.h"

#include <sched.h>
#include <unistd.h>

int pcpm_nr_cpus = 1;
int pcpm_nr_online = 1;
static struct pcpm_cpu_cache provisional;

void pcpm_topology_init(void)
{
	pcpm_nr_cpus = pcpm_possible_cpus();
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		pcpm_nr_online = CPU_COUNT(&set);
	else
		pcpm_nr_online = pcpm_nr_cpus;
	long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
	long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
	provisional.l2_bytes = l2 > 0 ? (size_t)l2 : 256 << 10;
	/* Without L3 the L2 is the last level (and is private). */
	provisional.llc_bytes = l3 > 0 ? (size_t)l3 : provisional.l2_bytes;
	/* sysconf cannot tell who shares the LLC: assume every online CPU (one package). */
	provisional.llc_shared = l3 > 0 ? pcpm_nr_online : 1;
	provisional.slice_bytes = provisional.llc_bytes / (size_t)provisional.llc_shared;
}

const struct pcpm_cpu_cache *pcpm_cpu_cache(int cpu)
{
	(void)cpu;
	return &provisional;
}
