/*
 * hwtopo.h - the hwloc entry points the topology walk uses, as a table of function pointers:
 * the library fills it with dlsym() on a dlopen'ed libhwloc.so.15 (so it never links hwloc),
 * the tool pcpmalloc-topology with the linked functions.  Only exported functions are used
 * (no inline helpers from hwloc's headers), and the object fields read are those of the
 * hwloc 2.x ABI (libhwloc.so.15).
 */
#ifndef PCPM_HWTOPO_H
#define PCPM_HWTOPO_H

#include "cpuinfo.h"

#include <hwloc.h>

struct pcpm_hwloc_fns {
	unsigned (*get_api_version)(void);
	int (*topology_init)(hwloc_topology_t *);
	int (*topology_set_xml)(hwloc_topology_t, const char *);
	int (*topology_set_synthetic)(hwloc_topology_t, const char *);
	int (*topology_load)(hwloc_topology_t);
	void (*topology_destroy)(hwloc_topology_t);
	int (*get_type_depth)(hwloc_topology_t, hwloc_obj_type_t);
	unsigned (*get_nbobjs_by_depth)(hwloc_topology_t, int);
	hwloc_obj_t (*get_obj_by_depth)(hwloc_topology_t, int, unsigned);
	int (*bitmap_weight)(hwloc_const_bitmap_t);
	int (*bitmap_isset)(hwloc_const_bitmap_t, unsigned);
};

/*
 * hwloc walk shared by the library (functions from dlsym) and the tool (linked): fills
 * cpus[0..ncpus) by PU os_index, returns the number of PUs found or -1 with *why set.
 * src_xml / src_synthetic select a fake machine (NULL: this machine).
 */
int pcpm_hwloc_walk(const struct pcpm_hwloc_fns *f, const char *src_xml, const char *src_synthetic,
		    struct pcpm_cpu_cache *cpus, int ncpus, const char **why);

#endif
