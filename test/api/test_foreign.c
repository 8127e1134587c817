/*
 * test_foreign.c - blocks from glibc's own malloc reach pcpmalloc (issue 15, class 6).
 *
 * A plugin loaded with RTLD_DEEPBIND binds malloc to glibc's, and code may reach glibc's
 * __libc_malloc directly (here: looked up in libc.so.6's own scope): such blocks reach the program's free, realloc and
 * malloc_usable_size, which are pcpmalloc's.  A pointer outside pcpmalloc's memory goes to
 * glibc's own function: freed, resized with its contents, sized.  Blocks of glibc's heap
 * (small) and its own mappings (1 MiB) both.  pcpmalloc's own bad pointers (an interior
 * pointer, a double free) still abort with the one-line message.
 *
 * Usage: test_foreign PLUGIN.so [short|long]
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdbool.h>

#include "testutil.h"

/* glibc's own (pcpmalloc exports __libc_malloc too: a plain reference finds its alias) */
static void *(*glibc_malloc)(size_t);
static void *(*glibc_calloc)(size_t, size_t);

static void *(*plugin_alloc)(size_t);
static void *(*plugin_calloc)(size_t);

static bool all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* One glibc block through free/realloc/malloc_usable_size of the program (pcpmalloc). */
static void exercise(void *(*alloc)(size_t), size_t n, const char *what)
{
	unsigned char *p = alloc(n);
	CHECKF(p != NULL, "%s(%zu)", what, n);
	memset(p, 0x3c, n);
	size_t u = malloc_usable_size(p);
	CHECKF(u >= n && u < 2 * n + 8192, "%s(%zu): malloc_usable_size %zu", what, n, u);
	unsigned char *q = realloc(p, 2 * n + 100);
	CHECKF(q != NULL, "%s(%zu): realloc", what, n);
	CHECKF(all_bytes(q, n, 0x3c), "%s(%zu): realloc lost the contents", what, n);
	q = realloc(q, n / 2 + 1);
	CHECK(q != NULL && all_bytes(q, n / 2 + 1, 0x3c));
	free(q);
	free(alloc(n)); /* straight to free */
}

static void *libc_malloc(size_t n)
{
	return glibc_malloc(n);
}

static void *libc_calloc(size_t n)
{
	return glibc_calloc(1, n);
}

static void *via_plugin(size_t n)
{
	return plugin_alloc(n);
}

static void *via_plugin_calloc(size_t n)
{
	return plugin_calloc(n);
}

static void own_interior(void)
{
	char *p = malloc(100);
	tu_report_pointer(p + 16);
	free(p + 16);
}

static void own_double(void)
{
	char *p = malloc(5000);
	free(p);
	tu_report_pointer(p);
	free(p);
}

static void expect_abort(void (*fn)(void), const char *msg)
{
	struct tu_child_result r;
	tu_run_child(fn, &r, 0, "returned\n");
	CHECKF(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT, "status %d, stderr: %s",
	       r.status, r.err);
	char want[256];
	snprintf(want, sizeof(want), "pcpmalloc: free(): %s %s", msg, r.ptr);
	want[strcspn(want, "\n")] = '\0';
	const char *first;
	CHECKF(tu_lines_starting(r.err, "pcpmalloc: ", &first) == 1, "stderr: %s", r.err);
	CHECKF(strncmp(first, want, strlen(want)) == 0, "want \"%s\", got: %s", want, r.err);
}

int main(int argc, char **argv)
{
	tu_require_pcpmalloc("test_foreign");
	tu_watchdog(60);
	CHECKF(argc >= 2, "usage: %s PLUGIN.so [short|long]", argv[0]);
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
	CHECKF(h != NULL, "dlopen: %s", dlerror());
	plugin_alloc = (void *(*)(size_t))dlsym(h, "foreign_plugin_alloc");
	plugin_calloc = (void *(*)(size_t))dlsym(h, "foreign_plugin_calloc");
	CHECK(plugin_alloc && plugin_calloc);
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	CHECKF(libc != NULL, "dlopen libc.so.6: %s", dlerror());
	glibc_malloc = (void *(*)(size_t))dlsym(libc, "__libc_malloc");
	glibc_calloc = (void *(*)(size_t, size_t))dlsym(libc, "__libc_calloc");
	CHECK(glibc_malloc && glibc_calloc);
	CHECKF((void *)glibc_malloc != dlsym(RTLD_DEFAULT, "__libc_malloc"),
	       "libc.so.6's __libc_malloc is pcpmalloc's alias");
	static const size_t sizes[] = {1, 24, 200, 5000, 70000, 1 << 20};
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		exercise(libc_malloc, sizes[i], "__libc_malloc");
		exercise(libc_calloc, sizes[i], "__libc_calloc");
		exercise(via_plugin, sizes[i], "RTLD_DEEPBIND plugin malloc");
		exercise(via_plugin_calloc, sizes[i], "RTLD_DEEPBIND plugin calloc");
	}
	/* realloc(p, 0) of a glibc block frees it, as for any block */
	void *z = glibc_malloc(40);
	CHECK(realloc(z, 0) == NULL);
	expect_abort(own_interior, "invalid pointer");
	expect_abort(own_double, "double free");
	printf("test_foreign: ok\n");
	return 0;
}
