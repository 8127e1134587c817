/*
 * core_as_malloc.h - forced in front of an API test (-include) to run it against pcpmalloc's
 * core linked as a library instead of LD_PRELOAD: the system headers come first, then the
 * test's calls of the allocation API are renamed to the core's pcpm_* functions.  That is
 * how test_stress runs under ASan+UBSan or TSan, which intercept the process malloc
 * themselves.  core_as_malloc.c exports pcpmalloc_version() & co. so tu_require_pcpmalloc()
 * finds them, as it would in libpcpmalloc.so.  Only for tests that free nothing libc
 * allocated (strdup and the like would reach pcpm_free, which aborts on foreign memory).
 */
#ifndef CORE_AS_MALLOC_H
#define CORE_AS_MALLOC_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

/* RSS bounds of the test scale by this: ASan's shadow is 1/8 of the memory touched, TSan's
 * several times it (test_stress under TSan peaks near 1.5 GiB for 256 MiB live) */
#if defined(__SANITIZE_THREAD__)
#define TU_RSS_FACTOR 8
#elif defined(__SANITIZE_ADDRESS__)
#define TU_RSS_FACTOR 2
#endif

#define malloc(n) pcpm_malloc(n)
#define calloc(n, s) pcpm_calloc(n, s)
#define realloc(p, n) pcpm_realloc(p, n)
#define free(p) pcpm_free(p)
#define posix_memalign(o, a, n) pcpm_posix_memalign(o, a, n)
#define aligned_alloc(a, n) pcpm_aligned_alloc(a, n)
#define memalign(a, n) pcpm_memalign(a, n)
#define malloc_usable_size(p) pcpm_usable_size(p)
#define malloc_trim(n) pcpm_trim(n)
#endif
