/*
 * tunables_main.c - prints the PCPMALLOC_* table (config.c) as Markdown, the table the
 * README carries; test/unit checks that the two agree.
 */
#include "config.h"

#include <stdio.h>

int main(void)
{
	size_t n;
	const struct pcpm_tunable_doc *d = pcpm_tunable_docs(&n);
	printf("| variable | default | values | meaning |\n|---|---|---|---|\n");
	for (size_t i = 0; i < n; i++) {
		printf("| `%s` | %s | ", d[i].name, d[i].deflt);
		/* enum values are written a|b|c; '|' would end the Markdown cell */
		for (const char *s = d[i].range; *s; s++)
			fputs(*s == '|' ? " \\| " : (char[]){ *s, 0 }, stdout);
		printf(" | %s |\n", d[i].meaning);
	}
	return 0;
}
