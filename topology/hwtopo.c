/*
 * hwtopo.c - walk an hwloc topology into per-CPU cache entries (see hwtopo.h).
 * For every PU: its core and package (ancestors), its NUMA node (the node whose cpuset holds
 * it: in hwloc 2 nodes hang off the tree as memory children), its L2 and its last-level
 * data/unified cache (the deepest-level cache ancestor that is not an instruction cache), and
 * how many PUs share each (weight of the cache's cpuset).
 */
#include "hwtopo.h"

static int cache_level(hwloc_obj_t o)
{
	switch (o->type) {
	case HWLOC_OBJ_L1CACHE:
	case HWLOC_OBJ_L2CACHE:
	case HWLOC_OBJ_L3CACHE:
	case HWLOC_OBJ_L4CACHE:
	case HWLOC_OBJ_L5CACHE:
		if (!o->attr || o->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION)
			return 0;
		return (int)o->attr->cache.depth;
	default:
		return 0;
	}
}

int pcpm_hwloc_walk(const struct pcpm_hwloc_fns *f, const char *src_xml, const char *src_synthetic,
		    struct pcpm_cpu_cache *cpus, int ncpus, const char **why)
{
	if ((f->get_api_version() >> 16) != 2) {
		*why = "libhwloc is not hwloc 2.x";
		return -1;
	}
	hwloc_topology_t t;
	if (f->topology_init(&t) != 0) {
		*why = "hwloc_topology_init failed";
		return -1;
	}
	if (src_xml && f->topology_set_xml(t, src_xml) != 0) {
		*why = "hwloc cannot read the XML topology";
		f->topology_destroy(t);
		return -1;
	}
	if (!src_xml && src_synthetic && f->topology_set_synthetic(t, src_synthetic) != 0) {
		*why = "hwloc rejects the synthetic description";
		f->topology_destroy(t);
		return -1;
	}
	if (f->topology_load(t) != 0) {
		*why = "hwloc_topology_load failed";
		f->topology_destroy(t);
		return -1;
	}
	int pu_depth = f->get_type_depth(t, HWLOC_OBJ_PU);
	int npu = pu_depth >= 0 ? (int)f->get_nbobjs_by_depth(t, pu_depth) : 0;
	int node_depth = f->get_type_depth(t, HWLOC_OBJ_NUMANODE);
	int nnodes = (int)f->get_nbobjs_by_depth(t, node_depth);
	if (npu <= 0) {
		*why = "hwloc found no PU";
		f->topology_destroy(t);
		return -1;
	}
	for (int i = 0; i < npu; i++) {
		hwloc_obj_t pu = f->get_obj_by_depth(t, pu_depth, (unsigned)i);
		if (!pu || pu->os_index >= (unsigned)ncpus)
			continue;
		struct pcpm_cpu_cache c = { .package = 0, .core = (int)pu->logical_index, .node = 0,
					    .node_os = -1 };
		hwloc_obj_t l2 = NULL, llc = NULL;
		for (hwloc_obj_t a = pu->parent; a; a = a->parent) {
			int lvl = cache_level(a);
			if (a->type == HWLOC_OBJ_CORE)
				c.core = (int)a->logical_index;
			else if (a->type == HWLOC_OBJ_PACKAGE)
				c.package = (int)a->logical_index;
			else if (lvl == 2 && !l2)
				l2 = a;
			if (lvl > 0 && (!llc || lvl > cache_level(llc)))
				llc = a;
		}
		c.node_cpus = npu;
		for (int k = 0; k < nnodes; k++) {
			hwloc_obj_t n = f->get_obj_by_depth(t, node_depth, (unsigned)k);
			if (n && n->cpuset && f->bitmap_isset(n->cpuset, pu->os_index)) {
				c.node = (int)n->logical_index;
				c.node_os = (int)n->os_index;
				c.node_cpus = f->bitmap_weight(n->cpuset);
				break;
			}
		}
		if (l2) {
			c.l2_bytes = (size_t)l2->attr->cache.size;
			c.l2_shared = f->bitmap_weight(l2->cpuset);
		}
		if (llc) {
			c.llc_bytes = (size_t)llc->attr->cache.size;
			c.llc_shared = f->bitmap_weight(llc->cpuset);
			c.llc_level = cache_level(llc);
		}
		pcpm_cpu_cache_derive(&c);
		cpus[pu->os_index] = c;
	}
	f->topology_destroy(t);
	return npu;
}
