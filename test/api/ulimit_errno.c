/*
 * ulimit_errno.c - a successful call leaves errno alone, also when it succeeded after a
 * path that failed on the way: run under `ulimit -v` (meson: 400 MiB, both modes) with freed
 * huge blocks kept (cached, or quarantined in secure mode), realloc of a small block to
 * 150 MiB may first fail to grow in place or to map a new run, then succeed by another
 * way.  Secure mode's realloc left errno at ENOMEM there (a breaker's run, ninth round).
 * Then the limit is reached for real: NULL + ENOMEM.
 */
#define _GNU_SOURCE
#include <sys/resource.h>

#include "testutil.h"

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	tu_require_pcpmalloc("ulimit_errno");
	struct rlimit rl;
	CHECK(getrlimit(RLIMIT_AS, &rl) == 0);
	CHECKF(rl.rlim_cur != RLIM_INFINITY, "run me under ulimit -v (meson does)");
	for (int i = 0; i < 6; i++) {
		char *h = malloc(40u << 20);
		if (h)
			memset(h, 1, 4096);
		free(h);
	}
	unsigned ok = 0;
	for (int r = 0; r < 8; r++) {
		char *p = malloc(100);
		CHECK(p != NULL);
		strcpy(p, "hello");
		errno = 0;
		char *q = realloc(p, 150u << 20);
		if (q) {
			CHECKF(errno == 0, "round %d: realloc to 150 MiB succeeded with errno %d", r, errno);
			CHECK(strcmp(q, "hello") == 0);
			ok++;
			p = q;
		} else {
			CHECKF(errno == ENOMEM, "round %d: realloc failed with errno %d", r, errno);
		}
		free(p);
	}
	CHECKF(ok > 0, "no realloc to 150 MiB succeeded under %llu MiB",
	       (unsigned long long)rl.rlim_cur >> 20);
	errno = 0;
	CHECK(malloc((size_t)rl.rlim_cur) == NULL && errno == ENOMEM);
	printf("ulimit_errno: %u of 8 reallocs to 150 MiB succeeded, errno untouched\n", ok);
	return 0;
}
