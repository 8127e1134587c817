/*
 * secure.h - PCPMALLOC_SECURE=1, the hardened mode: checks that cost time and memory, so
 * they are off by default and the default fast path does not pay for them (the mode turns
 * the thread caches off - capacity 0 - so every call reaches the slow paths, where one
 * predictable branch on pcpm_secure leads to per-thread stacks of their own and here).
 *
 *  - small blocks (slab objects): a block of n bytes takes a slot of at least n + 8 bytes;
 *    the bytes from n to the trailer hold a canary, the last 8 bytes of the slot a trailer
 *    (n ^ address ^ key).  free() checks the trailer and the canary's first and last 8 bytes
 *    (an overflow of 1 byte or more from the end of the block hits the first): reported as
 *    "pcpmalloc: free(): heap overflow past the end of 0x...".
 *  - freed slab objects are filled with a junk byte (0xdf) past their two link words, up to
 *    SECURE_JUNK_MAX bytes; malloc checks three of its words when it hands the object out
 *    again (all of it on one reuse in SECURE_JUNK_SAMPLE per thread): a write into a free
 *    block is reported as "pcpmalloc: malloc(): write after free in 0x...".
 *  - slabs hand out their objects in random order (SLAB_FREELIST_RANDOM), shuffled when the
 *    slab is carved.
 *  - large blocks of 64 KiB and more and huge mappings end in a PROT_NONE guard page (the bytes
 *    between the end of the request and the guard carry the canary), freed large blocks are
 *    junk-filled (first SECURE_JUNK_MAX bytes), freed huge mappings are cached PROT_NONE;
 *    the page descriptor array and the metadata chunks get guard pages too.
 * Thread-safety: the functions only touch the block they are given.  Messages: one line,
 * then abort() (pcpm_fatal).
 */
#ifndef PCPM_SECURE_H
#define PCPM_SECURE_H

#include "tcache.h"

#define SECURE_TRAILER 8 /* bytes of a small slot that hold the trailer */
#define SECURE_JUNK 0xdf /* fill of freed memory */
/* Bytes of a freed block (slab object or large block) that get the junk fill. */
#define SECURE_JUNK_MAX 4096
/* One reuse of a slab object in this many (per thread) checks all of its junk; the others
 * check the two words after the link and the last junk word. */
#define SECURE_JUNK_SAMPLE 64
/* Large blocks from this size on get a guard page: below it the two mprotect calls per
 * malloc/free pair (and the split arena mapping) would cost more than the block's use;
 * smaller page runs have the canary only. */
#define SECURE_GUARD_MIN (64UL << 10)

/* pcpm_cfg.secure, copied at init for the slow paths' branch. */
extern int pcpm_secure PCPM_HIDDEN;

/* A slab object of slot bytes becomes a block of n bytes (n + 8 <= slot): checks that the
 * object's junk is intact (call names the API call), writes canary and trailer. */
void *secure_arm_small(void *p, size_t slot, size_t n, const char *call);
/* The n recorded in a small block's trailer; aborts when the trailer is corrupt. */
size_t secure_small_size(const void *p, size_t slot, const char *call);
/* realloc in place: checks the canary and trailer of a live small block, then moves them to
 * the end of its new size n (n + 8 <= slot). */
void secure_resize_small(void *p, size_t slot, size_t n, const char *call);
/* Checks canary and trailer of a small block being freed, then junk-fills it. */
void secure_free_small(void *p, size_t slot, const char *call);

/* The canary of [from, to) - its first and last 8 bytes, what the check reads - and its
 * check (small blocks, large blocks, huge mappings); to is 8-byte aligned in all three. */
void secure_fill_canary(char *from, char *to);
void secure_check_canary(const void *p, const char *from, const char *to, const char *call);

/* Builds a new slab's freelist in random order, every object junk-filled and marked free. */
void secure_slab_init(struct page *head, uint32_t size, uint32_t objects);

/* A random 64-bit value from a per-process generator (splitmix64 over an atomic counter). */
uint64_t secure_random(void);

#endif
