/*
 * foreign_plugin.c - a plugin that test_foreign loads with RTLD_DEEPBIND: its own scope
 * (itself, then libc) comes before the global one, so its malloc is glibc's even when
 * pcpmalloc is preloaded.  It hands those blocks to the program.
 */
#include <stdlib.h>
#include <string.h>

void *foreign_plugin_alloc(size_t n)
{
	char *p = malloc(n);
	if (p)
		memset(p, 0x3c, n);
	return p;
}

void *foreign_plugin_calloc(size_t n)
{
	return calloc(1, n);
}
