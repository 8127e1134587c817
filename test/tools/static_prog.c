/*
 * static_prog.c - a statically linked program (test/tools/test_cmd.sh): no dynamic loader
 * reads LD_PRELOAD for it, so `pcpmalloc run` must warn that it runs without pcpmalloc.
 */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	char *p = malloc(100);
	puts(p ? "static" : "no memory");
	free(p);
	return 0;
}
