/*
 * cpuid.c - this machine's caches from the processor itself, for machines whose kernel
 * exports no cacheinfo in sysfs (microVMs, some cloud VMs and containers).  Mirrors the
 * kernel's arch/x86/kernel/cpu/cacheinfo.c: the deterministic cache parameters of leaf 4
 * (Intel, Centaur, Zhaoxin: init_intel_cacheinfo) or of leaf 0x8000001D (AMD and Hygon with
 * the topology extension: init_amd_cacheinfo), the legacy leaves 0x80000005/6 as a last resort
 * (the kernel's amd_cpuid4 emulation), and who shares a cache from the APIC ids: CPUs whose
 * APIC id agrees above the bits of the "maximum logical processors sharing" field share it
 * (apicid >> get_count_order(max sharing), as __cache_amd_cpumap_setup / cpu_llc_id and
 * hwloc's topology-x86.c).  That field is an upper bound of APIC ids, not a count of CPUs:
 * the count is the online CPUs found in the group.  A group never spans two packages, the
 * package being APIC id / APIC ids per package as hwloc's x86 backend computes it
 * (package_apics: leaf 0xB/0x1F, else AMD's 0x80000008 cores, else leaf 1's count): on a
 * VM whose leaf 1 claims 254 logical processors but 0x80000008 one core, each CPU is its own
 * package with its own L3, as lstopo shows it.
 *
 * The CPUID instruction describes the CPU it runs on, and the calling thread must not
 * migrate itself (it is inside the program's malloc): the leaves are read once, here, and
 * taken as every CPU's (the CPUs of a machine without sysfs cacheinfo are alike; a hybrid
 * CPU with two core types would need each type read on its own CPU).  Every CPU's APIC id
 * comes from /proc/cpuinfo (the kernel read it on that CPU at boot: "apicid"), read with
 * raw system calls (sysread.h: no cancellation point) into the caller's buffer; without it, a
 * cache is taken as shared by min(max sharing, CPUs this process may run on).  No
 * allocation, no lock, no library: plain instructions and system calls, so it may run on the
 * allocating thread.  A leaf: calls libc's syscall() only.
 */
#define _GNU_SOURCE
#include "cpuid.h"
#include "sysread.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
/* The instruction itself (the compiler's <cpuid.h> is hidden by this folder's cpuid.h). */
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4])
{
	__asm__ volatile("cpuid"
			 : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3])
			 : "a"(leaf), "c"(sub));
}

/* One cache of a deterministic-parameters leaf (4 or 0x8000001D: the same layout); false at
 * the end of the list (type 0). */
static bool deterministic(unsigned leaf, unsigned sub, struct pcpm_cpuid_cache *c)
{
	unsigned r[4];
	cpuid(leaf, sub, r);
	unsigned type = r[0] & 0x1f; /* 1 data, 2 instruction, 3 unified */
	if (!type)
		return false;
	c->level = (int)((r[0] >> 5) & 7);
	c->instruction = type == 2;
	c->max_sharing = ((r[0] >> 14) & 0xfff) + 1;
	/* ways x partitions x line size x sets */
	c->bytes = (size_t)(((r[1] >> 22) & 0x3ff) + 1) * (((r[1] >> 12) & 0x3ff) + 1) *
		   ((r[1] & 0xfff) + 1) * ((size_t)r[2] + 1);
	return true;
}

/*
 * APIC ids per package, as hwloc's x86 backend (topology-x86.c, look_proc) numbers packages
 * from the same leaves, the last that applies winning:
 *  - leaf 1: EBX[23:16] logical processors (HTT set), rounded up to a power of two
 *    ("legacy_max_log_proc"), else 1;
 *  - AMD/Hygon without x2APIC (leaf 1 ECX[21]) and leaf 0x80000008: 1 << ECX[15:12]
 *    (ApicIdCoreIdSize) or, when that is 0, ECX[7:0] + 1 (cores; read_amd_cores_legacy:
 *    "legacy_max_log_proc is deprecated, it can be smaller than max_nbcores");
 *  - x2APIC with leaf 0xB (Intel, AMD, Zhaoxin), or leaf 0x1F (Intel): 1 << the shift of
 *    the last level listed (EAX[4:0]; read_intel_cores_exttopoenum: package = x2APIC id >>
 *    that shift).
 * hwloc puts two CPUs in one cache only when their packages agree too (the cache id is
 * taken within the package), so this bounds every cache's group.  Not mirrored: hwloc's AMD
 * topoext 0x8000001E APIC id (the kernel's /proc/cpuinfo apicid is the same id) and the
 * 0x80000026 leaf (hwloc 2.10+).
 */
static unsigned package_apics(bool amd, bool intel, bool zhaoxin, unsigned max_leaf,
			      unsigned max_ext)
{
	unsigned r[4];
	cpuid(1, 0, r);
	bool x2apic = r[2] & (1u << 21);
	unsigned pkg = 1;
	if (r[3] & (1u << 28)) { /* HTT */
		unsigned logical = (r[1] >> 16) & 0xff;
		while (pkg < logical)
			pkg <<= 1;
	}
	if (!intel && !zhaoxin && max_ext >= 0x80000008 && !x2apic) {
		cpuid(0x80000008, 0, r);
		unsigned coreidsize = (r[2] >> 12) & 0xf;
		pkg = coreidsize ? 1u << coreidsize : (r[2] & 0xff) + 1;
	}
	unsigned leaf = 0;
	if (intel && max_leaf >= 0x1f)
		leaf = 0x1f;
	else if ((intel || amd || zhaoxin) && max_leaf >= 0xb && x2apic)
		leaf = 0xb;
	if (leaf) {
		unsigned shift = 0;
		bool any = false;
		for (unsigned level = 0; level < 8; level++) {
			cpuid(leaf, level, r);
			if (!r[0] && !r[1])
				break;
			shift = r[0] & 0x1f;
			any = true;
		}
		if (any)
			pkg = 1u << shift;
	}
	return pkg;
}

int pcpm_cpuid_caches(struct pcpm_cpuid_cache *out, int max, const char **why)
{
	unsigned r[4];
	cpuid(0, 0, r);
	unsigned max_leaf = r[0];
	char vendor[13];
	memcpy(vendor, &r[1], 4);
	memcpy(vendor + 4, &r[3], 4);
	memcpy(vendor + 8, &r[2], 4);
	vendor[12] = '\0';
	cpuid(0x80000000, 0, r);
	unsigned max_ext = r[0] >= 0x80000000 && r[0] < 0x8000ffff ? r[0] : 0;
	bool amd = !strcmp(vendor, "AuthenticAMD") || !strcmp(vendor, "HygonGenuine");
	bool intel = !strcmp(vendor, "GenuineIntel");
	bool zhaoxin = !strcmp(vendor, "CentaurHauls") || !strcmp(vendor, "  Shanghai  ");
	int n = 0;
	if (amd) {
		bool topoext = false;
		if (max_ext >= 0x80000001) {
			cpuid(0x80000001, 0, r);
			topoext = r[2] & (1u << 22);
		}
		if (topoext && max_ext >= 0x8000001d)
			for (unsigned k = 0; n < max && k < 16; k++, n++)
				if (!deterministic(0x8000001d, k, &out[n]))
					break;
	} else if (max_leaf >= 4) {
		for (unsigned k = 0; n < max && k < 16; k++, n++)
			if (!deterministic(4, k, &out[n]))
				break;
	}
	if (n == 0 && max_ext >= 0x80000006 && max >= 2) {
		/* legacy: ECX[31:16] the L2 in KiB, EDX[31:18] the L3 in 512 KiB units; the L3
		 * is the package's (leaf 1's logical processor count, a power of two as hwloc
		 * takes it: read_amd_caches_legacy), the L2 private */
		unsigned l1[4];
		cpuid(1, 0, l1);
		unsigned logical = (l1[3] & (1u << 28)) ? (l1[1] >> 16) & 0xff : 1;
		unsigned pkg = 1;
		while (pkg < logical)
			pkg <<= 1;
		cpuid(0x80000006, 0, r);
		if (r[2] >> 16)
			out[n++] = (struct pcpm_cpuid_cache){ .level = 2,
							      .bytes = (size_t)(r[2] >> 16) << 10,
							      .max_sharing = 1 };
		if (r[3] >> 18)
			out[n++] = (struct pcpm_cpuid_cache){ .level = 3,
							      .bytes = (size_t)(r[3] >> 18) << 19,
							      .max_sharing = pkg };
	}
	if (n == 0) {
		*why = "CPUID lists no caches (leaves 4, 0x8000001D, 0x80000006)";
		return 0;
	}
	unsigned pkg_apics = package_apics(amd, intel, zhaoxin, max_leaf, max_ext);
	for (int k = 0; k < n; k++)
		out[k].pkg_apics = pkg_apics;
	return n;
}
#else
int pcpm_cpuid_caches(struct pcpm_cpuid_cache *out, int max, const char **why)
{
	(void)out;
	(void)max;
	*why = "no CPUID on this architecture";
	return 0;
}
#endif

/* "key<spaces>: value" at the start of line: the value, or NULL. */
static const char *field(const char *line, const char *key)
{
	size_t n = strlen(key);
	if (strncmp(line, key, n) != 0)
		return NULL;
	line += n;
	while (*line == ' ' || *line == '\t')
		line++;
	if (*line != ':')
		return NULL;
	line++;
	while (*line == ' ')
		line++;
	return *line >= '0' && *line <= '9' ? line : NULL;
}

static int number(const char *s)
{
	long v = 0;
	while (*s >= '0' && *s <= '9' && v < 1L << 30)
		v = v * 10 + (*s++ - '0');
	return (int)v;
}

/* One line of /proc/cpuinfo: "processor" starts a CPU, whose apicid, physical id and core
 * id follow. */
static void cpuinfo_line(const char *line, int *cpu, struct pcpm_cpu_cache *cpus, int ncpus,
			 int *apicid, int napic, int *found)
{
	const char *v;
	if ((v = field(line, "processor"))) {
		*cpu = number(v);
		return;
	}
	if (*cpu < 0)
		return;
	if ((v = field(line, "apicid"))) {
		if (*cpu < napic) {
			if (apicid[*cpu] < 0)
				++*found;
			apicid[*cpu] = number(v);
		}
	} else if (*cpu >= ncpus) {
		return;
	} else if ((v = field(line, "physical id"))) {
		cpus[*cpu].package = number(v);
	} else if ((v = field(line, "core id"))) {
		cpus[*cpu].core = number(v);
	}
}

int pcpm_cpuinfo_apicids(const char *path, struct pcpm_cpu_cache *cpus, int ncpus, int *apicid,
			 int napic, char *buf, size_t len)
{
	for (int i = 0; i < napic; i++)
		apicid[i] = -1;
	int fd = pcpm_sysread_open(path);
	if (fd < 0)
		return 0;
	/* line by line through the buffer; the lines that do not fit (flags) are skipped */
	size_t have = 0;
	bool skipping = false;
	int cpu = -1, found = 0;
	for (;;) {
		long r = pcpm_sysread_read(fd, buf + have, len - 1 - have);
		if (r <= 0)
			break;
		have += (size_t)r;
		size_t start = 0;
		for (size_t i = 0; i < have; i++) {
			if (buf[i] != '\n')
				continue;
			buf[i] = '\0';
			if (!skipping)
				cpuinfo_line(buf + start, &cpu, cpus, ncpus, apicid, napic, &found);
			skipping = false;
			start = i + 1;
		}
		if (start == 0 && have == len - 1) {
			skipping = true; /* a line longer than the buffer: drop what we have */
			have = 0;
		} else {
			memmove(buf, buf + start, have - start);
			have -= start;
		}
	}
	pcpm_sysread_close(fd);
	return found;
}

/* ceil(log2(n)): the APIC id bits of a group of n (the kernel's get_count_order). */
static unsigned count_order(unsigned n)
{
	unsigned o = 0;
	while ((1u << o) < n && o < 31)
		o++;
	return o;
}

/* The online CPUs whose APIC id agrees with cpu's above the bits of max_sharing ids and
 * that sit in cpu's package (APIC id / pkg_apics, hwloc's package id; pkg_apics 0: no
 * bound); without APIC ids, min(max_sharing, pkg_apics, nr_online). */
static int sharing(const int *apicid, int napic, int cpu, const struct pcpm_cpuid_cache *c,
		   int nr_online)
{
	unsigned most = c->max_sharing;
	if (c->pkg_apics && c->pkg_apics < most)
		most = c->pkg_apics;
	if (napic <= 0 || cpu >= napic || apicid[cpu] < 0)
		return (int)most < nr_online ? (int)most : nr_online;
	unsigned shift = count_order(c->max_sharing);
	unsigned group = (unsigned)apicid[cpu] >> shift;
	unsigned pkg = c->pkg_apics ? (unsigned)apicid[cpu] / c->pkg_apics : 0;
	int n = 0;
	for (int j = 0; j < napic; j++)
		if (apicid[j] >= 0 && ((unsigned)apicid[j] >> shift) == group &&
		    (!c->pkg_apics || (unsigned)apicid[j] / c->pkg_apics == pkg))
			n++;
	return n;
}

int pcpm_cpuid_fill(struct pcpm_cpu_cache *cpus, int ncpus, int nr_online,
		    const struct pcpm_cpuid_cache *caches, int nc, const int *apicid, int napic,
		    const char **why)
{
	/* L2 and the last level, data or unified, as sysfs.c takes them */
	int l2 = -1, llc = -1;
	for (int k = 0; k < nc; k++) {
		if (caches[k].instruction || caches[k].level < 2 || !caches[k].bytes)
			continue;
		if (caches[k].level == 2)
			l2 = k;
		if (llc < 0 || caches[k].level >= caches[llc].level)
			llc = k;
	}
	if (llc < 0) {
		*why = "CPUID lists no L2 or L3 cache";
		return -1;
	}
	if (l2 < 0)
		l2 = llc; /* no L2 level: the LLC stands for it */
	int found = 0;
	for (int cpu = 0; cpu < ncpus; cpu++) {
		/* with APIC ids, the CPUs /proc/cpuinfo lists (online); without, every slot */
		if (napic > 0 && (cpu >= napic || apicid[cpu] < 0))
			continue;
		struct pcpm_cpu_cache *c = &cpus[cpu];
		c->l2_bytes = caches[l2].bytes;
		c->l2_shared = sharing(apicid, napic, cpu, &caches[l2], nr_online);
		c->llc_bytes = caches[llc].bytes;
		c->llc_shared = sharing(apicid, napic, cpu, &caches[llc], nr_online);
		c->llc_level = caches[llc].level;
		pcpm_cpu_cache_derive(c);
		found++;
	}
	if (!found)
		*why = "no CPU of this process in the APIC id list";
	return found ? found : -1;
}

int pcpm_cpuid_walk(struct pcpm_cpu_cache *cpus, int ncpus, int nr_online, const char *cpuinfo,
		    int *apicid, int napic, char *buf, size_t len, const char **why)
{
	struct pcpm_cpuid_cache caches[8]; /* L1d, L1i, L2, L3 and room to spare: 192 bytes */
	int nc = pcpm_cpuid_caches(caches, 8, why);
	if (nc <= 0)
		return -1;
	int known = pcpm_cpuinfo_apicids(cpuinfo, cpus, ncpus, apicid, napic, buf, len);
	return pcpm_cpuid_fill(cpus, ncpus, nr_online, caches, nc, apicid, known ? napic : 0, why);
}
