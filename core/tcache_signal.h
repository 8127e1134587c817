/*
 * tcache_signal.h - signal handlers and the thread cache (tcache_signal.c): preload/signal.c
 * runs every handler the program installs between pcpm_signal_enter() and
 * pcpm_signal_exit(), which park the calling thread's stacks while it runs.
 * Thread-safety: the calling thread's own cache only.
 */
#ifndef PCPM_TCACHE_SIGNAL_H
#define PCPM_TCACHE_SIGNAL_H

#include "tcache.h"

/* Park the thread's stacks while a handler runs and put them back (kernel-pcp.md §12.2).
 * Async-signal-safe, nest; exit leaves every signal blocked (call it last). */
void pcpm_signal_enter(void);
void pcpm_signal_exit(void);

#endif
