/*
 * machine.c - this machine's caches for lazy discovery and the tool's --library view: the
 * kernel's cacheinfo in sysfs, else CPUID (x86), else nothing (the provisional sizes stay),
 * with the reason each source passed over gave no answer.  Then the NUMA nodes from sysfs
 * (one node, 0, without them).  Plain system calls and instructions only, no allocation: it
 * runs on the allocating thread.  Calls sysfs.c and cpuid.c.
 */
#include "machine.h"
#include "cpuid.h"

#include <string.h>

/* Appends s to the NUL-terminated text in buf (len bytes), cutting what does not fit. */
static void add(char *buf, size_t len, const char *s)
{
	size_t n = strlen(buf);
	while (*s && n + 1 < len)
		buf[n++] = *s++;
	buf[n] = '\0';
}

int pcpm_machine_walk(struct pcpm_cpu_cache *cpus, int ncpus, int nr_online,
		      const struct pcpm_machine_src *src, struct pcpm_machine_scratch *scratch)
{
	const char *root = src->sysfs_root ? src->sysfs_root : "/sys";
	char *why = scratch->why;
	const size_t len = sizeof(scratch->why);
	int state = TOPO_PROVISIONAL;
	why[0] = '\0';
	if (pcpm_sysfs_walk(cpus, ncpus, root, &scratch->io) > 0) {
		state = TOPO_SYSFS;
	} else {
		add(why, len, "sysfs: no cacheinfo under ");
		add(why, len, root);
		add(why, len, "/devices/system/cpu");
		const char *no = NULL;
		if (!src->cpuid)
			no = "off (PCPMALLOC_CPUID=0)";
		else if (pcpm_cpuid_walk(cpus, ncpus, nr_online,
					 src->cpuinfo ? src->cpuinfo : "/proc/cpuinfo",
					 scratch->apicid, PCPM_MACHINE_MAX_CPUS, scratch->io.line,
					 sizeof(scratch->io.line), &no) > 0)
			state = TOPO_CPUID;
		if (state != TOPO_CPUID) {
			add(why, len, "; cpuid: ");
			add(why, len, no ? no : "no CPU found");
			return TOPO_PROVISIONAL;
		}
	}
	if (pcpm_sysfs_nodes(cpus, ncpus, root, &scratch->io) == 0)
		for (int i = 0; i < ncpus; i++) { /* no NUMA in sysfs: one node */
			cpus[i].node = 0;
			cpus[i].node_os = -1;
			cpus[i].node_cpus = nr_online;
		}
	return state;
}
