/*
 * live.c - the live statistics page (see live.h).  Owns /dev/shm/pcpmalloc.PID: creates it,
 * rewrites it with the stat layer's JSON (pcpm_stats_json, stat.h) under a seqlock, removes
 * it at exit.  Calls the stat layer, config and os (the shared mapping).  Runs on the
 * background worker (vmstat.c calls it through pcpm_vmstat_publish, which preload sets) and
 * from preload's exit hook.
 */
#define _GNU_SOURCE
#include "live.h"
#include "config.h"
#include "os.h"
#include "stat.h"
#include "vmstat.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(struct pcpm_live_header) == 64, "the live page's header is 64 bytes");

static struct pcpm_live_header *page; /* this process's page, or NULL */
static size_t page_bytes;
static int page_pid;
static char page_path[64];
static int failed; /* creation failed once: warned, not retried */
static _Atomic int exiting; /* set at exit: the worker may still run, nothing more is written */

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool create(int pid)
{
	snprintf(page_path, sizeof(page_path), "/dev/shm/pcpmalloc.%d", pid);
	/* room for the object several times over: the CPUs and zones it lists are fixed */
	size_t need = sizeof(struct pcpm_live_header) + 4 * pcpm_stats_json(NULL, 0) + (64 << 10);
	page_bytes = ALIGN_UP(need, PAGE_SIZE);
	page = pcpm_os_map_shared_file(page_path, page_bytes);
	if (!page) {
		if (!failed)
			pcpm_warn("PCPMALLOC_LIVE: cannot create %s: %s; no live page", page_path,
				  strerror(errno));
		failed = 1;
		return false;
	}
	page_pid = pid;
	memcpy(page->magic, PCPM_LIVE_MAGIC, 8);
	page->version = PCPM_LIVE_VERSION;
	page->header_size = sizeof(struct pcpm_live_header);
	page->interval_ms = PCPM_VMSTAT_PUBLISH_MS;
	page->pid = (uint32_t)pid;
	page->capacity = page_bytes - sizeof(struct pcpm_live_header);
	return true;
}

void pcpm_live_publish(void)
{
	if (!pcpm_cfg.live || failed || atomic_load_explicit(&exiting, memory_order_relaxed))
		return;
	int pid = (int)getpid();
	if (page && page_pid != pid) {
		/* a fork child: the parent's page stays the parent's */
		pcpm_os_unmap(page, page_bytes);
		page = NULL;
	}
	if (!page && !create(pid))
		return;
	char *text = (char *)page + sizeof(struct pcpm_live_header);
	uint64_t seq = __atomic_load_n(&page->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&page->seq, seq | 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	size_t n = pcpm_stats_json(text, page->capacity);
	if (n >= page->capacity)
		n = 0; /* (cannot happen: sized for 4 times the object) */
	page->len = n;
	page->updated_ms = wall_ms();
	__atomic_store_n(&page->seq, (seq | 1) + 1, __ATOMIC_RELEASE);
}

void pcpm_live_exit(void)
{
	atomic_store(&exiting, 1);
	/* the page stays mapped: the worker thread may be rewriting it right now */
	if (page && page_pid == (int)getpid())
		unlink(page_path);
}
