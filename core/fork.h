/*
 * fork.h - the pthread_atfork handlers (fork.c): every allocator lock taken in the allocator's
 * lock order before fork(), released in the parent, reset in the child (their owners do not
 * exist there).  preload/ registers them; called by the thread that forks, with no allocator
 * lock held.
 */
#ifndef PCPM_FORK_H
#define PCPM_FORK_H

void pcpm_fork_prepare(void);
void pcpm_fork_parent(void);
void pcpm_fork_child(void);

#endif
