/* core_as_malloc.c - pcpmalloc.h's calls for a test linked with the core (core_as_malloc.h). */
#include "api.h"
#include "pcpmalloc.h"
#include "stat.h"

const char *pcpmalloc_version(void)
{
	return PCPM_VERSION;
}

size_t pcpmalloc_stats_json(char *buf, size_t len)
{
	if (!pcpm_init()) {
		if (len)
			buf[0] = 0;
		return 0;
	}
	return pcpm_stats_json(buf, len);
}

long long pcpmalloc_stat(const char *name)
{
	struct pcpm_stats s;
	if (!pcpm_init())
		return -1;
	pcpm_stats_read(&s);
	return pcpm_stats_get(&s, name);
}
