/*
 * sysfs.c - this machine's caches and NUMA nodes read from sysfs with plain system calls
 * (open, read, close): the kernel's own cacheinfo (/sys/devices/system/cpu/cpuN/cache/
 * indexK: level, type, size, shared_cpu_list) and node lists (/sys/devices/system/node/
 * possible, nodeM/cpulist).  Every path starts at a root, /sys or PCPMALLOC_SYSFS_ROOT (a
 * test's own folder).  No thread, no library, no allocation: it may run on the
 * allocating thread, in the malloc slow path (no allocator lock held).  hwloc stays the
 * source for described machines (XML, synthetic) and the pcpmalloc-topology tool, and its
 * walk gives the same figures for this machine (check_topology.py compares them).
 * A leaf: calls libc only.
 */
#define _GNU_SOURCE
#include "topology.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_CACHE_INDEX 16
#define MAX_NODES 1024
/* a root of up to ~400 characters, then the longest path below it (shared_cpu_list) */
#define PCPM_SYSFS_PATH_MAX 512

/* The file's first line into buf (NUL-terminated, newline dropped); false when unreadable. */
static bool read_line(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return true;
}

static long parse_num(const char **s)
{
	long v = 0;
	while (**s >= '0' && **s <= '9')
		v = v * 10 + (*(*s)++ - '0');
	return v;
}

/* "32K", "1024K", "32M": bytes; 0 when unreadable. */
static size_t parse_size(const char *s)
{
	if (*s < '0' || *s > '9')
		return 0;
	size_t v = (size_t)parse_num(&s);
	if (*s == 'K')
		v <<= 10;
	else if (*s == 'M')
		v <<= 20;
	else if (*s == 'G')
		v <<= 30;
	return v;
}

/* A kernel cpu list ("0-3,8-11"): how many CPUs it names, and whether cpu is one of them. */
static int cpulist_count(const char *s, int cpu, bool *has)
{
	int n = 0;
	if (has)
		*has = false;
	while (*s >= '0' && *s <= '9') {
		long lo = parse_num(&s), hi = lo;
		if (*s == '-') {
			s++;
			hi = parse_num(&s);
		}
		if (hi >= lo)
			n += (int)(hi - lo + 1);
		if (has && cpu >= lo && cpu <= hi)
			*has = true;
		if (*s != ',')
			break;
		s++;
	}
	return n;
}

/* One CPU's caches: L2 (level 2, data or unified) and the last level; false without any. */
static bool cpu_caches(const char *root, int cpu, struct pcpm_cpu_cache *c)
{
	char path[PCPM_SYSFS_PATH_MAX], buf[256], type[32];
	bool any = false;
	for (int k = 0; k < MAX_CACHE_INDEX; k++) {
		snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%d/cache/index%d/level",
			 root, cpu, k);
		if (!read_line(path, buf, sizeof(buf)))
			break;
		const char *lp = buf;
		int level = (int)parse_num(&lp);
		snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%d/cache/index%d/type", root,
			 cpu, k);
		if (!read_line(path, type, sizeof(type)) || !strcmp(type, "Instruction"))
			continue;
		snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%d/cache/index%d/size", root,
			 cpu, k);
		size_t size = read_line(path, buf, sizeof(buf)) ? parse_size(buf) : 0;
		snprintf(path, sizeof(path),
			 "%s/devices/system/cpu/cpu%d/cache/index%d/shared_cpu_list", root, cpu, k);
		int shared = read_line(path, buf, sizeof(buf)) ? cpulist_count(buf, cpu, NULL) : 1;
		if (!size)
			continue;
		if (level == 2) {
			c->l2_bytes = size;
			c->l2_shared = shared;
		}
		if (level >= 2 && level >= c->llc_level) {
			c->llc_bytes = size;
			c->llc_shared = shared;
			c->llc_level = level;
			any = true;
		}
	}
	return any;
}

static int read_int(const char *path, int dflt)
{
	char buf[64];
	const char *s = buf;
	if (!read_line(path, buf, sizeof(buf)) || *s < '0' || *s > '9')
		return dflt;
	return (int)parse_num(&s);
}

int pcpm_sysfs_walk(struct pcpm_cpu_cache *cpus, int ncpus, const char *root)
{
	char path[PCPM_SYSFS_PATH_MAX];
	int found = 0;
	for (int cpu = 0; cpu < ncpus; cpu++) {
		struct pcpm_cpu_cache c = cpus[cpu];
		c.l2_bytes = 0;
		c.l2_shared = 1;
		c.llc_level = 0;
		if (!cpu_caches(root, cpu, &c))
			continue; /* absent or offline: its slot keeps the provisional sizes */
		if (!c.l2_bytes) { /* no L2 level: the LLC stands for it */
			c.l2_bytes = c.llc_bytes;
			c.l2_shared = c.llc_shared;
		}
		snprintf(path, sizeof(path),
			 "%s/devices/system/cpu/cpu%d/topology/physical_package_id", root, cpu);
		c.package = read_int(path, -1);
		snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%d/topology/core_id", root,
			 cpu);
		c.core = read_int(path, -1);
		pcpm_cpu_cache_derive(&c);
		cpus[cpu] = c;
		found++;
	}
	return found;
}

int pcpm_sysfs_nodes(struct pcpm_cpu_cache *cpus, int ncpus, const char *root)
{
	char path[PCPM_SYSFS_PATH_MAX], buf[4096];
	/* NUMA nodes with CPUs, numbered in order (the logical index), with the kernel's id */
	snprintf(path, sizeof(path), "%s/devices/system/node/possible", root);
	if (!read_line(path, buf, sizeof(buf)))
		return 0; /* no NUMA support */
	const char *s = buf;
	int logical = 0;
	while (*s >= '0' && *s <= '9') {
		long lo = parse_num(&s), hi = lo;
		if (*s == '-') {
			s++;
			hi = parse_num(&s);
		}
		for (long m = lo; m <= hi && m < MAX_NODES; m++) {
			char list[4096];
			snprintf(path, sizeof(path), "%s/devices/system/node/node%ld/cpulist", root, m);
			if (!read_line(path, list, sizeof(list)))
				continue;
			int n = cpulist_count(list, -1, NULL);
			if (!n)
				continue; /* a memory-only node */
			for (int cpu = 0; cpu < ncpus; cpu++) {
				bool has;
				cpulist_count(list, cpu, &has);
				if (has) {
					cpus[cpu].node = logical;
					cpus[cpu].node_os = (int)m;
					cpus[cpu].node_cpus = n;
				}
			}
			logical++;
		}
		if (*s != ',')
			break;
		s++;
	}
	return logical;
}
