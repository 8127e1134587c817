/*
 * realloc.h - the default mode's realloc (realloc.c): a block stays or resizes in place
 * where its class, page run or mapping allows, else moves (malloc, copy, free).  Sizes in
 * bytes; NULL + ENOMEM with the old block untouched; thread-safe.
 */
#ifndef PCPM_REALLOC_H
#define PCPM_REALLOC_H

#include <stddef.h>

/* p != NULL, 0 < size <= PTRDIFF_MAX (api.c handles the other cases for every mode). */
void *dfl_realloc(void *p, size_t size);

#endif
