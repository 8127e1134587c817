/*
 * stat.c - the statistics report (see stat.h): pulls every layer's counters through the one
 * interface each layer offers, void X_stats_add(struct pcpm_stats *), and prints them.  It
 * sits above the layers and calls down into each; no layer calls it.  Output never goes
 * through stdio or malloc: snprintf into a buffer, then write(2).
 */
#define _GNU_SOURCE
#include "stat.h"
#include "alloc.h"
#include "config.h"
#include "early.h"
#include "huge.h"
#include "tcache.h"
#include "topology.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The layers, top down: each adds its own counters (thread caches, kmem_caches, pcps,
 * zones, huge mappings, the arenas' locks). */
static void (*const layer_stats[])(struct pcpm_stats *) = {
	pcpm_reclaim_stats_add, tcache_stats_add, sheaf_stats_add, slab_stats_add, pcp_stats_add,
	zone_stats_add, huge_stats_add, arena_stats_add,
};

void pcpm_stats_read(struct pcpm_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->early_bytes = pcpm_early_used();
	uint64_t ea, ef;
	pcpm_early_calls(&ea, &ef); /* calls served before the allocator started count too */
	s->malloc_calls += ea;
	s->free_calls += ef;
	if (!pcpm_pcp)
		return;
	for (size_t i = 0; i < sizeof(layer_stats) / sizeof(layer_stats[0]); i++)
		layer_stats[i](s);
	s->resident_bytes = pcpm_rss_bytes();
}

/* Appender that counts what it would need, like snprintf. */
struct out {
	char *buf;
	size_t len, pos;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t room = o->pos < o->len ? o->len - o->pos : 0;
	int n = vsnprintf(room ? o->buf + o->pos : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

long long pcpm_stats_get(const struct pcpm_stats *s, const char *name)
{
#define X(n)                                                                                       \
	if (strcmp(name, #n) == 0)                                                                 \
		return (long long)s->n;
	PCPM_COUNTERS(X)
#undef X
	return -1;
}

size_t pcpm_stats_json(char *buf, size_t len)
{
	struct pcpm_stats s;
	pcpm_stats_read(&s);
	struct out o = { buf, len, 0 };
	put(&o, "{\"allocator\": \"pcpmalloc\", \"version\": \"%s\", \"pid\": %d", PCPM_VERSION,
	    (int)getpid());
#define X(n) put(&o, ", \"" #n "\": %llu", (unsigned long long)s.n);
	PCPM_COUNTERS(X)
#undef X
	/* /proc/buddyinfo: free blocks per order, all zones together, then per zone */
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	put(&o, ", \"buddyinfo\": [");
	for (int i = 0; i < NR_PAGE_ORDERS; i++) {
		size_t nf = 0;
		for (int n = 0; n < nr; n++)
			nf += pcpm_zones[n].free_area[i].nr_free;
		put(&o, "%s%zu", i ? ", " : "", nf);
	}
	put(&o, "]");
	/* one zone per NUMA node: where its pages went (numa_miss / numa_foreign: zonelist
	 * fallback), what its pcps took from it, its own buddyinfo */
	put(&o, ", \"numa_bind\": \"%s\", \"zones\": [",
	    pcpm_cfg.numa_bind == NUMA_BIND_OFF ? "off" : pcpm_cfg.numa_bind == NUMA_BIND_STRICT ? "bind" : "preferred");
	for (int n = 0; pcpm_pcp && n < nr; n++) {
		struct zone *z = &pcpm_zones[n];
		uint64_t refills, refill_pages, count;
		pcp_zone_stats(z, &refills, &refill_pages, &count);
		put(&o,
		    "%s{\"node\": %d, \"os_node\": %d, \"mbind\": %s, \"mbind_failed\": %llu, "
		    "\"managed_pages\": %zu, \"free_pages\": %zu, \"pcp_pages\": %llu, "
		    "\"pgalloc_zone\": %llu, \"pgfree_zone\": %llu, \"pcp_refills\": %llu, "
		    "\"pcp_refill_pages\": %llu, \"numa_miss\": %llu, \"numa_foreign\": %llu, "
		    "\"buddyinfo\": [",
		    n ? ", " : "", z->node, z->os_node, z->bind >= 0 ? "true" : "false",
		    (unsigned long long)z->grower.mbind_failed, z->managed_pages, z->free_pages,
		    (unsigned long long)count, (unsigned long long)z->pgalloc_zone,
		    (unsigned long long)z->pgfree_zone, (unsigned long long)refills,
		    (unsigned long long)refill_pages,
		    (unsigned long long)atomic_load_explicit(&z->numa_miss, memory_order_relaxed),
		    (unsigned long long)atomic_load_explicit(&z->numa_foreign, memory_order_relaxed));
		for (int i = 0; i < NR_PAGE_ORDERS; i++)
			put(&o, "%s%zu", i ? ", " : "", z->free_area[i].nr_free);
		put(&o, "]}");
	}
	put(&o, "]");
	/* lock contention as the kernel posts report it: contended acquisitions over all
	 * acquisitions, and time spent waiting over the process's CPU time */
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu_ns = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
			(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
	put(&o, ", \"zone_lock_contended_pct\": %.3f, \"zone_lock_wait_pct\": %.3f, \"cpu_time_ns\": %.0f",
	    s.zone_lock ? 100.0 * (double)s.zone_lock_contended / (double)s.zone_lock : 0.0,
	    cpu_ns > 0 ? 100.0 * (double)s.zone_lock_wait_ns / cpu_ns : 0.0, cpu_ns);
	put(&o, ", \"topology\": \"%s\", \"topology_why\": \"",
	    pcpm_topology_source_name(pcpm_topology_state));
	/* the reason holds paths: escape what JSON needs escaped */
	for (const char *w = pcpm_topology_why; *w; w++)
		put(&o, "%s%c", *w == '"' || *w == '\\' ? "\\" : "",
		    (unsigned char)*w < 0x20 ? '?' : *w);
	put(&o, "\"");
	put(&o, ", \"cpus\": [");
	for (int i = 0; pcpm_pcp && i < pcpm_nr_cpus; i++) {
		/* the pcp of the CPU's own node's zone */
		struct per_cpu_pages *p = zone_pcp(&pcpm_zones[pcp_cpu_node((unsigned)i)], (unsigned)i);
		const struct pcpm_cpu_cache *c = pcpm_cpu_cache(i);
		put(&o,
		    "%s{\"cpu\": %d, \"package\": %d, \"core\": %d, \"node\": %d, "
		    "\"l2_bytes\": %zu, \"llc_bytes\": %zu, \"slice_bytes\": %zu, "
		    "\"count\": %d, \"high\": %d, \"batch\": %d, \"high_min\": %d, "
		    "\"high_max\": %d, \"free_count\": %d, \"alloc_factor\": %d, \"count_min\": %d, "
		    "\"free_high_batch\": %s, \"refills\": %llu, \"drains\": %llu, "
		    "\"free_high_drains\": %llu, \"high_raises\": %llu, \"high_decays\": %llu}",
		    i ? ", " : "", i, c->package, c->core, c->node, c->l2_bytes, c->llc_bytes,
		    c->slice_bytes, p->count, p->high, p->batch, p->high_min, p->high_max,
		    p->free_count, p->alloc_factor, p->count_min,
		    (p->flags & PCPF_FREE_HIGH_BATCH) ? "true" : "false",
		    (unsigned long long)p->refills, (unsigned long long)p->drains,
		    (unsigned long long)p->free_high_drains, (unsigned long long)p->high_raises,
		    (unsigned long long)p->high_decays);
	}
	put(&o, "]}\n");
	if (len)
		buf[o.pos < len ? o.pos : len - 1] = 0;
	return o.pos;
}

static size_t stats_text(char *buf, size_t len)
{
	struct pcpm_stats s;
	pcpm_stats_read(&s);
	struct out o = { buf, len, 0 };
	put(&o, "pcpmalloc %s statistics (pid %d)\n", PCPM_VERSION, (int)getpid());
#define X(n) put(&o, "  %-22s %llu\n", #n, (unsigned long long)s.n);
	PCPM_COUNTERS(X)
#undef X
	/* as /proc/buddyinfo prints it: a line per node's zone */
	int nr = atomic_load_explicit(&pcpm_nr_zones, memory_order_acquire);
	for (int n = 0; n < nr; n++) {
		put(&o, "  buddyinfo Node %d, zone Normal ", n);
		for (int i = 0; i < NR_PAGE_ORDERS; i++)
			put(&o, " %zu", pcpm_zones[n].free_area[i].nr_free);
		put(&o, "\n");
	}
	put(&o, "  topology %s%s%s%s\n", pcpm_topology_source_name(pcpm_topology_state),
	    pcpm_topology_why[0] ? " (" : "", pcpm_topology_why, pcpm_topology_why[0] ? ")" : "");
	put(&o, "  %-5s %8s %8s %6s %8s %8s %9s %9s %9s\n", "cpu", "count", "high", "batch",
	    "high_min", "high_max", "l2_kib", "llc_kib", "slice_kib");
	for (int i = 0; pcpm_pcp && i < pcpm_nr_cpus; i++) {
		struct per_cpu_pages *p = zone_pcp(&pcpm_zones[pcp_cpu_node((unsigned)i)], (unsigned)i);
		const struct pcpm_cpu_cache *c = pcpm_cpu_cache(i);
		put(&o, "  %-5d %8d %8d %6d %8d %8d %9zu %9zu %9zu\n", i, p->count, p->high, p->batch,
		    p->high_min, p->high_max, c->l2_bytes >> 10, c->llc_bytes >> 10,
		    c->slice_bytes >> 10);
	}
	if (len)
		buf[o.pos < len ? o.pos : len - 1] = 0;
	return o.pos;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Renders with fn into a temporary mapping and writes it to fd. */
static void emit(int fd, size_t (*fn)(char *, size_t))
{
	size_t need = fn(NULL, 0) + 4096; /* counters may grow between the two calls */
	size_t cap = ALIGN_UP(need, PAGE_SIZE);
	char *buf = pcpm_os_map(cap, PAGE_SIZE);
	if (!buf)
		return;
	size_t n = fn(buf, cap);
	write_all(fd, buf, MIN(n, cap - 1));
	pcpm_os_unmap(buf, cap);
}

void pcpm_stats_print(void)
{
	emit(2, stats_text);
}

/* A copy of stderr taken at start-up: coreutils and others close fd 2 before exit. */
static int stderr_copy = -1;

void pcpm_stats_init(void)
{
	if (pcpm_cfg.stats != STATS_OFF) /* (also for the warning when the file cannot be written) */
		stderr_copy = fcntl(2, F_DUPFD_CLOEXEC, 100); /* far from the fds programs expect */
}

void pcpm_stats_dump_at_exit(void)
{
	if (pcpm_cfg.stats == STATS_OFF)
		return;
	int fd = stderr_copy >= 0 && fcntl(stderr_copy, F_GETFD) >= 0 ? stderr_copy : 2;
	int err_fd = fd; /* (a program may have closed fd 2 by now: coreutils' close_stdout) */
	if (pcpm_cfg.stats_file) {
		char path[4096];
		size_t k = 0;
		for (const char *s = pcpm_cfg.stats_file; *s && k < sizeof(path) - 24; s++) {
			if (s[0] == '%' && s[1] == 'p') {
				k += (size_t)snprintf(path + k, sizeof(path) - k, "%d", (int)getpid());
				s++;
			} else {
				path[k++] = *s;
			}
		}
		path[k] = 0;
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			char msg[4200];
			int m = snprintf(msg, sizeof(msg),
					 "pcpmalloc: cannot write PCPMALLOC_STATS_FILE %s: %s\n", path,
					 strerror(errno));
			if (m > 0 && write(err_fd, msg, (size_t)MIN((size_t)m, sizeof(msg) - 1)) < 0)
				return;
			return;
		}
	}
	emit(fd, pcpm_cfg.stats == STATS_JSON ? pcpm_stats_json : stats_text);
	if (fd != 2 && fd != stderr_copy)
		close(fd);
}
