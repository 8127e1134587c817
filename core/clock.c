/*
 * clock.c - the allocator's clocks (see clock.h): the monotonic clock read through the
 * kernel's vDSO without libc, and the time-stamp counter's rate.  Below os.c (its lock waits
 * read the clock); calls libc's getauxval and the kernel only.
 */
#define _GNU_SOURCE
#include "clock.h"

#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef unlikely
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif

/*
 * The clock without libc's clock_gettime: a program may wrap that function and look its
 * target up with dlsym, which waits for the loader's lock - and pcpm_lock_wait reads the
 * clock while it waits for the init lock, which the loader lock's holder may need (issue 26).
 * The kernel's vDSO function is found once in the vDSO's own dynamic symbol table (the ELF
 * image the kernel maps, at getauxval(AT_SYSINFO_EHDR)), as libc itself finds it; without a
 * vDSO (valgrind, another architecture), the system call.
 */
typedef int (*vdso_clock_fn)(clockid_t, struct timespec *);
#if defined(__x86_64__) || defined(__i386__)
#define VDSO_CLOCK_GETTIME "__vdso_clock_gettime"
#elif defined(__aarch64__) || defined(__riscv)
#define VDSO_CLOCK_GETTIME "__kernel_clock_gettime"
#endif
static vdso_clock_fn vdso_clock; /* resolved once; racy but idempotent */
static int vdso_state;		 /* 0 not looked up, 1 found, -1 none */

static vdso_clock_fn vdso_lookup(void)
{
#ifdef VDSO_CLOCK_GETTIME
	uintptr_t base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
	if (!base)
		return NULL;
	const ElfW(Ehdr) *eh = (const void *)base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32))
		return NULL;
	const ElfW(Phdr) *ph = (const void *)(base + eh->e_phoff);
	uintptr_t load = 0; /* what to add to the image's link-time addresses */
	const ElfW(Dyn) *dyn = NULL;
	bool loaded = false;
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !loaded) {
			load = base + ph[i].p_offset - ph[i].p_vaddr;
			loaded = true;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			dyn = (const void *)(base + ph[i].p_offset);
		}
	}
	if (!dyn || !loaded)
		return NULL;
	const ElfW(Sym) *sym = NULL;
	const char *str = NULL;
	const uint32_t *hash = NULL;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_SYMTAB)
			sym = (const void *)(load + dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_STRTAB)
			str = (const void *)(load + dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_HASH)
			hash = (const void *)(load + dyn->d_un.d_ptr);
	}
	if (!sym || !str || !hash)
		return NULL;
	for (uint32_t i = 0; i < hash[1]; i++) /* hash[1]: the symbol count (nchain) */
		if (ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC && sym[i].st_shndx != SHN_UNDEF &&
		    strcmp(str + sym[i].st_name, VDSO_CLOCK_GETTIME) == 0)
			return (vdso_clock_fn)(load + sym[i].st_value);
#endif
	return NULL;
}

static void now(clockid_t clock, struct timespec *ts)
{
	int st = __atomic_load_n(&vdso_state, __ATOMIC_ACQUIRE);
	if (unlikely(st == 0)) {
		vdso_clock_fn fn = vdso_lookup();
		__atomic_store_n(&vdso_clock, fn, __ATOMIC_RELAXED);
		__atomic_store_n(&vdso_state, fn ? 1 : -1, __ATOMIC_RELEASE);
		st = fn ? 1 : -1;
	}
	if (st > 0 && __atomic_load_n(&vdso_clock, __ATOMIC_RELAXED)(clock, ts) == 0)
		return;
	syscall(SYS_clock_gettime, clock, ts);
}

uint64_t pcpm_now_ms(void)
{
	struct timespec ts;
	now(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t pcpm_now_ns(void)
{
	struct timespec ts;
	now(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mark_cycles, mark_ns;

void pcpm_cycles_mark(void)
{
	mark_ns = pcpm_now_ns();
	mark_cycles = pcpm_cycles();
}

double pcpm_ns_per_cycle(void)
{
	if (!mark_ns)
		return 1.0;
	while (pcpm_now_ns() - mark_ns < 1000000) /* (a process younger than 1 ms) */
		__builtin_ia32_pause();
	uint64_t c = pcpm_cycles(), n = pcpm_now_ns();
	if (c <= mark_cycles)
		return 1.0;
	return (double)(n - mark_ns) / (double)(c - mark_cycles);
}
