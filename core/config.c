/*
 * config.c - the PCPMALLOC_* table (see config.h).  Defaults reproduce the newest mainline
 * kernel behaviour (kernel-pcp.md "pcpmalloc's choices" and §12.9).  A leaf: calls os.c only.
 */
#include "config.h"
#include "os.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

struct pcpm_config pcpm_cfg PCPM_HOT;

enum type { T_INT, T_ENUM, T_STR };

struct tunable {
	const char *name;
	enum type type;
	int *ival;
	const char **sval;
	int deflt, min, max;
	const char *names; /* T_ENUM: "a|b|c" (value = index); "auto" maps to AUTO */
	const char *meaning;
};

#define I(f) &pcpm_cfg.f, NULL
static const struct tunable table[] = {
	{ "PCPMALLOC_STATS", T_ENUM, I(stats), 0, 0, 2, "0|1|json",
	  "print counters at exit: 1 = text on stderr, json = one JSON object" },
	{ "PCPMALLOC_STATS_FILE", T_STR, NULL, &pcpm_cfg.stats_file, 0, 0, 0, NULL,
	  "where PCPMALLOC_STATS goes (%p = pid); stderr when unset" },
	{ "PCPMALLOC_VERBOSE", T_INT, I(verbose), 0, 0, 1, NULL,
	  "1: print the configuration in force at start-up and each decision worth knowing on stderr" },
	{ "PCPMALLOC_BATCH", T_INT, I(batch), AUTO, 1, 1023, NULL,
	  "pcp batch in pages (zone_batchsize on a 1 GiB floor: 63)" },
	{ "PCPMALLOC_HIGH_MIN", T_INT, I(high_min), AUTO, 1, 1 << 20, NULL,
	  "pcp high_min in pages (default 4 * batch)" },
	{ "PCPMALLOC_HIGH_MAX", T_INT, I(high_max), AUTO, 1, 1 << 22, NULL,
	  "pcp high_max in pages (default: the CPU's cache slice, >= 4 * batch; never below high_min)" },
	{ "PCPMALLOC_BATCH_SCALE_MAX", T_INT, I(batch_scale_max), 5, 0, 6, NULL,
	  "CONFIG_PCP_BATCH_SCALE_MAX: refill/drain at most batch << this" },
	{ "PCPMALLOC_ALLOC_SCALE", T_INT, I(alloc_scale), 1, 0, 1, NULL,
	  "alloc_factor: grow order-0 refills during long allocation runs" },
	{ "PCPMALLOC_FREE_HIGH", T_INT, I(free_high), 1, 0, 1, NULL,
	  "free_high: drain order 1..3 pages when a CPU mostly frees" },
	{ "PCPMALLOC_FREE_HIGH_BATCH", T_ENUM, I(free_high_batch), AUTO, -1, 1, "0|1",
	  "PCPF_FREE_HIGH_BATCH: keep batch pages before a free_high drain (auto: slice > 3*batch)" },
	{ "PCPMALLOC_FREE_HIGH_THRESH", T_INT, I(free_high_thresh), AUTO, 0, 1 << 20, NULL,
	  "free_count threshold for free_high in pages (default batch + high_min/2)" },
	{ "PCPMALLOC_SLICE_FACTOR", T_INT, I(slice_factor), 3, 1, 64, NULL,
	  "PCPF_FREE_HIGH_BATCH is set when slice > factor * batch pages" },
	{ "PCPMALLOC_FBATCH", T_INT, I(fbatch), AUTO, 1, 255, NULL,
	  "objects per thread-cache refill/flush (pagevec: 15, or 31 above 64 CPUs)" },
	{ "PCPMALLOC_SHEAVES", T_INT, I(sheaves), 1, 0, 1, NULL,
	  "per-CPU sheaves of free objects between the thread caches and the slabs (+ per-node barns)" },
	{ "PCPMALLOC_SHEAF_KB", T_INT, I(sheaf_kb), AUTO, 4, 1 << 14, NULL,
	  "bytes of objects a sheaf holds (KiB; auto: 16 per CPU, from 32 to 1024), never fewer objects than the kernel's sheaf_capacity" },
	{ "PCPMALLOC_DECAY_MS", T_INT, I(decay_ms), 1000, 1, 3600000, NULL,
	  "period of decay_pcp_high (ms); free memory idle for half of it is purged every half period" },
	{ "PCPMALLOC_DECAY_SHIFT", T_INT, I(decay_shift), 3, 1, 16, NULL,
	  "mainline decay: high -= high >> shift per period" },
	{ "PCPMALLOC_DECAY_MODE", T_ENUM, I(decay_mode), 0, 0, 1, "mainline|count_min",
	  "count_min = the RFC 'avoid to reduce PCP high unnecessarily'" },
	{ "PCPMALLOC_COUNT_MIN_DIV", T_INT, I(count_min_div), 5, 1, 64, NULL,
	  "count_min mode decays by min(count_min, high / div); sheaves in use give back at most 1/div of what they hold per period" },
	{ "PCPMALLOC_TCACHE", T_INT, I(tcache), 1, 0, 1, NULL, "per-thread object caches" },
	{ "PCPMALLOC_TCACHE_GROW_KB", T_INT, I(tcache_grow_kb), 2048, 0, 1 << 16, NULL,
	  "capacity a thread's caches may grow by for classes whose objects make round trips to the slabs (KiB of objects; all threads together at most 4 times this; 0: no growth)" },
	{ "PCPMALLOC_SECURE", T_INT, I(secure), 0, 0, 1, NULL,
	  "1: hardened mode: canaries, guard pages, zeroed and quarantined free memory, checked sizes" },
	{ "PCPMALLOC_SECURE_FAR_GUARD", T_INT, I(secure_far_guard), 1, 0, 1, NULL,
	  "secure mode: 4 MiB blocks split for blocks of 1 MiB or less keep their 2nd and 4th MiB as guards, so a write 1 MiB past a block faults" },
	{ "PCPMALLOC_SECURE_ZERO", T_INT, I(secure_zero), 1, 0, 1, NULL,
	  "secure mode: freed blocks zeroed and checked still zero when handed out again (write after free); 0: calloc clears instead" },
	{ "PCPMALLOC_SECURE_CANARY", T_INT, I(secure_canary), 1, 0, 1, NULL,
	  "secure mode: a canary after every small block and the neighbours' marks, checked at free (overflow, underflow)" },
	{ "PCPMALLOC_SECURE_QUARANTINE", T_INT, I(secure_quarantine), 1, 0, 1, NULL,
	  "secure mode: freed small blocks wait in a random per-class quarantine, page runs in a FIFO of 16; 0: a freed block is reused next" },
	{ "PCPMALLOC_JUNK", T_INT, I(junk), 0, 0, 1, NULL,
	  "1: new blocks filled with 0xa5, freed ones with 0x5a (debugging; thread caches off)" },
	{ "PCPMALLOC_DECAY_THREAD", T_INT, I(decay_thread), 0, 0, 1, NULL,
	  "1: a background thread runs decay and purge every period, also in idle processes" },
	{ "PCPMALLOC_LIVE", T_INT, I(live), 0, 0, 1, NULL,
	  "1: publish the statistics once a second in /dev/shm/pcpmalloc.PID for pcpmalloc top PID (a background thread; removed at exit)" },
	{ "PCPMALLOC_DIRTY_PCT", T_INT, I(dirty_pct), 100, 0, 1000, NULL,
	  "free but resident pages kept, in % of the recent peak of pages in use; beyond, the coldest are purged" },
	{ "PCPMALLOC_DIRTY_MIN_MB", T_INT, I(dirty_min_mb), 16, 0, 1 << 20, NULL,
	  "free but resident memory always allowed (MiB)" },
	{ "PCPMALLOC_ARENA_RESERVE_GB", T_INT, I(arena_reserve_gb), 64, 1, 1 << 14, NULL,
	  "address range per arena (GiB; halved until mmap succeeds); reserved step by step as the heap grows" },
	{ "PCPMALLOC_ARENA_CHUNK_MB", T_INT, I(arena_chunk_mb), 64, 4, 1 << 16, NULL,
	  "zone growth step (MiB; rounded up to a multiple of 4)" },
	{ "PCPMALLOC_CPU_SOURCE", T_ENUM, I(cpu_source), 0, 0, 2, "rseq|getcpu|tid",
	  "how the current CPU is found (rseq cpu_id, sched_getcpu, thread-id hash)" },
	{ "PCPMALLOC_CACHE_SLICE", T_INT, I(cache_slice), AUTO, 4096, 1 << 30, NULL,
	  "LLC slice in bytes for every CPU, instead of the topology's (sizes high_max and the flag)" },
	{ "PCPMALLOC_HIGH_POLICY", T_ENUM, I(high_policy), 0, 0, 1, "cache|heap",
	  "high_min/high_max from the cache slice, or from the committed heap (kernel-pcp.md 12.4)" },
	{ "PCPMALLOC_TOPOLOGY", T_ENUM, I(topology), 0, 0, 2, "lazy|now|off",
	  "discovery: this machine from sysfs (else CPUID) after 64 pcp refills, 50 ms and a 16 MiB heap; now: with hwloc at once (also when _XML or _SYNTHETIC is set); off: never" },
	{ "PCPMALLOC_TOPOLOGY_XML", T_STR, NULL, &pcpm_cfg.topology_xml, 0, 0, 0, NULL,
	  "hwloc XML file: size the pcps for that machine instead of this one" },
	{ "PCPMALLOC_TOPOLOGY_SYNTHETIC", T_STR, NULL, &pcpm_cfg.topology_synthetic, 0, 0, 0, NULL,
	  "hwloc synthetic description (e.g. \"pack:2 l3:1(size=33554432) core:8 pu:2\") instead of this machine (at most 8192 CPUs, the kernel's largest NR_CPUS; more: one warning, this machine used)" },
	{ "PCPMALLOC_TOPOLOGY_LIB", T_STR, NULL, &pcpm_cfg.topology_lib, 0, 0, 0, NULL,
	  "the hwloc library to dlopen (default libhwloc.so.15)" },
	{ "PCPMALLOC_SYSFS_ROOT", T_STR, NULL, &pcpm_cfg.sysfs_root, 0, 0, 0, NULL,
	  "folder lazy discovery reads in place of /sys (cacheinfo, CPU topology, NUMA nodes); an empty one hides sysfs (tests)" },
	{ "PCPMALLOC_CPUID", T_INT, I(cpuid), 1, 0, 1, NULL,
	  "1: lazy discovery reads the caches with CPUID (x86) when sysfs has no cacheinfo; 0: never (provisional sizes stay)" },
	{ "PCPMALLOC_NUMA_BIND", T_ENUM, I(numa_bind), 0, 0, 2, "preferred|bind|off",
	  "on 2+ NUMA nodes, mbind each zone's arenas to its node: MPOL_PREFERRED, MPOL_BIND, or not at all" },
	{ "PCPMALLOC_VALGRIND", T_ENUM, I(valgrind), AUTO, -1, 1, "0|1",
	  "memcheck mode (client requests, no thread caches, quarantine): auto = when memcheck runs the process" },
	{ "PCPMALLOC_PROF", T_INT, I(prof), 0, 0, 1, NULL,
	  "1: sampled heap profiler (stacks of sampled blocks; dumps google-pprof reads; not with secure, junk or memcheck mode)" },
	{ "PCPMALLOC_PROF_SAMPLE", T_INT, I(prof_sample), 524288, 1, 1 << 30, NULL,
	  "mean bytes allocated between two samples (exponential gaps, as tcmalloc and jemalloc)" },
	{ "PCPMALLOC_PROF_PREFIX", T_STR, NULL, &pcpm_cfg.prof_prefix, 0, 0, 0, NULL,
	  "start of the dump file names, PREFIX.PID.SEQ.KIND.heap (%p becomes the pid; default pcpmalloc)" },
	{ "PCPMALLOC_PROF_SIGNAL", T_INT, I(prof_signal), 0, 0, 64, NULL,
	  "signal number that writes a heap profile (e.g. 12, SIGUSR2; not a fault or abort signal); 0: none" },
	{ "PCPMALLOC_PROF_FINAL", T_INT, I(prof_final), 0, 0, 1, NULL,
	  "1: write a heap profile at exit (jemalloc's prof_final)" },
	{ "PCPMALLOC_PROF_INTERVAL", T_INT, I(prof_interval), 0, 0, 2147483647, NULL,
	  "write a heap profile each time this many more bytes were allocated (jemalloc's lg_prof_interval); 0: never" },
	{ "PCPMALLOC_LEAKS", T_INT, I(leaks), 0, 0, 1, NULL,
	  "1: profiling on, and at exit a report of the sampled blocks still allocated, by stack, largest first" },
};
#define NTUNABLES (sizeof(table) / sizeof(table[0]))

static struct pcpm_tunable_doc docs[NTUNABLES];

/* Where each value in force came from (for PCPMALLOC_VERBOSE's block). */
enum { SRC_DEFAULT = 0, SRC_ENV, SRC_REJECTED, SRC_IMPLIED };
static unsigned char src[NTUNABLES] PCPM_HOT;
static const char *rejected[NTUNABLES]; /* the environment's text, when rejected */

/* A decimal integer, the whole value: "010" is ten (no octal or hex, as every peer's and the
 * man page's numbers are read), no blank before or after it. */
static bool parse_int(const char *s, long *out)
{
	char *end;
	if (!((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9')))
		return false;
	int saved = errno; /* (start-up: the program's errno stays as it was) */
	errno = 0;
	long v = strtol(s, &end, 10);
	bool ok = !errno && end != s && !*end;
	errno = saved;
	if (ok)
		*out = v;
	return ok;
}

/* Enum value: index in "a|b|c", or AUTO for "auto"; -2 when unknown. */
static int parse_enum(const char *names, const char *s)
{
	if (strcmp(s, "auto") == 0)
		return AUTO;
	int idx = 0;
	size_t n = strlen(s);
	for (const char *p = names; *p; idx++) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		if (len == n && strncmp(p, s, n) == 0)
			return idx;
		if (!bar)
			break;
		p = bar + 1;
	}
	return -2;
}

void pcpm_config_init(void)
{
	int e = errno;
	/* One scan of the environment for PCPMALLOC_* (usually none): looking each tunable up
	 * in the whole environment cost 1300 strncmp calls, a fifth of a shell's start-up
	 * instructions.  Past NTUNABLES entries, the rest are read with pcpm_getenv. */
	const char *mine[NTUNABLES];
	/* A set-user-ID/set-group-ID or file-capability program (AT_SECURE) takes no
	 * PCPMALLOC_* from its environment, which a less privileged user wrote (as glibc's
	 * loader drops MALLOC_* there): PCPMALLOC_STATS_FILE would create or truncate any file
	 * with the program's privileges.  Every tunable keeps its default. */
	size_t nmine = getauxval(AT_SECURE) ? 0 : pcpm_env_prefixed("PCPMALLOC_", mine, NTUNABLES);
	for (size_t i = 0; i < NTUNABLES; i++) {
		const struct tunable *t = &table[i];
		const char *v = !nmine ? NULL
			      : nmine <= NTUNABLES ? pcpm_env_find(mine, nmine, t->name)
						   : pcpm_getenv(t->name);
		if (t->type == T_STR) {
			*t->sval = (v && *v) ? v : NULL;
			src[i] = *t->sval ? SRC_ENV : SRC_DEFAULT;
			continue;
		}
		*t->ival = t->deflt;
		src[i] = SRC_DEFAULT;
		if (!v)
			continue;
		long x;
		bool ok = false;
		if (t->type == T_ENUM) {
			int k = parse_enum(t->names, v);
			if (k == AUTO && t->deflt == AUTO) {
				x = AUTO;
				ok = true;
			} else if (k >= 0) {
				/* by name only: "1" for count_min would read as a typo of a
				 * number, and the table's order is not an interface */
				x = k;
				ok = true;
			}
		} else if (strcmp(v, "auto") == 0 && t->deflt == AUTO) {
			x = AUTO;
			ok = true;
		} else {
			ok = parse_int(v, &x) && x >= t->min && x <= t->max;
		}
		src[i] = ok ? SRC_ENV : SRC_REJECTED;
		rejected[i] = v;
		if (ok) {
			*t->ival = (int)x;
		} else if (t->type == T_ENUM) {
			pcpm_warn("ignoring %s=%s: expected one of %s%s; using the default", t->name,
				  v, t->names, t->deflt == AUTO ? "|auto" : "");
		} else {
			pcpm_warn("ignoring %s=%s: expected an integer in [%d, %d]%s; using the default",
				  t->name, v, t->min, t->max, t->deflt == AUTO ? " or auto" : "");
		}
	}
	/* a misspelt name would silently do nothing: one warning each (PCPMALLOC_TEST_* are the
	 * test suite's own) */
	for (size_t k = 0; k < nmine && k < NTUNABLES; k++) {
		const char *eq = strchr(mine[k], '=');
		size_t len = eq ? (size_t)(eq - mine[k]) : strlen(mine[k]);
		bool known = strncmp(mine[k], "PCPMALLOC_TEST_", 15) == 0;
		for (size_t i = 0; i < NTUNABLES && !known; i++)
			known = strlen(table[i].name) == len && strncmp(table[i].name, mine[k], len) == 0;
		if (!known)
			pcpm_warn("ignoring %.*s: no such variable (man pcpmalloc lists them)", (int)len, mine[k]);
	}
	/* the documented rounding of the growth step */
	pcpm_cfg.arena_chunk_mb = (int)ALIGN_UP(pcpm_cfg.arena_chunk_mb, 4);
	/* a described machine is wanted from the start, not after the lazy discovery's wait */
	for (size_t i = 0; i < NTUNABLES; i++)
		if (table[i].ival == &pcpm_cfg.topology && src[i] == SRC_DEFAULT &&
		    (pcpm_cfg.topology_xml || pcpm_cfg.topology_synthetic)) {
			pcpm_cfg.topology = TOPOLOGY_NOW;
			src[i] = SRC_IMPLIED;
		}
	errno = e;
}

/* The n-th name of "a|b|c" into out. */
static void enum_name(const char *names, int k, char *out, size_t len)
{
	const char *p = names;
	for (int i = 0; i < k && strchr(p, '|'); i++)
		p = strchr(p, '|') + 1;
	int l = strchr(p, '|') ? (int)(strchr(p, '|') - p) : (int)strlen(p);
	snprintf(out, len, "%.*s", l, p);
}

size_t pcpm_config_describe(char *buf, size_t len, size_t n)
{
	for (size_t i = 0; i < NTUNABLES; i++) {
		const struct tunable *t = &table[i];
		char val[64];
		if (t->type == T_STR)
			snprintf(val, sizeof(val), "%s", *t->sval ? *t->sval : "unset");
		else if (*t->ival == AUTO)
			snprintf(val, sizeof(val), "auto");
		else if (t->type == T_ENUM)
			enum_name(t->names, *t->ival, val, sizeof(val));
		else
			snprintf(val, sizeof(val), "%d", *t->ival);
		if (src[i] == SRC_REJECTED)
			n = pcpm_bappend(buf, len, n, "pcpmalloc:   %-29s %-8s (env '%.40s' rejected: default)\n",
					 t->name, val, rejected[i]);
		else
			n = pcpm_bappend(buf, len, n, "pcpmalloc:   %-29s %-8s (%s)\n", t->name, val,
					 src[i] == SRC_ENV	? "env"
					 : src[i] == SRC_IMPLIED ? "a described machine: at once"
								 : "default");
	}
	return n;
}

const struct pcpm_tunable_doc *pcpm_tunable_docs(size_t *n)
{
	static char defbuf[NTUNABLES][24], rangebuf[NTUNABLES][40];
	for (size_t i = 0; i < NTUNABLES; i++) {
		const struct tunable *t = &table[i];
		docs[i].name = t->name;
		docs[i].meaning = t->meaning;
		docs[i].deflt = defbuf[i];
		docs[i].range = rangebuf[i];
		if (t->type == T_STR) {
			snprintf(defbuf[i], sizeof(defbuf[i]), "unset");
			snprintf(rangebuf[i], sizeof(rangebuf[i]), "path");
			continue;
		}
		if (t->deflt == AUTO) {
			snprintf(defbuf[i], sizeof(defbuf[i]), "auto");
		} else if (t->type == T_ENUM) {
			const char *p = t->names;
			for (int k = 0; k < t->deflt && strchr(p, '|'); k++)
				p = strchr(p, '|') + 1;
			int len = strchr(p, '|') ? (int)(strchr(p, '|') - p) : (int)strlen(p);
			snprintf(defbuf[i], sizeof(defbuf[i]), "%.*s", len, p);
		} else {
			snprintf(defbuf[i], sizeof(defbuf[i]), "%d", t->deflt);
		}
		if (t->type == T_ENUM)
			snprintf(rangebuf[i], sizeof(rangebuf[i]), "%s%s", t->names,
				 t->deflt == AUTO ? "|auto" : "");
		else
			snprintf(rangebuf[i], sizeof(rangebuf[i]), "%d..%d%s", t->min, t->max,
				 t->deflt == AUTO ? ", auto" : "");
	}
	*n = NTUNABLES;
	return docs;
}
