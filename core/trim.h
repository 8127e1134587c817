/*
 * trim.h - malloc_trim and mallinfo in the default mode (trim.c).  Thread-safe.
 */
#ifndef PCPM_TRIM_H
#define PCPM_TRIM_H

#include <stddef.h>

/* malloc_trim: drains the pcps, flushes this thread's cache and every sheaf, frees empty
 * slabs and purges free memory; 1 when memory went back to the OS. */
int dfl_trim(void);
/* mallinfo(): bytes; racy sums, safe in signal handlers. */
struct pcpm_mallinfo {
	size_t arena, ordblks, hblks, hblkhd, uordblks, fordblks;
};
void pcpm_mallinfo(struct pcpm_mallinfo *mi);

#endif
