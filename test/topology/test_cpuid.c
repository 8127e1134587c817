/*
 * test_cpuid.c - the CPUID source's arithmetic (topology/cpuid.c) without the machine: the
 * APIC ids read from /proc/cpuinfo files written here (holes between packages, a line longer
 * than the reader's buffer, CPUs beyond the process's slots), and who shares a cache from
 * them: the online CPUs of one APIC id group, not the "maximum logical processors sharing"
 * field, which is an upper bound of APIC ids.  Then, on x86, the calling CPU's leaves.
 */
#include "../unit/unit.h"
#include "cpuid.h"
#include "topology.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static char path[64];
static char buf[1024]; /* the reader's buffer: the flags lines below do not fit */

/* Writes a /proc/cpuinfo-like file: CPU i has APIC id apic[i] in package pkg[i]. */
static void write_cpuinfo(int n, const int *apic, const int *pkg)
{
	strcpy(path, "/tmp/test_cpuid.XXXXXX");
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	FILE *f = fdopen(fd, "w");
	CHECK(f);
	for (int i = 0; i < n; i++) {
		fprintf(f, "processor\t: %d\nvendor_id\t: GenuineIntel\nphysical id\t: %d\n", i, pkg[i]);
		fprintf(f, "siblings\t: 4\ncore id\t\t: %d\n", i % 4);
		/* "initial apicid" must not be taken for "apicid" */
		fprintf(f, "apicid\t\t: %d\ninitial apicid\t: 999\nflags\t\t:", apic[i]);
		for (int k = 0; k < 300; k++) /* 1800 characters: longer than the 1 KiB buffer */
			fprintf(f, " flag%02d", k % 100);
		fprintf(f, "\nbogomips\t: 4000.00\n\n");
	}
	fclose(f);
}

int main(void)
{
	/* Two packages of 4 CPUs, APIC ids 0-3 and 16-19 (the ids of absent cores left out). */
	const int apic[8] = { 0, 1, 2, 3, 16, 17, 18, 19 };
	const int pkg[8] = { 0, 0, 0, 0, 1, 1, 1, 1 };
	write_cpuinfo(8, apic, pkg);
	struct pcpm_cpu_cache cpus[8];
	int ids[64];
	memset(cpus, 0, sizeof(cpus));
	CHECK_EQ(pcpm_cpuinfo_apicids(path, cpus, 8, ids, 64, buf, sizeof(buf)), 8);
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(ids[i], apic[i]);
		CHECK_EQ(cpus[i].package, pkg[i]);
		CHECK_EQ(cpus[i].core, i % 4);
	}
	CHECK_EQ(ids[8], -1);

	/* L1d (ignored), L1i (ignored), L2 1 MiB for 2 ids, L3 16 MiB for up to 16 ids: the
	 * L3 holds the 4 CPUs of a package (ids >> 4 agree), so the slice is 16 MiB / 4 = 4 MiB,
	 * not 16 MiB / 16.  L2: ids >> 1: pairs. */
	const struct pcpm_cpuid_cache c4[] = {
		{ .level = 1, .bytes = 48 * KiB, .max_sharing = 2 },
		{ .level = 1, .instruction = true, .bytes = 32 * KiB, .max_sharing = 2 },
		{ .level = 2, .bytes = MiB, .max_sharing = 2 },
		{ .level = 3, .bytes = 16 * MiB, .max_sharing = 16 },
	};
	const char *why = NULL;
	CHECK_EQ(pcpm_cpuid_fill(cpus, 8, 8, c4, 4, ids, 64, &why), 8);
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(cpus[i].l2_bytes, MiB);
		CHECK_EQ(cpus[i].l2_shared, 2);
		CHECK_EQ(cpus[i].llc_bytes, 16 * MiB);
		CHECK_EQ(cpus[i].llc_shared, 4);
		CHECK_EQ(cpus[i].llc_level, 3);
		CHECK_EQ(cpus[i].slice_bytes, 4 * MiB);
		CHECK_EQ(cpus[i].l2_share_bytes, 512 * KiB);
	}

	/* A field that is not a power of two (12) is rounded up to the group of 16 ids, as the
	 * kernel's get_count_order: still the 4 CPUs of the package. */
	struct pcpm_cpuid_cache c12[] = { { .level = 2, .bytes = MiB, .max_sharing = 1 },
					  { .level = 3, .bytes = 12 * MiB, .max_sharing = 12 } };
	CHECK_EQ(pcpm_cpuid_fill(cpus, 8, 8, c12, 2, ids, 64, &why), 8);
	CHECK_EQ(cpus[5].llc_shared, 4);
	CHECK_EQ(cpus[5].l2_shared, 1);
	CHECK_EQ(cpus[5].slice_bytes, 3 * MiB);

	/* The process has 2 CPU slots (taskset): the other online CPUs still share the L3. */
	memset(cpus, 0, sizeof(cpus));
	CHECK_EQ(pcpm_cpuinfo_apicids(path, cpus, 2, ids, 64, buf, sizeof(buf)), 8);
	CHECK_EQ(pcpm_cpuid_fill(cpus, 2, 2, c4, 4, ids, 64, &why), 2);
	CHECK_EQ(cpus[1].llc_shared, 4);
	CHECK_EQ(cpus[2].llc_bytes, 0); /* beyond the slots: untouched */

	/* Room for 6 APIC ids only: CPUs 6 and 7 are not counted; 4 and 5 share with each other. */
	CHECK_EQ(pcpm_cpuinfo_apicids(path, cpus, 8, ids, 6, buf, sizeof(buf)), 6);
	CHECK_EQ(pcpm_cpuid_fill(cpus, 8, 8, c4, 4, ids, 6, &why), 6);
	CHECK_EQ(cpus[4].llc_shared, 2);
	CHECK_EQ(cpus[0].llc_shared, 4);
	unlink(path);

	/* No /proc/cpuinfo: every slot gets min(max sharing, CPUs of the process). */
	memset(cpus, 0, sizeof(cpus));
	CHECK_EQ(pcpm_cpuinfo_apicids("/nonexistent/cpuinfo", cpus, 8, ids, 64, buf, sizeof(buf)), 0);
	CHECK_EQ(pcpm_cpuid_fill(cpus, 8, 3, c4, 4, ids, 0, &why), 8);
	CHECK_EQ(cpus[7].llc_shared, 3);
	CHECK_EQ(cpus[7].l2_shared, 2);
	CHECK_EQ(pcpm_cpuid_fill(cpus, 8, 64, c4, 4, ids, 0, &why), 8);
	CHECK_EQ(cpus[7].llc_shared, 16);

	/* An L2 only (no L3): it is the last level and stands for both. */
	const struct pcpm_cpuid_cache c2[] = { { .level = 2, .bytes = 512 * KiB, .max_sharing = 2 } };
	CHECK_EQ(pcpm_cpuid_fill(cpus, 2, 2, c2, 1, ids, 0, &why), 2);
	CHECK_EQ(cpus[0].llc_level, 2);
	CHECK_EQ(cpus[0].slice_bytes, 256 * KiB);
	CHECK_EQ(cpus[0].l2_share_bytes, 0);

	/* The legacy leaves of a 2-vCPU AMD VM (bhyve, "Oxide Virtual Turin-like"): 0x80000006
	 * gives a 1 MiB L2 and a 508 MiB L3 "package-wide" for leaf 1's 254 logical processors
	 * (256 APIC ids), but 0x80000008 ECX is 0 (1 core per package, no x2APIC): hwloc's
	 * packages are APIC id / 1, so each of APIC ids 0 and 1 is a package with its own L3
	 * (lstopo: slice 508 MiB, not 254 MiB). */
	const struct pcpm_cpuid_cache vm[] = {
		{ .level = 2, .bytes = MiB, .max_sharing = 1, .pkg_apics = 1 },
		{ .level = 3, .bytes = 1016 * 512 * KiB, .max_sharing = 256, .pkg_apics = 1 } };
	const int vm_apic[2] = { 0, 1 };
	memset(cpus, 0, sizeof(cpus));
	CHECK_EQ(pcpm_cpuid_fill(cpus, 2, 2, vm, 2, vm_apic, 2, &why), 2);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(cpus[i].l2_shared, 1);
		CHECK_EQ(cpus[i].llc_shared, 1);
		CHECK_EQ(cpus[i].slice_bytes, 1016 * 512 * KiB);
	}
	/* without APIC ids too: min(max sharing, APIC ids per package, CPUs) */
	CHECK_EQ(pcpm_cpuid_fill(cpus, 2, 2, vm, 2, vm_apic, 0, &why), 2);
	CHECK_EQ(cpus[1].llc_shared, 1);
	/* packages of 4 APIC ids bound an L3 listed for 16: two groups of 2 in ids 0-7 */
	const struct pcpm_cpuid_cache p4[] = {
		{ .level = 3, .bytes = 8 * MiB, .max_sharing = 16, .pkg_apics = 4 } };
	const int p4_apic[4] = { 0, 1, 4, 5 };
	CHECK_EQ(pcpm_cpuid_fill(cpus, 4, 4, p4, 1, p4_apic, 4, &why), 4);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(cpus[i].llc_shared, 2);

	/* L1 only: nothing to size from. */
	why = NULL;
	CHECK_EQ(pcpm_cpuid_fill(cpus, 2, 2, c4, 2, ids, 0, &why), -1);
	CHECK(why && strstr(why, "no L2 or L3"));

	/* This CPU's leaves: on x86 at least an L2 or L3 with a size and a sharing field;
	 * elsewhere none, with the reason. */
	struct pcpm_cpuid_cache mine[16];
	why = NULL;
	int n = pcpm_cpuid_caches(mine, 16, &why);
#if defined(__x86_64__) || defined(__i386__)
	int big = 0;
	for (int k = 0; k < n; k++) {
		CHECK(mine[k].level >= 1 && mine[k].level <= 4);
		CHECK(mine[k].max_sharing >= 1);
		big += mine[k].level >= 2 && mine[k].bytes >= 64 * KiB;
	}
	CHECK(big >= 1);
	printf("cpuid: this CPU lists %d caches\n", n);
#else
	CHECK_EQ(n, 0);
	CHECK(why && strstr(why, "no CPUID"));
#endif
	printf("cpuid: APIC id groups, buffer-sized lines and fallbacks as worked out by hand\n");
	return 0;
}
