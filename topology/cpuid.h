/*
 * cpuid.h - this machine's caches from CPUID (x86), for a kernel without sysfs cacheinfo
 * (see cpuid.c; the kernel's arch/x86/kernel/cpu/cacheinfo.c).  No allocation, no lock, no
 * library: safe on the allocating thread.  Elsewhere than x86 every call reports "no CPUID".
 */
#ifndef PCPM_CPUID_H
#define PCPM_CPUID_H

#include "cpuinfo.h"

#include <stdbool.h>
#include <stddef.h>

/* One cache of the calling CPU as CPUID lists it. */
struct pcpm_cpuid_cache {
	int level;		/* 1, 2, 3, ... */
	bool instruction;	/* an instruction cache (not used for slices) */
	size_t bytes;		/* its size in bytes */
	unsigned max_sharing;	/* "maximum logical processors sharing": an APIC id range */
	unsigned pkg_apics;	/* APIC ids per package (package = APIC id / pkg_apics, as
				 * hwloc's x86 backend numbers packages): a cache never spans
				 * two packages; 0: not known (no bound) */
};

/* The calling CPU's caches (at most max) into out: how many, or 0 with *why set (not x86,
 * no cache leaf).  Mirrors init_intel_cacheinfo / init_amd_cacheinfo; pkg_apics as hwloc's
 * x86 backend numbers packages (cpuid.c, package_apics).  Thread-safe. */
int pcpm_cpuid_caches(struct pcpm_cpuid_cache *out, int max, const char **why);

/* Every CPU's APIC id from a /proc/cpuinfo file (path), into apicid[0..napic) (-1 when not
 * listed; CPUs numbered napic and above are left out), with its package ("physical id") and
 * core ("core id") into cpus[0..ncpus): the number of APIC ids found, 0 when the file is
 * unreadable.  Raw openat/read/close (no cancellation point) through buf (len bytes: lines
 * longer are skipped). */
int pcpm_cpuinfo_apicids(const char *path, struct pcpm_cpu_cache *cpus, int ncpus, int *apicid,
			 int napic, char *buf, size_t len);

/* Fills cpus[0..ncpus) with the L2 and last-level data/unified cache of caches[0..nc) (one
 * CPU's, taken as every CPU's) and who shares each: the CPUs of apicid[0..napic) in the same
 * APIC id group and package (napic 0: min(max sharing, pkg_apics, nr_online)).  Returns how many CPUs it filled, or
 * -1 with *why set.  Pure: thread-safe. */
int pcpm_cpuid_fill(struct pcpm_cpu_cache *cpus, int ncpus, int nr_online,
		    const struct pcpm_cpuid_cache *caches, int nc, const int *apicid, int napic,
		    const char **why);

/* pcpm_cpuid_caches of the calling CPU, the APIC ids of cpuinfo (a /proc/cpuinfo path;
 * apicid: napic ints of scratch; buf: len bytes to read it through) and pcpm_cpuid_fill: how
 * many CPUs it filled, or -1 with *why set.  Thread-safe (writes only its arguments). */
int pcpm_cpuid_walk(struct pcpm_cpu_cache *cpus, int ncpus, int nr_online, const char *cpuinfo,
		    int *apicid, int napic, char *buf, size_t len, const char **why);

#endif
