/*
 * sysfs.h - this machine's caches and NUMA nodes from sysfs (sysfs.c: raw system calls, no
 * cancellation point, no allocation, no thread): the kernel's cacheinfo and node lists under
 * a root ("/sys" or a test's folder).  Thread-safe (writes only its arguments).
 */
#ifndef PCPM_SYSFS_H
#define PCPM_SYSFS_H

#include "cpuinfo.h"

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

#endif
