/*
 * pcpmalloc-topology - prints, for this machine or a described one, every CPU's place
 * (package, core, NUMA node), its caches and the pcp sizes pcpmalloc gives it.
 *
 *   pcpmalloc-topology [--xml FILE | --synthetic "DESC" | --library] [--json]
 *
 * The same walks (hwtopo.c; with --library, machine.c: sysfs, CPUID or the provisional
 * sizes, as the library's lazy discovery) and the same formula (sizing.c) as the library; the
 * PCPMALLOC_ variables that change the sizing (BATCH, HIGH_MIN, HIGH_MAX, CACHE_SLICE,
 * HIGH_POLICY, FREE_HIGH_BATCH, SLICE_FACTOR) and those of lazy discovery (SYSFS_ROOT, CPUID)
 * are honoured as the library does.  Every run also says which source the library's lazy
 * discovery would use here, and why not the ones before it.
 */
#define _GNU_SOURCE
#include "hwtopo.h"
#include "machine.h"
#include "sizing.h"
#include "topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>

static int env_int(const char *name, int deflt)
{
	const char *v = getenv(name);
	if (!v || !*v || strcmp(v, "auto") == 0)
		return deflt;
	char *end;
	long x = strtol(v, &end, 0);
	if (end == v || *end) {
		fprintf(stderr, "pcpmalloc-topology: ignoring %s=%s: not an integer; using the default\n",
			name, v);
		return deflt;
	}
	return (int)x;
}

static void usage(const char *argv0, int status)
{
	fprintf(status ? stderr : stdout,
		"usage: %s [--xml FILE | --synthetic DESC | --library] [--json]\n"
		"Prints, per CPU of this machine (or of the described one), its caches and the pcp\n"
		"sizes pcpmalloc derives from them, read with hwloc, or with --library as the\n"
		"library's lazy discovery reads them (sysfs, else CPUID, else the provisional sizes;\n"
		"PCPMALLOC_SYSFS_ROOT and PCPMALLOC_CPUID apply); PCPMALLOC_CACHE_SLICE, _BATCH, _HIGH_MIN,\n"
		"_HIGH_MAX, _FREE_HIGH_BATCH, _SLICE_FACTOR and _HIGH_POLICY apply as in the library\n"
		"(the slice column stays the machine's, as in the library's JSON statistics; an\n"
		"override changes the sizes computed from it).\n",
		argv0);
	exit(status);
}

int main(int argc, char **argv)
{
	const char *xml = NULL, *synth = NULL;
	int json = 0, library = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--xml") == 0 && i + 1 < argc)
			xml = argv[++i];
		else if (strcmp(argv[i], "--synthetic") == 0 && i + 1 < argc)
			synth = argv[++i];
		else if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--library") == 0)
			library = 1;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage(argv[0], 0);
		else
			usage(argv[0], 2);
	}
	const struct pcpm_hwloc_fns f = {
		hwloc_get_api_version, hwloc_topology_init,	 hwloc_topology_set_xml,
		hwloc_topology_set_synthetic, hwloc_topology_load, hwloc_topology_destroy,
		hwloc_get_type_depth,	    hwloc_get_nbobjs_by_depth, hwloc_get_obj_by_depth,
		hwloc_bitmap_weight,	    hwloc_bitmap_isset,
	};
	/* Room for every PU os_index: a fake machine's count, else the configured CPUs. */
	int n = pcpm_fake_cpu_count(xml, synth);
	if (n > PCPM_FAKE_MAX_CPUS) {
		fprintf(stderr, "pcpmalloc-topology: a machine of more than %d CPUs is not supported\n",
			PCPM_FAKE_MAX_CPUS);
		return 2;
	}
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	if (n < conf)
		n = (int)conf;
	if (n < 1)
		n = 1;
	n *= 2; /* os_index may have holes */
	struct pcpm_cpu_cache *cpus = calloc((size_t)n, sizeof(*cpus));
	char *seen = calloc((size_t)n, 1);
	/* What the library's lazy discovery reads on this machine (and with --library, shows). */
	struct pcpm_cpu_cache *lib = calloc((size_t)n, sizeof(*lib));
	struct pcpm_machine_scratch *scratch = calloc(1, sizeof(*scratch));
	cpu_set_t set;
	int online = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : (int)conf;
	for (int i = 0; i < n; i++) {
		pcpm_provisional_cache(&lib[i], online);
		lib[i].llc_bytes = (size_t)-1; /* marks "no CPU here" */
	}
	const char *cpuid_env = getenv("PCPMALLOC_CPUID");
	struct pcpm_machine_src src = { getenv("PCPMALLOC_SYSFS_ROOT"),
					!cpuid_env || strcmp(cpuid_env, "0") != 0, NULL };
	int lib_src = pcpm_machine_walk(lib, n, online, &src, scratch);
	const char *lib_why = scratch->why;
	const char *why = NULL;
	if (library) {
		if (lib_src == TOPO_PROVISIONAL) /* the provisional sizes, for the CPUs it may use */
			for (int i = 0; i < n; i++)
				if (CPU_ISSET(i, &set))
					pcpm_provisional_cache(&lib[i], online);
		memcpy(cpus, lib, (size_t)n * sizeof(*cpus));
	} else {
		for (int i = 0; i < n; i++)
			cpus[i].llc_bytes = (size_t)-1;
		if (pcpm_hwloc_walk(&f, xml, xml ? NULL : synth, cpus, n, &why) < 0) {
			fprintf(stderr, "pcpmalloc-topology: %s\n", why);
			return 1;
		}
	}
	for (int i = 0; i < n; i++)
		seen[i] = cpus[i].llc_bytes != (size_t)-1;

	int policy = HIGH_POLICY_CACHE;
	const char *pol = getenv("PCPMALLOC_HIGH_POLICY");
	if (pol && strcmp(pol, "heap") == 0)
		policy = HIGH_POLICY_HEAP;
	int slice_override = env_int("PCPMALLOC_CACHE_SLICE", -1);
	struct pcpm_size_in in = {
		.heap_pages = PCPM_SIZING_FLOOR_PAGES,
		.policy = policy,
		.batch = env_int("PCPMALLOC_BATCH", -1),
		.high_min = env_int("PCPMALLOC_HIGH_MIN", -1),
		.high_max = env_int("PCPMALLOC_HIGH_MAX", -1),
		.free_high_batch = env_int("PCPMALLOC_FREE_HIGH_BATCH", -1),
		.slice_factor = env_int("PCPMALLOC_SLICE_FACTOR", 3),
	};

	int packages = 0, nodes = 0, cores = 0, fhb = 0, shown = 0;
	long hmax_lo = -1, hmax_hi = -1;
	if (json)
		printf("{\"cpus\": [");
	else
		printf("%4s %4s %5s %4s %12s %14s %10s %5s %8s %8s %s\n", "cpu", "pkg", "core", "node",
		       "l2/sharing", "llc/sharing", "slice", "batch", "high_min", "high_max",
		       "free_high_batch");
	for (int i = 0; i < n; i++) {
		if (!seen[i])
			continue;
		struct pcpm_cpu_cache *c = &cpus[i];
		in.l2_share_bytes = c->l2_share_bytes;
		in.slice_bytes = slice_override > 0 ? (size_t)slice_override : c->slice_bytes;
		in.split = c->node_cpus;
		struct pcpm_size_out o;
		pcpm_size_pcp(&in, &o);
		if (json)
			printf("%s\n  {\"cpu\": %d, \"package\": %d, \"core\": %d, \"node\": %d, "
			       "\"l2_bytes\": %zu, \"llc_bytes\": %zu, \"slice_bytes\": %zu, "
			       "\"batch\": %d, \"high_min\": %d, \"high_max\": %d, "
			       "\"free_high_batch\": %s}",
			       shown ? "," : "", i, c->package, c->core, c->node, c->l2_bytes,
			       c->llc_bytes, c->slice_bytes, o.batch, o.high_min, o.high_max,
			       o.free_high_batch ? "true" : "false");
		else
			printf("%4d %4d %5d %4d %7zuKiB/%-2d %8zuKiB/%-3d %7zuKiB %5d %8d %8d %s\n", i,
			       c->package, c->core, c->node, c->l2_bytes >> 10, c->l2_shared,
			       c->llc_bytes >> 10, c->llc_shared, c->slice_bytes >> 10, o.batch,
			       o.high_min, o.high_max,
			       o.free_high_batch ? "yes" : "no");
		shown++;
		packages = c->package + 1 > packages ? c->package + 1 : packages;
		nodes = c->node + 1 > nodes ? c->node + 1 : nodes;
		cores = c->core + 1 > cores ? c->core + 1 : cores;
		fhb += o.free_high_batch;
		if (hmax_lo < 0 || o.high_max < hmax_lo)
			hmax_lo = o.high_max;
		if (o.high_max > hmax_hi)
			hmax_hi = o.high_max;
	}
	if (json) {
		printf("\n], \"summary\": {\"cpus\": %d, \"cores\": %d, \"packages\": %d, \"nodes\": %d, "
		       "\"high_max_min\": %ld, \"high_max_max\": %ld, \"free_high_batch_cpus\": %d, "
		       "\"source\": \"%s\", \"library_source\": \"%s\", \"library_why\": \"",
		       shown, cores, packages, nodes, hmax_lo, hmax_hi, fhb,
		       library ? pcpm_topology_source_name(lib_src) : "hwloc",
		       pcpm_topology_source_name(lib_src));
		for (const char *w = lib_why; *w; w++)
			printf("%s%c", *w == '"' || *w == '\\' ? "\\" : "", *w);
		printf("\"}}\n");
	} else {
		printf("%d CPU%s, %d core%s, %d package%s, %d NUMA node%s; high_max %ld..%ld pages "
		       "(%.1f..%.1f MiB); free_high_batch on %d of %d CPUs; policy %s\n",
		       shown, shown == 1 ? "" : "s", cores, cores == 1 ? "" : "s", packages,
		       packages == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s", hmax_lo, hmax_hi,
		       hmax_lo * 4096.0 / 1048576,
		       hmax_hi * 4096.0 / 1048576, fhb, shown, policy ? "heap" : "cache");
		printf("read with %s; the library's lazy discovery reads %s here%s%s%s\n",
		       library ? pcpm_topology_source_name(lib_src) : "hwloc",
		       pcpm_topology_source_name(lib_src), lib_why[0] ? " (" : "", lib_why,
		       lib_why[0] ? ")" : "");
	}
	free(cpus);
	free(seen);
	free(lib);
	free(scratch);
	return 0;
}
