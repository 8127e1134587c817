/*
 * pcpmalloc.h - public interface of libpcpmalloc.so beyond the standard allocation API.
 *
 * pcpmalloc is a drop-in malloc (LD_PRELOAD=libpcpmalloc.so) built like the Linux page
 * allocator: a buddy zone, per-CPU pagesets (pcp) and SLUB-style slab caches.  These calls
 * let a program (or a test) ask which allocator it runs on and read its counters.  Look them
 * up with dlsym(RTLD_DEFAULT, ...) to stay runnable under other allocators.
 *
 * All functions are thread-safe and never allocate through malloc.
 */
#ifndef PCPMALLOC_H
#define PCPMALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version string, e.g. "0.1.0".  Never NULL. */
const char *pcpmalloc_version(void);

/*
 * Writes the statistics as one JSON object (the format PCPMALLOC_STATS=json prints) into
 * buf, NUL-terminated and truncated to len bytes.  Returns the length the whole object needs
 * (excluding the NUL), like snprintf.  Counters are per CPU / per thread and summed here,
 * so values are a racy but consistent-enough snapshot while other threads run.
 */
size_t pcpmalloc_stats_json(char *buf, size_t len);

/* One summed counter by its JSON key (e.g. "malloc_calls"); -1 if the name is unknown. */
long long pcpmalloc_stat(const char *name);

/*
 * Heap profiling (PCPMALLOC_PROF=1): writes the sampled heap profile now, in gperftools'
 * heap-profile text format (read by google-pprof: in-use and allocated objects and bytes per
 * stack, scaled by the sampling rate it names; jemalloc's mallctl("prof.dump"), gperftools'
 * HeapProfilerDump).  path: the file, "%p" replaced by the process id; NULL for the
 * automatic name PCPMALLOC_PROF_PREFIX.PID.SEQ.u.heap.  Returns 0, or -1 with errno
 * (EINVAL: profiling is off; EBUSY: another dump is being written; open/write's errors)
 * after one line on stderr.  Thread-safe and async-signal-safe; never allocates.
 */
int pcpmalloc_prof_dump(const char *path);

#ifdef __cplusplus
}
#endif
#endif
