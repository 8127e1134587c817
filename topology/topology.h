/*
 * topology.h - CPUs and their cache slices, which size every pcp (kernel-pcp.md §6, and
 * "pcpmalloc's choices": high_max = the pages of the CPU's L2 share + LLC slice).
 *
 * Two sources.  At start, provisional values from sysconf(_SC_LEVEL2_CACHE_SIZE /
 * _SC_LEVEL3_CACHE_SIZE) and the CPU count: cheap enough for any process.  Later, once the
 * process has done enough allocator work (PCPMALLOC_TOPOLOGY=lazy), the kernel's cacheinfo in
 * sysfs replaces them, or CPUID where the kernel exports none (machine.c; when neither
 * answers they stay, with the reason in pcpm_topology_why)
 * (pcpm_topology_maybe_discover, from the malloc slow path, with no
 * allocator lock held; plain system calls, so no thread and no library: an allocator must
 * start no thread the program did not ask for, and a dlopen inside the caller's malloc could
 * deadlock on the caller's own locks).  hwloc (dlopen'ed) reads described machines.  Topology only produces sizes:
 * it publishes them by raising pcpm_topology_gen, and the pcp layer pulls them (pageset
 * sizes, one zone per NUMA node) at its next allocation, as the kernel's page allocator does
 * not know who sized it.  PCPMALLOC_TOPOLOGY_XML / _SYNTHETIC load a fake machine.
 * Thread-safety: pcpm_topology_init() runs once during allocator init; discovery runs once
 * (an atomic claim) and publishes each CPU's entry before the pcps are resized.
 */
#ifndef PCPM_TOPOLOGY_H
#define PCPM_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>

struct pcpm_cpu_cache {
	int package, core, node; /* logical indexes; -1 when unknown */
	size_t l2_bytes;	 /* this CPU's L2 (bytes; 0 when none) */
	int l2_shared;		 /* CPUs sharing that L2 */
	size_t llc_bytes;	 /* its last-level data/unified cache (bytes) */
	int llc_shared;		 /* CPUs sharing that LLC */
	int llc_level;		 /* 2, 3, ... */
	size_t slice_bytes;	 /* per_cpu_data_slice_size: llc_bytes / llc_shared */
	size_t l2_share_bytes;	 /* l2_bytes / l2_shared, or 0 when the L2 is the LLC */
	int node_cpus;		 /* CPUs on its NUMA node */
	int node_os;		 /* the kernel's number of that node (mbind); -1 when unknown */
};

/* pcp slots (the highest CPU id of the affinity mask at start-up, + 1; the possible CPUs
 * when the mask cannot be read) and the CPUs this process may run on. */
extern int pcpm_nr_cpus;
extern int pcpm_nr_online;
/* Where the sizes in force come from (pcpm_topology_state). */
enum {
	TOPO_FAILED = -1,     /* hwloc could not read the described machine: provisional sizes */
	TOPO_PROVISIONAL = 0, /* sysconf at start; lazy discovery not run or found nothing */
	TOPO_HWLOC = 1,	      /* a described machine, or PCPMALLOC_TOPOLOGY=now */
	TOPO_SYSFS = 2,	      /* lazy discovery: the kernel's cacheinfo */
	TOPO_CPUID = 3,	      /* lazy discovery: CPUID, sysfs having no cacheinfo */
};
extern int pcpm_topology_state;
/* Why the sources before the one in force gave nothing ("" when there is nothing to say);
 * written once by discovery before the state changes. */
extern char pcpm_topology_why[192];

/* "provisional", "hwloc", "sysfs", "cpuid" or "failed" for a TOPO_* state. */
const char *pcpm_topology_source_name(int state);

/* The start-up sizes of every CPU (sysconf's L2 and L3, the L3 shared by nr_online CPUs). */
void pcpm_provisional_cache(struct pcpm_cpu_cache *c, int nr_online);
/* Raised (release) each time new sizes are published; the pcp layer compares it with the
 * generation it last pulled. */
extern _Atomic unsigned pcpm_topology_gen;

void pcpm_topology_init(void);

/* Cache of one CPU (cpu < pcpm_nr_cpus). */
const struct pcpm_cpu_cache *pcpm_cpu_cache(int cpu);

/* Fills in l2_share_bytes and slice_bytes from the sizes and sharing counts. */
void pcpm_cpu_cache_derive(struct pcpm_cpu_cache *c);

/* Called on every pcp refill (slow path) with the pages the zone manages (its committed
 * heap): counts the refills and marks discovery due. */
void pcpm_topology_note_refill(size_t heap_pages);
/* From the periodic work: marks discovery due when the refills were done early. */
void pcpm_topology_tick(size_t heap_pages);

/* From the malloc slow path, no lock held: discovery once when it is due, in the calling
 * thread and without starting any: this machine from sysfs (lazy), hwloc for a described
 * machine or PCPMALLOC_TOPOLOGY=now. */
extern int pcpm_topology_due;
void pcpm_topology_discover(void);
static inline void pcpm_topology_maybe_discover(void)
{
	if (__builtin_expect(__atomic_load_n(&pcpm_topology_due, __ATOMIC_RELAXED), 0))
		pcpm_topology_discover();
}

/*
 * hwloc walk shared by the library (functions from dlsym) and the tool (linked): fills
 * cpus[0..ncpus) by PU os_index, returns the number of PUs found or -1 with *why set.
 * src_xml / src_synthetic select a fake machine (NULL: this machine).
 */
struct pcpm_hwloc_fns;
int pcpm_hwloc_walk(const struct pcpm_hwloc_fns *f, const char *src_xml, const char *src_synthetic,
		    struct pcpm_cpu_cache *cpus, int ncpus, const char **why);

/* The buffers of a sysfs or /proc walk, the caller's (a mapping in the library: a
 * discovery on a PTHREAD_STACK_MIN thread must not put them on its stack). */
struct pcpm_sysfs_buf {
	char path[512];	 /* a root of up to ~400 characters, then the path below it */
	char line[4096]; /* a file's contents (cpu lists can be long) */
	char list[4096]; /* a list read while line takes each of its entries */
};

/* This machine's caches from sysfs cacheinfo under root ("/sys" or a test's folder;
 * sysfs.c: raw system calls, no cancellation point, no allocation, io for every buffer):
 * fills the cpus[0..ncpus) it finds (the others keep their entries) and returns how many
 * (0: no cacheinfo).  Thread-safe (writes only its arguments). */
int pcpm_sysfs_walk(struct pcpm_cpu_cache *cpus, int ncpus, const char *root,
		    struct pcpm_sysfs_buf *io);
/* The NUMA nodes of root's node lists into cpus[] (node, node_os, node_cpus): how many nodes
 * with CPUs, 0 when there are no lists (entries unchanged). */
int pcpm_sysfs_nodes(struct pcpm_cpu_cache *cpus, int ncpus, const char *root,
		     struct pcpm_sysfs_buf *io);

/* CPUs of a fake machine without loading hwloc: product of a synthetic description's
 * arities, or the PU objects of an XML file; 0 when unknown. */
int pcpm_fake_cpu_count(const char *xml, const char *synthetic);

#endif
