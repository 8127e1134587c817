/*
 * sizing.c - pcp sizes from a CPU's cache share (see sizing.h).
 *
 *   batch    = zone_batchsize(heap pages, >= 1 GiB)                        (63 at 4 KiB)
 *   high_min = 4 * batch
 *   high_max = pages of (L2 share + LLC slice), never below 4 * batch        (policy cache)
 *   or, policy heap (§12.4): high_min = max(low_wmark / split, 4 * batch),
 *                            high_max = max(heap / 8 / split, 4 * batch)
 *   PCPF_FREE_HIGH_BATCH     = slice pages > slice_factor * batch           (§6, factor 3)
 */
#include "sizing.h"

#define SZ_PAGE_SHIFT 12

int pcpm_zone_batchsize(size_t managed_pages)
{
	size_t b = managed_pages >> 12;
	size_t cap = ((size_t)256 << 10) >> SZ_PAGE_SHIFT;
	if (b > cap)
		b = cap;
	if (b <= 1)
		return 1;
	b = b + b / 2;
	size_t p = 1;
	while (p * 2 <= b)
		p *= 2;
	return (int)(p - 1);
}

static size_t isqrt(size_t x)
{
	size_t r = 0;
	while ((r + 1) * (r + 1) <= x)
		r++;
	return r;
}

size_t pcpm_low_wmark_pages(size_t managed_pages)
{
	size_t kbytes = managed_pages << (SZ_PAGE_SHIFT - 10);
	size_t min_kb = isqrt(16 * kbytes);
	if (min_kb < 128)
		min_kb = 128;
	if (min_kb > 262144)
		min_kb = 262144;
	size_t min = min_kb >> (SZ_PAGE_SHIFT - 10);
	size_t delta = managed_pages * 10 / 10000; /* watermark_scale_factor 10 */
	if (delta < min / 4)
		delta = min / 4;
	return min + delta;
}

void pcpm_size_pcp(const struct pcpm_size_in *in, struct pcpm_size_out *out)
{
	size_t heap = in->heap_pages < PCPM_SIZING_FLOOR_PAGES ? PCPM_SIZING_FLOOR_PAGES : in->heap_pages;
	int batch = in->batch > 0 ? in->batch : pcpm_zone_batchsize(heap);
	long floor4 = 4L * batch;
	long hmin, hmax;
	if (in->policy == HIGH_POLICY_HEAP) {
		long split = in->split > 0 ? in->split : 1;
		hmin = (long)(pcpm_low_wmark_pages(heap) / (size_t)split);
		hmax = (long)(heap / 8 / (size_t)split);
		hmin = hmin > floor4 ? hmin : floor4;
		hmax = hmax > floor4 ? hmax : floor4;
	} else {
		hmin = floor4;
		size_t share = (in->l2_share_bytes + in->slice_bytes) >> SZ_PAGE_SHIFT;
		if (share > (size_t)1 << 22)
			share = (size_t)1 << 22;
		hmax = (long)share > floor4 ? (long)share : floor4;
	}
	if (in->high_min > 0)
		hmin = in->high_min;
	if (in->high_max > 0)
		hmax = in->high_max;
	if (hmax < hmin)
		hmax = hmin;
	out->batch = batch;
	out->high_min = (int)hmin;
	out->high_max = (int)hmax;
	int factor = in->slice_factor > 0 ? in->slice_factor : 3;
	int big = (in->slice_bytes >> SZ_PAGE_SHIFT) > (size_t)factor * (size_t)batch;
	out->free_high_batch = in->free_high_batch == 1 || (in->free_high_batch < 0 && big);
}
