/*
 * live.h - the live statistics page (PCPMALLOC_LIVE=1): /dev/shm/pcpmalloc.PID, rewritten
 * about once a second by the background worker (vmstat.c) with the statistics object that
 * PCPMALLOC_STATS=json prints at exit, and removed at exit.  `pcpmalloc top PID` reads it;
 * nothing stops or traces the process, and no allocation path ever touches the page (the
 * fast paths do not know it exists), so it costs nothing there.
 *
 * The page: a 64-byte header (struct pcpm_live_header), then the JSON text.  A reader takes
 * seq, copies len bytes of text, and takes seq again: equal and even = a consistent copy
 * (a seqlock, as the kernel's vDSO data page).
 * Thread-safety: pcpm_live_publish runs on the worker thread only; pcpm_live_exit at exit.
 */
#ifndef PCPM_LIVE_H
#define PCPM_LIVE_H

#include <stdint.h>

#define PCPM_LIVE_MAGIC "PCPMLIVE"
#define PCPM_LIVE_VERSION 1

struct pcpm_live_header {
	char magic[8];		/* "PCPMLIVE" */
	uint32_t version;	/* PCPM_LIVE_VERSION */
	uint32_t header_size;	/* 64: the text starts here */
	uint64_t seq;		/* odd while the text is rewritten */
	uint64_t len;		/* bytes of text */
	uint64_t updated_ms;	/* wall clock (CLOCK_REALTIME) of the last rewrite, ms */
	uint64_t interval_ms;	/* how often it is rewritten (PCPM_VMSTAT_PUBLISH_MS) */
	uint32_t pid;		/* the process that writes it */
	uint32_t reserved;
	uint64_t capacity;	/* bytes the text may take */
};

/* Creates the page on first use (or again in a fork child: its own pid) and rewrites it. */
void pcpm_live_publish(void);

/* At exit: removes this process's page. */
void pcpm_live_exit(void);

#endif
