/*
 * sysfs.c - this machine's caches and NUMA nodes read from sysfs with raw system calls
 * (sysread.h: openat, read, close; no cancellation point): the kernel's own cacheinfo
 * (/sys/devices/system/cpu/cpuN/cache/indexK: level, type, size, shared_cpu_list) and node
 * lists (/sys/devices/system/node/possible, nodeM/cpulist).  Every path starts at a root,
 * /sys or PCPMALLOC_SYSFS_ROOT (a test's own folder).  No thread, no library, no allocation,
 * and the paths and file contents live in the caller's buffers (struct pcpm_sysfs_buf), not
 * on the stack: it may run on the allocating thread, in the malloc slow path (no allocator
 * lock held), on a PTHREAD_STACK_MIN thread.  hwloc stays the source for described machines
 * (XML, synthetic) and the pcpmalloc-topology tool, and its walk gives the same figures for
 * this machine (check_topology.py compares them).  A leaf: calls libc's syscall() only.
 */
#define _GNU_SOURCE
#include "sysfs.h"
#include "sysread.h"

#include <stdbool.h>
#include <string.h>

#define MAX_CACHE_INDEX 16
#define MAX_NODES 1024

/* The file's first line into buf (NUL-terminated, newline dropped); false when unreadable. */
static bool read_line(const char *path, char *buf, size_t len)
{
	int fd = pcpm_sysread_open(path);
	if (fd < 0)
		return false;
	long n = pcpm_sysread_read(fd, buf, len - 1);
	pcpm_sysread_close(fd);
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

/* ROOT/devices/system/cpu/cpuN/cache/indexK/FILE, or ROOT/devices/system/cpu/cpuN/FILE
 * when k < 0, into io->path. */
static const char *cpu_path(struct pcpm_sysfs_buf *io, const char *root, int cpu, int k,
			    const char *file)
{
	struct pcpm_path p;
	pcpm_path_start(&p, io->path, sizeof(io->path));
	pcpm_path_str(&p, root);
	pcpm_path_str(&p, "/devices/system/cpu/cpu");
	pcpm_path_num(&p, cpu);
	if (k >= 0) {
		pcpm_path_str(&p, "/cache/index");
		pcpm_path_num(&p, k);
	}
	pcpm_path_str(&p, "/");
	pcpm_path_str(&p, file);
	return io->path;
}

/* One CPU's caches: L2 (level 2, data or unified) and the last level; false without any. */
static bool cpu_caches(struct pcpm_sysfs_buf *io, const char *root, int cpu,
		       struct pcpm_cpu_cache *c)
{
	char *buf = io->line;
	const size_t len = sizeof(io->line);
	bool any = false;
	for (int k = 0; k < MAX_CACHE_INDEX; k++) {
		if (!read_line(cpu_path(io, root, cpu, k, "level"), buf, len))
			break;
		const char *lp = buf;
		int level = (int)parse_num(&lp);
		if (!read_line(cpu_path(io, root, cpu, k, "type"), buf, len) ||
		    !strcmp(buf, "Instruction"))
			continue;
		size_t size = 0;
		if (read_line(cpu_path(io, root, cpu, k, "size"), buf, len))
			size = parse_size(buf);
		int shared = read_line(cpu_path(io, root, cpu, k, "shared_cpu_list"), buf, len)
				     ? cpulist_count(buf, cpu, NULL)
				     : 1;
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

static int read_int(struct pcpm_sysfs_buf *io, const char *path, int dflt)
{
	const char *s = io->line;
	if (!read_line(path, io->line, sizeof(io->line)) || *s < '0' || *s > '9')
		return dflt;
	return (int)parse_num(&s);
}

int pcpm_sysfs_walk(struct pcpm_cpu_cache *cpus, int ncpus, const char *root,
		    struct pcpm_sysfs_buf *io)
{
	int found = 0;
	for (int cpu = 0; cpu < ncpus; cpu++) {
		struct pcpm_cpu_cache c = cpus[cpu];
		c.l2_bytes = 0;
		c.l2_shared = 1;
		c.llc_level = 0;
		if (!cpu_caches(io, root, cpu, &c))
			continue; /* absent or offline: its slot keeps the provisional sizes */
		if (!c.l2_bytes) { /* no L2 level: the LLC stands for it */
			c.l2_bytes = c.llc_bytes;
			c.l2_shared = c.llc_shared;
		}
		c.package =
			read_int(io, cpu_path(io, root, cpu, -1, "topology/physical_package_id"), -1);
		c.core = read_int(io, cpu_path(io, root, cpu, -1, "topology/core_id"), -1);
		pcpm_cpu_cache_derive(&c);
		cpus[cpu] = c;
		found++;
	}
	return found;
}

int pcpm_sysfs_nodes(struct pcpm_cpu_cache *cpus, int ncpus, const char *root,
		     struct pcpm_sysfs_buf *io)
{
	struct pcpm_path p;
	/* NUMA nodes with CPUs, numbered in order (the logical index), with the kernel's id */
	pcpm_path_start(&p, io->path, sizeof(io->path));
	pcpm_path_str(&p, root);
	pcpm_path_str(&p, "/devices/system/node/possible");
	if (!read_line(io->path, io->list, sizeof(io->list)))
		return 0; /* no NUMA support */
	const char *s = io->list; /* "possible": io->line takes each node's cpulist */
	int logical = 0;
	while (*s >= '0' && *s <= '9') {
		long lo = parse_num(&s), hi = lo;
		if (*s == '-') {
			s++;
			hi = parse_num(&s);
		}
		for (long m = lo; m <= hi && m < MAX_NODES; m++) {
			char *list = io->line;
			pcpm_path_start(&p, io->path, sizeof(io->path));
			pcpm_path_str(&p, root);
			pcpm_path_str(&p, "/devices/system/node/node");
			pcpm_path_num(&p, m);
			pcpm_path_str(&p, "/cpulist");
			if (!read_line(io->path, list, sizeof(io->line)))
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
