/*
 * test_addrspace.c - address space follows the heap (issue 15, class 8).
 *
 * 1. With a 2 MiB heap (4-64 KiB blocks, live) the whole process maps at most 256 MiB
 *    (VmSize; about 10 MiB under glibc): the arena's address space is reserved in steps that
 *    follow the heap, not 64 GiB at once (tools and tests that watch the mapped size).
 * 2. setrlimit(RLIMIT_AS) lowered after the first allocation still binds: with 200 MiB of
 *    address space left, 1 MiB blocks (not touched) stop before 264 MiB with NULL and
 *    errno ENOMEM - never a crash - and small blocks, the blocks freed, work again.
 *
 * Each part runs in a child under a 20 s deadline (a crash or hang is a failure).
 *
 * Usage: test_addrspace [short|long]
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <sys/resource.h>

#include "testutil.h"

#define HEAP (2 * TU_MIB)
#define VM_ALLOWED (256 * TU_MIB)
#define LIMIT_ROOM (200 * TU_MIB)
#define LIMIT_SLACK (64 * TU_MIB)

static void small_heap_case(void)
{
	static void *b[1024];
	size_t used = 0, n = 0;
	uint64_t rng = 99;
	while (used < HEAP) {
		size_t sz = tu_rand_range(&rng, 4096, 64 << 10);
		b[n] = malloc(sz);
		CHECK(b[n] != NULL);
		memset(b[n], 1, sz);
		used += sz;
		n++;
	}
	long long vm = tu_vm_bytes();
	CHECK(vm > 0);
	printf("test_addrspace: VmSize %lld MiB with a %zu KiB heap\n", vm >> 20, used >> 10);
	CHECKF(vm <= (long long)VM_ALLOWED, "VmSize %lld MiB with a %zu KiB heap", vm >> 20,
	       used >> 10);
	for (size_t i = 0; i < n; i++)
		free(b[i]);
}

static void rlimit_case(void)
{
	void *first = malloc(64 << 10); /* the arena is in use before the limit */
	CHECK(first != NULL);
	long long vm = tu_vm_bytes();
	struct rlimit rl = {(rlim_t)vm + LIMIT_ROOM, (rlim_t)vm + LIMIT_ROOM};
	CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
	enum { MAX_BLOCKS = 1024 };
	static void *b[MAX_BLOCKS];
	int n = 0, err = 0;
	while (n < MAX_BLOCKS) {
		errno = 0;
		b[n] = malloc(TU_MIB);
		if (!b[n]) {
			err = errno;
			break;
		}
		n++;
	}
	printf("test_addrspace: %d MiB allocated under a limit %zu MiB above the mapped size\n",
	       n, LIMIT_ROOM >> 20);
	CHECKF(n < MAX_BLOCKS, "RLIMIT_AS did not bind: %d MiB allocated", n);
	CHECKF(err == ENOMEM, "errno %d after malloc returned NULL", err);
	CHECKF((size_t)n * TU_MIB <= LIMIT_ROOM + LIMIT_SLACK, "%d MiB allocated", n);
	for (int i = 0; i < n; i++)
		free(b[i]);
	void *p = malloc(100), *q = malloc(TU_MIB);
	CHECK(p != NULL && q != NULL);
	free(p);
	free(q);
	free(first);
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	tu_require_pcpmalloc("test_addrspace");
	bool ok = tu_status_ok("VmSize of a 2 MiB heap", tu_run_deadline(small_heap_case, 20));
	ok &= tu_status_ok("RLIMIT_AS lowered after the first allocation",
			   tu_run_deadline(rlimit_case, 20));
	CHECK(ok);
	printf("test_addrspace: ok\n");
	return 0;
}
