/*
 * stat.h - the statistics report (stat.c): sums every layer's counters (stat_counters.h) into
 * one struct pcpm_stats, and prints it as JSON or text.  Each layer keeps its counters where its
 * lock already is (per pcp, per zone, per thread cache), so counting never adds a shared atomic
 * to the fast path; pcpm_stats_read() sums them.
 */
#ifndef PCPM_STAT_H
#define PCPM_STAT_H

#include "stat_counters.h"

#include <stddef.h>

/* Sums every layer's counters into *s (zeroed first).  Racy reads; thread-safe. */
void pcpm_stats_read(struct pcpm_stats *s);

/* The counter called name (a key of PCPM_COUNTERS) in *s; -1 for an unknown name.  Backs
 * pcpmalloc_stat(). */
long long pcpm_stats_get(const struct pcpm_stats *s, const char *name);

/* JSON object (see pcpmalloc.h); returns the length needed, like snprintf. */
size_t pcpm_stats_json(char *buf, size_t len);

/* Keeps a copy of stderr for the exit dump when PCPMALLOC_STATS asks for one (init). */
void pcpm_stats_init(void);

/* Text or JSON dump at exit, as PCPMALLOC_STATS / PCPMALLOC_STATS_FILE say. */
void pcpm_stats_dump_at_exit(void);

/* malloc_stats(): text to stderr. */
void pcpm_stats_print(void);

#endif
