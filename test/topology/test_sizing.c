/*
 * test_sizing.c - the per-CPU sizing formula (topology/sizing.c) and the slice arithmetic
 * (topology/cpuinfo.c) against values worked out by hand.  4 KiB pages throughout;
 * batch = zone_batchsize(1 GiB floor) = 63 (min(262144 >> 12, 64) = 64; 64 + 32 = 96;
 * rounddown_pow_of_two(96) - 1 = 63), so high_min = 4 * 63 = 252 and the
 * PCPF_FREE_HIGH_BATCH threshold is 3 * 63 = 189 slice pages.
 */
#include "../unit/unit.h"
#include "sizing.h"
#include "topology.h"

#include <stdio.h>
#include <string.h>

static struct pcpm_size_out size(size_t l2_share, size_t slice, int policy, int split)
{
	struct pcpm_size_in in = { .l2_share_bytes = l2_share, .slice_bytes = slice,
				   .heap_pages = 0, .split = split, .policy = policy,
				   .batch = -1, .high_min = -1, .high_max = -1,
				   .free_high_batch = -1, .slice_factor = 3 };
	struct pcpm_size_out o;
	pcpm_size_pcp(&in, &o);
	return o;
}

static struct pcpm_cpu_cache cache(size_t l2, int l2_shared, size_t llc, int llc_shared, int lvl)
{
	struct pcpm_cpu_cache c = { .l2_bytes = l2, .l2_shared = l2_shared, .llc_bytes = llc,
				    .llc_shared = llc_shared, .llc_level = lvl };
	pcpm_cpu_cache_derive(&c);
	return c;
}

int main(void)
{
	/* zone_batchsize: 1 GiB -> 63 (above); 256 MiB = 65536 pages -> 16 -> 24 -> 15;
	 * 16 MiB = 4096 pages -> 1 -> 1; 64 GiB stays at the 256 KiB cap -> 63. */
	CHECK_EQ(pcpm_zone_batchsize(262144), 63);
	CHECK_EQ(pcpm_zone_batchsize(65536), 15);
	CHECK_EQ(pcpm_zone_batchsize(4096), 1);
	CHECK_EQ(pcpm_zone_batchsize(16777216), 63);

	/* This machine (test/topology/thismachine.xml, AMD EPYC under KVM): 2 cores, L2 1 MiB
	 * each, L3 32 MiB shared by both.  slice = 33554432 / 2 = 16777216 B = 4096 pages;
	 * L2 share = 1048576 / 1 = 256 pages; high_max = 4096 + 256 = 4352; 4096 > 189: flag. */
	struct pcpm_cpu_cache c = cache(1048576, 1, 33554432, 2, 3);
	CHECK_EQ(c.slice_bytes, 16777216);
	CHECK_EQ(c.l2_share_bytes, 1048576);
	struct pcpm_size_out o = size(c.l2_share_bytes, c.slice_bytes, HIGH_POLICY_CACHE, 2);
	CHECK_EQ(o.batch, 63);
	CHECK_EQ(o.high_min, 252);
	CHECK_EQ(o.high_max, 4352);
	CHECK_EQ(o.free_high_batch, 1);

	/* 224-CPU server (2 x 56 cores x 2 threads, 2 MiB L2 per core, 105 MiB L3 per socket):
	 * slice = 110100480 / 112 = 983040 B = 240 pages (0.9375 MiB, the Sapphire Rapids
	 * figure of the posts); L2 share = 2097152 / 2 = 1048576 B = 256 pages;
	 * high_max = 240 + 256 = 496; 240 > 189: flag on. */
	c = cache(2097152, 2, 110100480, 112, 3);
	CHECK_EQ(c.slice_bytes, 983040);
	CHECK_EQ(c.l2_share_bytes, 1048576);
	o = size(c.l2_share_bytes, c.slice_bytes, HIGH_POLICY_CACHE, 112);
	CHECK_EQ(o.high_min, 252);
	CHECK_EQ(o.high_max, 496);
	CHECK_EQ(o.free_high_batch, 1);
	/* Same machine, heap policy (§12.4) on the 1 GiB floor, split = 112 CPUs per node:
	 * min_free_kbytes = sqrt(16 * 1048576) = 4096 KiB = 1024 pages; low = 1024 +
	 * max(1024/4 = 256, 262144 * 10 / 10000 = 262) = 1286; 1286 / 112 = 11 -> 252;
	 * high_max = 262144 / 8 / 112 = 292. */
	CHECK_EQ(pcpm_low_wmark_pages(262144), 1286);
	o = size(c.l2_share_bytes, c.slice_bytes, HIGH_POLICY_HEAP, 112);
	CHECK_EQ(o.high_min, 252);
	CHECK_EQ(o.high_max, 292);

	/* 2-socket 128-CPU server (AMD EPYC 7543-like: per socket 8 CCDs x 4 cores x 2
	 * threads, 32 MiB L3 per CCD, 512 KiB L2 per core): slice = 33554432 / 8 = 4194304 B =
	 * 1024 pages; L2 share = 524288 / 2 = 262144 B = 64 pages;
	 * high_max = 1024 + 64 = 1088; flag on. */
	c = cache(524288, 2, 33554432, 8, 3);
	CHECK_EQ(c.l2_share_bytes, 262144);
	o = size(c.l2_share_bytes, c.slice_bytes, HIGH_POLICY_CACHE, 64);
	CHECK_EQ(o.high_max, 1088);
	CHECK_EQ(o.free_high_batch, 1);

	/* Two L2 sizes (hybrid_l2.xml: 30 MiB L3 over 16 threads; cores 0-3 have 1.25 MiB L2,
	 * cores 4-7 2 MiB, 2 threads each): slice = 31457280 / 16 = 1966080 B = 480 pages;
	 * small cores: 1310720 / 2 = 655360 B = 160 pages -> high_max 640;
	 * big cores: 2097152 / 2 = 1048576 B = 256 pages -> high_max 736. */
	c = cache(1310720, 2, 31457280, 16, 3);
	CHECK_EQ(size(c.l2_share_bytes, c.slice_bytes, 0, 16).high_max, 640);
	c = cache(2097152, 2, 31457280, 16, 3);
	CHECK_EQ(size(c.l2_share_bytes, c.slice_bytes, 0, 16).high_max, 736);

	/* No L3 (one 1 MiB L2 shared by 4 cores, the LLC): slice = 1048576 / 4 = 262144 B =
	 * 64 pages, no separate L2 share; high_max = max(64, 252) = 252; 64 <= 189: flag off. */
	c = cache(1048576, 4, 1048576, 4, 2);
	CHECK_EQ(c.l2_share_bytes, 0);
	CHECK_EQ(c.slice_bytes, 262144);
	o = size(c.l2_share_bytes, c.slice_bytes, HIGH_POLICY_CACHE, 4);
	CHECK_EQ(o.high_max, 252);
	CHECK_EQ(o.free_high_batch, 0);

	/* 2-node NUMA (2 sockets x 8 cores, 1 MiB L2 each, 16 MiB L3 per socket): slice =
	 * 16777216 / 8 = 2 MiB = 512 pages; + 256 -> 768; heap policy with 8 CPUs per node:
	 * high_min = max(1286 / 8 = 160, 252) = 252; high_max = 262144 / 8 / 8 = 4096. */
	c = cache(1048576, 1, 16777216, 8, 3);
	CHECK_EQ(size(c.l2_share_bytes, c.slice_bytes, 0, 8).high_max, 768);
	o = size(c.l2_share_bytes, c.slice_bytes, HIGH_POLICY_HEAP, 8);
	CHECK_EQ(o.high_min, 252);
	CHECK_EQ(o.high_max, 4096);

	/* The flag at its edge: 189 slice pages is not > 3 * 63; 190 is. Ice Lake's 0.75 MiB
	 * slice (48 MiB / 64 threads = 786432 B = 192 pages) sets it. */
	CHECK_EQ(size(0, 189 * 4096, 0, 1).free_high_batch, 0);
	CHECK_EQ(size(0, 190 * 4096, 0, 1).free_high_batch, 1);
	CHECK_EQ(size(0, 50331648 / 64, 0, 1).free_high_batch, 1);

	/* Overrides: batch 31 -> high_min 124, threshold 93 pages; explicit high_min/high_max
	 * win; high_max below high_min is raised to it; the flag forced off. */
	struct pcpm_size_in in = { .l2_share_bytes = 0, .slice_bytes = 100 * 4096, .batch = 31,
				   .high_min = -1, .high_max = -1, .free_high_batch = -1,
				   .slice_factor = 3 };
	pcpm_size_pcp(&in, &o);
	CHECK_EQ(o.batch, 31);
	CHECK_EQ(o.high_min, 124);
	CHECK_EQ(o.high_max, 124); /* 100 pages < 4 * 31 */
	CHECK_EQ(o.free_high_batch, 1); /* 100 > 93 */
	in.high_min = 500;
	in.high_max = 300;
	in.free_high_batch = 0;
	pcpm_size_pcp(&in, &o);
	CHECK_EQ(o.high_min, 500);
	CHECK_EQ(o.high_max, 500);
	CHECK_EQ(o.free_high_batch, 0);

	/* Fake machines' CPU counts without hwloc: 2*1*1*56*1*2 = 224. */
	CHECK_EQ(pcpm_fake_cpu_count(NULL, "pack:2 numa:1 l3:1(size=110100480) l2:56(size=2097152) core:1 pu:2"), 224);
	CHECK_EQ(pcpm_fake_cpu_count(NULL, "pack:2 numa:1 l3:8(size=33554432) l2:4(size=524288) core:1 pu:2"), 128);
	CHECK_EQ(pcpm_fake_cpu_count(NULL, "nonsense"), 0);
	/* past the kernel's largest NR_CPUS: saturates (the library refuses such a machine) */
	CHECK_EQ(pcpm_fake_cpu_count(NULL, "pack:1 numa:1 core:1 pu:99999"), PCPM_FAKE_MAX_CPUS + 1);
	CHECK_EQ(pcpm_fake_cpu_count(NULL, "pack:4096 numa:1 core:4096 pu:4096"), PCPM_FAKE_MAX_CPUS + 1);
	CHECK_EQ(pcpm_fake_cpu_count(NULL, "pack:2 core:4096 pu:1"), PCPM_FAKE_MAX_CPUS);
	CHECK_EQ(pcpm_fake_cpu_count(NULL, "pack:99999 core:0 pu:1"), 0);
	CHECK_EQ(pcpm_fake_cpu_count(SRCDIR "/hybrid_l2.xml", NULL), 16);
	printf("sizing: all cases match the hand-worked values\n");
	return 0;
}
