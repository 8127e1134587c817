/*
 * topology.c - provisional cache sizes from sysconf, then lazy discovery of this machine
 * (sysfs, else CPUID: machine.c) or hwloc for a described one (see topology.h).  glibc
 * answers the _SC_LEVEL*_CACHE_SIZE queries from its cpuid data without allocating; hwloc is
 * dlopen'ed only when a described machine or PCPMALLOC_TOPOLOGY=now asks for it.
 */
#define _GNU_SOURCE
#include "topology.h"
#include "arena.h"
#include "config.h"
#include "hwtopo.h"
#include "machine.h"
#include "os.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int pcpm_nr_cpus = 1;
int pcpm_nr_online = 1;
int pcpm_topology_state PCPM_HOT;
char pcpm_topology_why[192];
int pcpm_topology_due PCPM_HOT;
_Atomic unsigned pcpm_topology_gen PCPM_HOT;
static struct pcpm_cpu_cache provisional PCPM_HOT;
static struct pcpm_cpu_cache *cpus PCPM_HOT; /* pcpm_nr_cpus entries once init has run */
static _Atomic int claimed PCPM_HOT;
static _Atomic unsigned long nr_refills PCPM_HOT;
static uint64_t start_ms PCPM_HOT;

/*
 * Discovery starts once the process has done PCPM_TOPO_REFILLS pcp refills and lived
 * PCPM_TOPO_AGE_MS.  A refill moves at least batch (63) pages, 252 KiB, so 64 refills mean
 * 16 MiB or more went through the pcps: a process that busy runs for tens of milliseconds at
 * least, and the few milliseconds of hwloc are a small share of it.  /bin/true, `sh -c :`
 * or a small compiler run do a handful of refills and never load hwloc.  A process that did
 * its refills faster than that is caught by the periodic work (pcpm_topology_tick).
 */
#define PCPM_TOPO_REFILLS 64
#define PCPM_TOPO_AGE_MS 50
/*
 * ... and once its heap is worth the memory: loading hwloc raises the peak RSS by about
 * 1.2 MiB (libhwloc and its libraries mapped, hwloc's own allocations, libc code it runs)
 * and leaves 0.5 MiB behind after dlclose (/proc/PID/status VmHWM / VmRSS of a small
 * process: 2.9 / 2.2 MiB with discovery, 1.7 / 1.7 MiB without).  Below 16 MiB committed
 * that is 8 % or more of the process for sizes a heap that small hardly uses (the
 * provisional ones serve it): a producer/consumer pair of 8-32 KiB blocks (an 8 MiB heap
 * that lives 50-100 ms) peaked at 1.59x glibc's RSS with it, 1.48x without.
 */
#define PCPM_TOPO_HEAP_PAGES ((size_t)16 << (20 - 12))

static inline bool topology_worth(size_t heap_pages)
{
	return atomic_load_explicit(&nr_refills, memory_order_relaxed) >= PCPM_TOPO_REFILLS &&
	       heap_pages >= PCPM_TOPO_HEAP_PAGES && pcpm_now_ms() - start_ms >= PCPM_TOPO_AGE_MS;
}

/* ld.so's debugger interface: r_state is RT_CONSISTENT unless a dlopen/dlclose is changing
 * the link map; discovery (itself a dlopen) waits for that.  Weak: resolved from ld.so. */
extern struct r_debug _r_debug __attribute__((weak));


void pcpm_topology_init(void)
{
	/*
	 * pcp slots: one per CPU id this process may run on (the highest id in its affinity
	 * mask, + 1), not per possible CPU: reading /sys/devices/system/cpu/possible cost
	 * 10-13 us of a 0.8 ms `sh -c :` (sysfs path walk, 3 system calls).  A CPU beyond the
	 * slots (the mask widened later, a CPU brought online) shares slot id % pcpm_nr_cpus
	 * with another CPU (pcp_cpu); every pcp is used under its lock, so that costs only
	 * contention.  The sysfs file is read only when the affinity cannot be had.
	 */
	cpu_set_t set;
	int top = -1;
	/* the system call, not libc's sched_getaffinity: this runs under the init lock, and a
	 * program's wrapper of that function (one that looks its target up with dlsym) would
	 * wait there for the loader's lock, which a thread waiting for the init lock may hold
	 * (issue 26); the kernel writes its mask size in bytes and leaves the rest zero */
	CPU_ZERO(&set);
	if (syscall(SYS_sched_getaffinity, 0, sizeof(set), &set) > 0 && CPU_COUNT(&set) > 0) {
		pcpm_nr_online = CPU_COUNT(&set);
		const int bits = (int)(8 * sizeof(set.__bits[0]));
		for (int w = (int)(sizeof(set.__bits) / sizeof(set.__bits[0])) - 1; w >= 0 && top < 0; w--)
			if (set.__bits[w])
				top = w * bits + bits - 1 - __builtin_clzl(set.__bits[w]);
	}
	if (top >= 0) {
		pcpm_nr_cpus = top + 1;
	} else {
		pcpm_nr_cpus = pcpm_possible_cpus();
		pcpm_nr_online = pcpm_nr_cpus;
	}
	/* A fake machine gets a pcp slot per CPU of its own, so that its sizes can be seen. */
	int fake = pcpm_fake_cpu_count(pcpm_cfg.topology_xml, pcpm_cfg.topology_synthetic);
	if (fake > PCPM_FAKE_MAX_CPUS) {
		pcpm_warn("ignoring %s: a machine of more than %d CPUs; using this machine's",
			  pcpm_cfg.topology_xml ? "PCPMALLOC_TOPOLOGY_XML" : "PCPMALLOC_TOPOLOGY_SYNTHETIC",
			  PCPM_FAKE_MAX_CPUS);
		pcpm_cfg.topology_xml = pcpm_cfg.topology_synthetic = NULL;
		fake = 0;
	}
	if (fake > pcpm_nr_cpus)
		pcpm_nr_cpus = fake;
	pcpm_provisional_cache(&provisional, pcpm_nr_online);
	cpus = pcpm_meta_alloc((size_t)pcpm_nr_cpus * sizeof(*cpus));
	if (cpus)
		for (int i = 0; i < pcpm_nr_cpus; i++)
			cpus[i] = provisional;
	start_ms = pcpm_now_ms();
	if (pcpm_cfg.topology == TOPOLOGY_OFF) {
		atomic_store(&claimed, 1);
		strcpy(pcpm_topology_why, "PCPMALLOC_TOPOLOGY=off");
	} else if (pcpm_cfg.topology == TOPOLOGY_LAZY) {
		strcpy(pcpm_topology_why, "not discovered yet (lazy: after 64 pcp refills, 50 ms "
					  "and a 16 MiB heap)");
	}
	else if (pcpm_cfg.topology == TOPOLOGY_NOW)
		__atomic_store_n(&pcpm_topology_due, 1, __ATOMIC_RELAXED);
}

const struct pcpm_cpu_cache *pcpm_cpu_cache(int cpu)
{
	return cpus && cpu >= 0 && cpu < pcpm_nr_cpus ? &cpus[cpu] : &provisional;
}

void pcpm_topology_note_refill(size_t heap_pages)
{
	if (atomic_load_explicit(&claimed, memory_order_relaxed) ||
	    __atomic_load_n(&pcpm_topology_due, __ATOMIC_RELAXED))
		return;
	atomic_fetch_add_explicit(&nr_refills, 1, memory_order_relaxed);
	if (topology_worth(heap_pages))
		__atomic_store_n(&pcpm_topology_due, 1, __ATOMIC_RELAXED);
}

void pcpm_topology_tick(size_t heap_pages)
{
	if (!atomic_load_explicit(&claimed, memory_order_relaxed) && topology_worth(heap_pages))
		__atomic_store_n(&pcpm_topology_due, 1, __ATOMIC_RELAXED);
}

static void failed(const char *why, const char *detail)
{
	pcpm_topology_state = TOPO_FAILED;
	pcpm_topology_why[0] = '\0';
	strncat(pcpm_topology_why, why, sizeof(pcpm_topology_why) - 1);
	/* a machine described by PCPMALLOC_TOPOLOGY_XML/_SYNTHETIC was asked for: say so */
	if (pcpm_cfg.verbose || pcpm_cfg.topology_xml || pcpm_cfg.topology_synthetic)
		pcpm_warn("topology: %s%s%s; keeping the provisional pcp sizes", why,
			  detail ? ": " : "", detail ? detail : "");
}

#define LOAD(field, name)                                          \
	do {                                                       \
		*(void **)&f.field = dlsym(h, name);               \
		if (!f.field) {                                    \
			failed("libhwloc lacks " name, NULL);      \
			return;                                    \
		}                                                  \
	} while (0)

static void discover_with(void *h, uint64_t t0);

/*
 * Loads hwloc, walks the machine, and unloads hwloc again: the sizes are all the library is
 * needed for, and its text with that of libm and libudev (about 0.7 MiB of RSS) would
 * otherwise stay mapped for the rest of the process.
 */
static void discover(void)
{
	const char *lib = pcpm_cfg.topology_lib ? pcpm_cfg.topology_lib : "libhwloc.so.15";
	uint64_t t0 = pcpm_now_ns();
	void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		failed("cannot load hwloc", dlerror());
		return;
	}
	discover_with(h, t0);
	dlclose(h);
}

static void discover_with(void *h, uint64_t t0)
{
	struct pcpm_hwloc_fns f;
	LOAD(get_api_version, "hwloc_get_api_version");
	LOAD(topology_init, "hwloc_topology_init");
	LOAD(topology_set_xml, "hwloc_topology_set_xml");
	LOAD(topology_set_synthetic, "hwloc_topology_set_synthetic");
	LOAD(topology_load, "hwloc_topology_load");
	LOAD(topology_destroy, "hwloc_topology_destroy");
	LOAD(get_type_depth, "hwloc_get_type_depth");
	LOAD(get_nbobjs_by_depth, "hwloc_get_nbobjs_by_depth");
	LOAD(get_obj_by_depth, "hwloc_get_obj_by_depth");
	LOAD(bitmap_weight, "hwloc_bitmap_weight");
	LOAD(bitmap_isset, "hwloc_bitmap_isset");
	size_t len = ALIGN_UP((size_t)pcpm_nr_cpus * sizeof(*cpus), PAGE_SIZE);
	struct pcpm_cpu_cache *tmp = pcpm_os_map(len, PAGE_SIZE);
	if (!tmp || !cpus) {
		failed("out of memory", NULL);
		return;
	}
	memcpy(tmp, cpus, (size_t)pcpm_nr_cpus * sizeof(*cpus));
	const char *why = NULL;
	int npu = pcpm_hwloc_walk(&f, pcpm_cfg.topology_xml,
				  pcpm_cfg.topology_xml ? NULL : pcpm_cfg.topology_synthetic, tmp,
				  pcpm_nr_cpus, &why);
	if (npu < 0) {
		failed(why, NULL);
		pcpm_os_unmap(tmp, len);
		return;
	}
	memcpy(cpus, tmp, (size_t)pcpm_nr_cpus * sizeof(*cpus));
	pcpm_os_unmap(tmp, len);
	pcpm_topology_state = TOPO_HWLOC;
	pcpm_topology_why[0] = '\0';
	if (pcpm_cfg.verbose) {
		const struct pcpm_cpu_cache *c = &cpus[0];
		pcpm_warn("topology: hwloc found %d CPUs in %llu us (dlopen included); cpu 0: L2 %zu KiB / %d, LLC %zu "
			  "KiB / %d (slice %zu KiB)",
			  npu, (unsigned long long)((pcpm_now_ns() - t0) / 1000), c->l2_bytes >> 10,
			  c->l2_shared, c->llc_bytes >> 10, c->llc_shared, c->slice_bytes >> 10);
	}
	/* published: the pcp layer pulls the new sizes and nodes at its next allocation */
	atomic_fetch_add_explicit(&pcpm_topology_gen, 1, memory_order_release);
}

/*
 * Lazy discovery of this machine, in the calling thread: sysfs cacheinfo, else CPUID, else
 * the provisional sizes stay, with the reason (machine.c).  The entries are built in a
 * private mapping (with the walk's scratch after them) and copied in whole.
 */
static void discover_machine(void)
{
	uint64_t t0 = pcpm_now_ns();
	size_t bytes = ALIGN_UP((size_t)pcpm_nr_cpus * sizeof(*cpus), 64);
	size_t len = ALIGN_UP(bytes + sizeof(struct pcpm_machine_scratch), PAGE_SIZE);
	struct pcpm_cpu_cache *tmp = cpus ? pcpm_os_map(len, PAGE_SIZE) : NULL;
	if (!tmp) {
		strcpy(pcpm_topology_why, "out of memory for discovery");
		return;
	}
	struct pcpm_machine_scratch *scratch = (void *)((char *)tmp + bytes);
	memcpy(tmp, cpus, (size_t)pcpm_nr_cpus * sizeof(*cpus));
	const struct pcpm_machine_src src = { pcpm_cfg.sysfs_root, pcpm_cfg.cpuid != 0, NULL };
	int state = pcpm_machine_walk(tmp, pcpm_nr_cpus, pcpm_nr_online, &src, scratch);
	_Static_assert(sizeof(scratch->why) == sizeof(pcpm_topology_why), "one reason size");
	memcpy(pcpm_topology_why, scratch->why, sizeof(pcpm_topology_why));
	if (state != TOPO_PROVISIONAL)
		memcpy(cpus, tmp, (size_t)pcpm_nr_cpus * sizeof(*cpus));
	pcpm_os_unmap(tmp, len);
	if (state == TOPO_PROVISIONAL) {
		if (pcpm_cfg.verbose)
			pcpm_warn("topology: keeping the provisional pcp sizes (%s)", pcpm_topology_why);
		return;
	}
	pcpm_topology_state = state;
	if (pcpm_cfg.verbose) {
		const struct pcpm_cpu_cache *c = &cpus[0];
		const char *why = pcpm_topology_why;
		pcpm_warn("topology: %s in %llu us%s%s%s; cpu 0: L2 %zu KiB / %d, LLC %zu KiB / %d "
			  "(slice %zu KiB)",
			  pcpm_topology_source_name(state),
			  (unsigned long long)((pcpm_now_ns() - t0) / 1000), why[0] ? " (" : "", why,
			  why[0] ? ")" : "", c->l2_bytes >> 10, c->l2_shared, c->llc_bytes >> 10,
			  c->llc_shared, c->slice_bytes >> 10);
	}
	atomic_fetch_add_explicit(&pcpm_topology_gen, 1, memory_order_release);
}

void pcpm_topology_discover(void)
{
	if (!__atomic_load_n(&pcpm_topology_due, __ATOMIC_RELAXED))
		return;
	int z = 0;
	if (!atomic_compare_exchange_strong(&claimed, &z, 1))
		return;
	/* hwloc only (a dlopen): not while the dynamic loader is changing the link map (malloc
	 * called from ld.so) */
	bool hwloc = pcpm_cfg.topology == TOPOLOGY_NOW || pcpm_cfg.topology_xml ||
		     pcpm_cfg.topology_synthetic;
	if (hwloc && &_r_debug && _r_debug.r_state != RT_CONSISTENT) {
		atomic_store(&claimed, 0);
		return;
	}
	/* From here on the hwloc calls that allocate re-enter malloc, which finds due == 0. */
	__atomic_store_n(&pcpm_topology_due, 0, __ATOMIC_RELAXED);
	int e = errno;
	/* PCPMALLOC_TOPOLOGY=now (tests, measurements) or a described machine: hwloc, right
	 * here; this machine, lazily: sysfs or CPUID, right here too (no thread either way) */
	if (hwloc)
		discover();
	else
		discover_machine();
	errno = e;
}
