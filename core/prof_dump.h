/*
 * prof_dump.h - the heap profiler's output (prof_dump.c): start-up of profiling, dumps in
 * gperftools' heap-profile text format (what google-pprof reads), the leak report at exit,
 * and the fork child's fresh profile.  Mirrors jemalloc's prof_dump/prof_final/prof_leak
 * and gperftools' HeapProfilerDump.  Thread-safe and async-signal-safe: a dump reads the
 * lock-free tables of prof.c and writes with open/write; one dump at a time (another one
 * asked for meanwhile is skipped with one line saying so).
 */
#ifndef PCPM_PROF_DUMP_H
#define PCPM_PROF_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Mean sampling interval in bytes (PCPMALLOC_PROF_SAMPLE), fixed at start-up. */
extern uint64_t pcpm_prof_rate;

/* Start-up (init.c, under its lock): the tables and PCPMALLOC_PROF_SIGNAL's handler.
 * False (one warning printed) when the tables cannot be mapped: profiling stays off. */
bool pcpm_prof_init(void);

/*
 * Writes a heap profile.  path: the file (%p becomes the process id), or NULL for the
 * automatic name PREFIX.PID.SEQ.KIND.heap (PCPMALLOC_PROF_PREFIX, default "pcpmalloc";
 * kind: 'u' asked by the program, 's' signal, 'i' interval, 'f' final).  Returns 0, or -1
 * with errno (EINVAL when profiling is off, EBUSY during another dump, open/write's) after
 * one line on stderr saying why.  Never stops the program.
 */
int pcpm_prof_dump(const char *path, char kind);

/* A sample stood for this many bytes of allocation: PCPMALLOC_PROF_INTERVAL's count, which
 * writes an 'i' dump each time it passes another interval. */
void pcpm_prof_allocated(uint64_t bytes);

/* At exit (preload's destructor): PCPMALLOC_PROF_FINAL's dump, PCPMALLOC_LEAKS's report. */
void pcpm_prof_at_exit(void);

/* fork: the child starts a fresh profile (no lock is involved: nothing to take before). */
void pcpm_prof_fork_child(void);

#endif
