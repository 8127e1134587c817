/*
 * cpuinfo.c - the parts of topology (cpuinfo.h) that need neither hwloc nor the allocator: the slice
 * arithmetic of one CPU, the provisional sizes, the sources' names and counting the CPUs of
 * a fake machine (shared by the library and the tool).  Nothing here allocates.
 */
#include "cpuinfo.h"

#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>

long __sysconf(int name); /* glibc's, exported (GLIBC_2.2.5) */

const char *pcpm_topology_source_name(int state)
{
	switch (state) {
	case TOPO_HWLOC:
		return "hwloc";
	case TOPO_SYSFS:
		return "sysfs";
	case TOPO_CPUID:
		return "cpuid";
	case TOPO_FAILED:
		return "failed";
	default:
		return "provisional";
	}
}

void pcpm_provisional_cache(struct pcpm_cpu_cache *c, int nr_online)
{
	/* glibc answers these from its own cpuid data, without allocating; through its own
	 * name, which a program's sysconf() wrapper does not replace (this runs under the init
	 * lock: a wrapper calling dlsym there deadlocked against a thread in dlsym, issue 26) */
	long l2 = __sysconf(_SC_LEVEL2_CACHE_SIZE);
	long l3 = __sysconf(_SC_LEVEL3_CACHE_SIZE);
	*c = (struct pcpm_cpu_cache){ .package = -1, .core = -1, .node = -1, .node_os = -1 };
	c->l2_bytes = l2 > 0 ? (size_t)l2 : 256 << 10;
	c->l2_shared = 1;
	/* Without L3 the L2 is the last level (and is private). */
	c->llc_bytes = l3 > 0 ? (size_t)l3 : c->l2_bytes;
	c->llc_level = l3 > 0 ? 3 : 2;
	/* sysconf cannot tell who shares the LLC: assume every online CPU (one package). */
	c->llc_shared = l3 > 0 ? nr_online : 1;
	c->node_cpus = nr_online;
	pcpm_cpu_cache_derive(c);
}

void pcpm_cpu_cache_derive(struct pcpm_cpu_cache *c)
{
	if (c->llc_shared < 1)
		c->llc_shared = 1;
	if (c->l2_shared < 1)
		c->l2_shared = 1;
	/* §6: per_cpu_data_slice_size = LLC size / CPUs sharing it (threads count as CPUs) */
	c->slice_bytes = c->llc_bytes / (size_t)c->llc_shared;
	/* plus the CPU's share of its L2, unless the L2 is the LLC (then it is the slice) */
	c->l2_share_bytes = c->llc_level > 2 ? c->l2_bytes / (size_t)c->l2_shared : 0;
}

/* "pack:2 numa:1 l3:1(size=...) l2:56(size=...) core:1 pu:2": the product of the arities;
 * attributes in parentheses and memory attachments in brackets are skipped. */
static int synthetic_count(const char *s)
{
	long n = 1;
	int levels = 0, depth = 0;
	bool too_many = false;
	for (const char *p = s; *p; p++) {
		if (*p == '(' || *p == '[') {
			depth++;
		} else if (*p == ')' || *p == ']') {
			depth--;
		} else if (*p == ':' && depth == 0 && p[1] >= '0' && p[1] <= '9') {
			long a = 0;
			while (p[1] >= '0' && p[1] <= '9')
				a = a * 10 + (*++p - '0');
			if (a <= 0)
				return 0;
			/* saturates: the rest is still read, for a malformed arity */
			too_many |= a > PCPM_FAKE_MAX_CPUS || n * a > PCPM_FAKE_MAX_CPUS;
			n = too_many ? 1 : n * a;
			levels++;
		}
	}
	if (!levels)
		return 0;
	return too_many ? PCPM_FAKE_MAX_CPUS + 1 : (int)n;
}

/* PU objects of an XML topology: occurrences of type="PU", read in pieces (no malloc). */
static int xml_count(const char *path)
{
	static const char pat[] = "type=\"PU\"";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4096];
	int n = 0;
	size_t st = 0;
	ssize_t r;
	while ((r = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < r; i++) {
			/* 't' occurs in the pattern only at its start, so a mismatch restarts there */
			if (buf[i] == pat[st])
				st++;
			else
				st = buf[i] == pat[0];
			if (st == sizeof(pat) - 1) {
				n++;
				st = 0;
			}
		}
	}
	close(fd);
	return n;
}

int pcpm_fake_cpu_count(const char *xml, const char *synthetic)
{
	if (xml)
		return xml_count(xml);
	if (synthetic)
		return synthetic_count(synthetic);
	return 0;
}
