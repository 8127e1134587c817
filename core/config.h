/*
 * config.h - every PCPMALLOC_* tunable, read once from the environment at initialisation.
 *
 * One table (config.c) gives name, type, default, range and meaning; the README prints the
 * same table.  A malformed value prints one warning line and the default is used.
 * Thread-safety: written only by pcpm_config_init() before any other thread can allocate;
 * read-only afterwards.  Kernel analogues are listed in kernel-pcp.md §12.9.
 */
#ifndef PCPM_CONFIG_H
#define PCPM_CONFIG_H

#include "os.h"

#include <stddef.h>

enum { STATS_OFF = 0, STATS_TEXT = 1, STATS_JSON = 2 };
enum { DECAY_MAINLINE = 0, DECAY_COUNT_MIN = 1 };
enum { CPU_RSEQ = 0, CPU_GETCPU = 1, CPU_TID = 2 };
enum { NUMA_BIND_PREFERRED = 0, NUMA_BIND_STRICT = 1, NUMA_BIND_OFF = 2 };
enum { TOPOLOGY_LAZY = 0, TOPOLOGY_NOW = 1, TOPOLOGY_OFF = 2 };
enum { AUTO = -1 };

struct pcpm_config {
	int stats;		/* PCPMALLOC_STATS: off | 1 (text) | json */
	const char *stats_file; /* PCPMALLOC_STATS_FILE: path, %p -> pid; NULL = stderr */
	int verbose;		/* PCPMALLOC_VERBOSE */
	int batch;		/* PCPMALLOC_BATCH: pages, AUTO = zone_batchsize() */
	int high_min;		/* PCPMALLOC_HIGH_MIN: pages, AUTO = 4 * batch */
	int high_max;		/* PCPMALLOC_HIGH_MAX: pages, AUTO = cache slice */
	int batch_scale_max;	/* PCPMALLOC_BATCH_SCALE_MAX: CONFIG_PCP_BATCH_SCALE_MAX (5) */
	int alloc_scale;	/* PCPMALLOC_ALLOC_SCALE: alloc_factor on/off */
	int free_high;		/* PCPMALLOC_FREE_HIGH: free_high drains on/off */
	int free_high_batch;	/* PCPMALLOC_FREE_HIGH_BATCH: AUTO | 0 | 1 (PCPF_FREE_HIGH_BATCH) */
	int free_high_thresh;	/* PCPMALLOC_FREE_HIGH_THRESH: pages, AUTO = batch + high_min/2 */
	int slice_factor;	/* PCPMALLOC_SLICE_FACTOR: slice > factor * batch sets the flag */
	int sheaves;		/* PCPMALLOC_SHEAVES: per-CPU sheaves and barns on/off */
	int sheaf_kb;		/* PCPMALLOC_SHEAF_KB: bytes of objects per sheaf (KiB), AUTO */
	int fbatch;		/* PCPMALLOC_FBATCH: objects per thread-cache refill/flush, AUTO */
	int decay_ms;		/* PCPMALLOC_DECAY_MS: decay_pcp_high / purge period */
	int decay_shift;	/* PCPMALLOC_DECAY_SHIFT: high -= high >> shift per period */
	int decay_mode;		/* PCPMALLOC_DECAY_MODE: mainline | count_min */
	int count_min_div;	/* PCPMALLOC_COUNT_MIN_DIV: count_min mode decays min(count_min, high/div) */
	int tcache;		/* PCPMALLOC_TCACHE: per-thread caches on/off */
	int tcache_grow_kb;	/* PCPMALLOC_TCACHE_GROW_KB: growth of a thread's stacks, KiB */
	int secure;		/* PCPMALLOC_SECURE: hardened mode (secure.h) */
	int secure_far_guard;	/* PCPMALLOC_SECURE_FAR_GUARD: the zone's far guards (zone.h) */
	int secure_zero;	/* PCPMALLOC_SECURE_ZERO: zero on free, write-after-free check */
	int secure_canary;	/* PCPMALLOC_SECURE_CANARY: small blocks' canaries, neighbours */
	int secure_quarantine;	/* PCPMALLOC_SECURE_QUARANTINE: freed slots and runs wait */
	int junk;		/* PCPMALLOC_JUNK: junk-filled blocks (junk_mode.c) */
	int decay_thread;	/* PCPMALLOC_DECAY_THREAD: background decay/purge worker */
	int live;		/* PCPMALLOC_LIVE: publish the live statistics page (live.h) */
	int dirty_pct;		/* PCPMALLOC_DIRTY_PCT: dirty free pages allowed, % of pages in use */
	int dirty_min_mb;	/* PCPMALLOC_DIRTY_MIN_MB: ... but always this many MiB */
	int arena_reserve_gb;	/* PCPMALLOC_ARENA_RESERVE_GB: VA reserved per arena */
	int arena_chunk_mb;	/* PCPMALLOC_ARENA_CHUNK_MB: zone growth step */
	int cpu_source;		/* PCPMALLOC_CPU_SOURCE: rseq | getcpu | tid */
	int cache_slice;	/* PCPMALLOC_CACHE_SLICE: bytes for every CPU, AUTO = topology */
	int high_policy;	/* PCPMALLOC_HIGH_POLICY: cache | heap (HIGH_POLICY_*) */
	int topology;		/* PCPMALLOC_TOPOLOGY: lazy | now | off */
	const char *topology_xml;	/* PCPMALLOC_TOPOLOGY_XML: hwloc XML file of a fake machine */
	const char *topology_synthetic; /* PCPMALLOC_TOPOLOGY_SYNTHETIC: hwloc synthetic description */
	const char *topology_lib;	/* PCPMALLOC_TOPOLOGY_LIB: hwloc library dlopen'ed */
	const char *sysfs_root;		/* PCPMALLOC_SYSFS_ROOT: read in place of /sys; NULL = /sys */
	int cpuid;		/* PCPMALLOC_CPUID: CPUID caches when sysfs has none (0 | 1) */
	int numa_bind;		/* PCPMALLOC_NUMA_BIND: preferred | bind | off (NUMA_BIND_*) */
	int valgrind;		/* PCPMALLOC_VALGRIND: AUTO (memcheck detected) | 0 | 1 */
	int prof;		/* PCPMALLOC_PROF: the sampled heap profiler (prof_mode.c) */
	int prof_sample;	/* PCPMALLOC_PROF_SAMPLE: mean bytes between samples */
	const char *prof_prefix; /* PCPMALLOC_PROF_PREFIX: dump file names' start, %p -> pid */
	int prof_signal;	/* PCPMALLOC_PROF_SIGNAL: signal number that dumps, 0 = none */
	int prof_final;		/* PCPMALLOC_PROF_FINAL: a dump at exit */
	int prof_interval;	/* PCPMALLOC_PROF_INTERVAL: a dump every so many bytes allocated */
	int leaks;		/* PCPMALLOC_LEAKS: the leak report at exit (profiling on) */
};

extern struct pcpm_config pcpm_cfg;

/* Reads the environment; prints one warning per malformed value. Never allocates. */
void pcpm_config_init(void);

/*
 * Appends to buf (len bytes, from offset n) one line per tunable: "pcpmalloc:   NAME VALUE
 * (default | env | env 'TEXT' rejected: default)"; returns the new offset (pcpm_bappend).
 */
size_t pcpm_config_describe(char *buf, size_t len, size_t n);

/*
 * A decision worth knowing under PCPMALLOC_VERBOSE=1 (topology found, decay thread started,
 * purge or mapping failures): one "pcpmalloc: ..." line on stderr, at most 8 per call site so
 * that a failure repeated in a loop cannot flood the output.  Costs one load and a branch
 * when VERBOSE is off; never allocates.
 */
#define pcpm_verbose(...)                                                                          \
	do {                                                                                       \
		static _Atomic unsigned pcpm_verbose_n_;                                          \
		if (unlikely(pcpm_cfg.verbose) &&                                                  \
		    atomic_fetch_add_explicit(&pcpm_verbose_n_, 1, memory_order_relaxed) < 8)      \
			pcpm_warn(__VA_ARGS__);                                                    \
	} while (0)

/* The table, for documentation tools: name, default as text, meaning. */
struct pcpm_tunable_doc {
	const char *name, *deflt, *range, *meaning;
};
const struct pcpm_tunable_doc *pcpm_tunable_docs(size_t *n);

#endif
