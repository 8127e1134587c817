/*
 * peakgauge.c - where the bytes sit at a process's peak RSS: a library preloaded after
 * pcpmalloc (LD_PRELOAD="libpcpmalloc.so peakgauge.so") whose thread reads the resident set
 * (/proc/self/statm) every PEAKGAUGE_US microseconds (default 500) and, each time it finds a
 * new peak, takes pcpmalloc_stats_json() (looked up with dlsym: under another allocator only
 * the RSS is reported).  At exit it prints one line to stderr:
 *
 *   peakgauge: rss_peak_kib=N samples=N tcache_bytes=N sheaf_bytes=N ...
 *
 * with every "*_bytes" gauge of the statistics at the sample of the peak (issue 22: the
 * gauges at exit show where the bytes end up, not where they sat when the RSS was highest).
 * A sampling tool for the benchmarks, not part of the allocator: it uses libc freely.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define JSON_MAX (1 << 14) /* the gauges come early in the object: a truncated copy holds them */

static char peak_json[JSON_MAX], scratch[JSON_MAX];
static long peak_pages, samples;
static volatile int stopping;
static size_t (*stats_json)(char *buf, size_t len);

static long resident_pages(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size = 0, resident = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%ld %ld", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return resident;
}

static void *sampler(void *arg)
{
	long us = *(long *)arg;
	while (!stopping) {
		long r = resident_pages();
		samples++;
		if (r > peak_pages) {
			peak_pages = r;
			/* into a scratch buffer first: the report never sees a half-written one
			 * (truncated to JSON_MAX, NUL-terminated: the per-CPU tail is cut off) */
			if (stats_json) {
				stats_json(scratch, sizeof(scratch));
				memcpy(peak_json, scratch, sizeof(peak_json));
			}
		}
		usleep((useconds_t)us);
	}
	return NULL;
}

/* Prints every "NAME_bytes": NUMBER pair of the JSON object's top level, up to its first
 * nested object or array (the per-zone and per-CPU parts that follow repeat cache sizes). */
static void print_gauges(char *json)
{
	char *nested = strpbrk(json[0] ? json + 1 : json, "{[");
	if (nested)
		*nested = '\0';
	for (const char *p = json; (p = strstr(p, "_bytes\"")) != NULL; p++) {
		const char *q = p;
		while (q > json && q[-1] != '"')
			q--;
		const char *v = p + strlen("_bytes\"");
		while (*v == ' ' || *v == ':')
			v++;
		if (q == json || (*v < '0' || *v > '9'))
			continue;
		fprintf(stderr, " %.*s_bytes=%llu", (int)(p - q), q, strtoull(v, NULL, 10));
	}
}

__attribute__((destructor)) static void peakgauge_report(void)
{
	static char final_json[JSON_MAX]; /* (the sampler may still be writing scratch) */
	char *json = peak_json;
	stopping = 1;
	long r = resident_pages(); /* the last moment counts too */
	/* so does a run too short for the sampler (a starved thread on a loaded machine):
	 * the gauges as they stand now */
	if ((r > peak_pages || !peak_json[0]) && stats_json) {
		stats_json(final_json, sizeof(final_json));
		json = final_json;
	}
	if (r > peak_pages)
		peak_pages = r;
	fprintf(stderr, "peakgauge: rss_peak_kib=%ld samples=%ld",
		peak_pages * (sysconf(_SC_PAGESIZE) / 1024), samples);
	print_gauges(json);
	fprintf(stderr, "\n");
}

__attribute__((constructor)) static void peakgauge_start(void)
{
	static long us = 500;
	const char *e = getenv("PEAKGAUGE_US");
	if (e && atol(e) > 0)
		us = atol(e);
	stats_json = (size_t (*)(char *, size_t))dlsym(RTLD_DEFAULT, "pcpmalloc_stats_json");
	pthread_t t;
	if (pthread_create(&t, NULL, sampler, &us) == 0)
		pthread_detach(t);
}
