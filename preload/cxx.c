/*
 * cxx.c - C++ operator new/delete (plain, nothrow, array, sized, aligned), written in C
 * with their Itanium-ABI names so libpcpmalloc.so links nothing but libc.
 *
 * On failure the throwing forms call std::get_new_handler()'s handler and retry, and
 * without a handler throw std::bad_alloc.  The C++ runtime symbols they need are weak:
 * any program that calls operator new has libstdc++ loaded, so they resolve there.
 * Without them (impossible in practice) the failure aborts with a pcpmalloc message.
 */
#include "api.h"

#define EXPORT __attribute__((visibility("default")))

typedef void (*new_handler_t)(void);
extern new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void *__cxa_allocate_exception(size_t) __attribute__((weak));
extern void __cxa_throw(void *, void *, void (*)(void *)) __attribute__((weak, noreturn));
extern char _ZTISt9bad_alloc[] __attribute__((weak));	  /* typeinfo for std::bad_alloc */
extern void *_ZTVSt9bad_alloc[] __attribute__((weak));	  /* its vtable */
extern void _ZNSt9bad_allocD1Ev(void *) __attribute__((weak)); /* its destructor */

static PCPM_COLD void throw_bad_alloc(size_t size)
{
	if (__cxa_allocate_exception && __cxa_throw && _ZTISt9bad_alloc && _ZTVSt9bad_alloc) {
		void **e = __cxa_allocate_exception(sizeof(void *));
		/* the object's vptr points past offset-to-top and the typeinfo pointer */
		*e = &_ZTVSt9bad_alloc[2];
		__cxa_throw(e, _ZTISt9bad_alloc, _ZNSt9bad_allocD1Ev);
	}
	pcpm_fatal("operator new(%zu): out of memory", size);
}

/*
 * The failure loop of ::operator new: call the new_handler and retry; without a handler,
 * throw bad_alloc (nothrow forms return NULL instead).  A handler that throws from a
 * nothrow form is not caught here (that would need the C++ runtime's catch support).
 */
static PCPM_NOINLINE void *new_fail(size_t size, size_t align, bool nothrow)
{
	for (;;) {
		new_handler_t h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
		if (!h) {
			if (nothrow)
				return NULL;
			throw_bad_alloc(size);
		}
		h();
		void *p = align > 16 ? pcpm_memalign(align, size) : pcpm_malloc(size);
		if (p)
			return p;
	}
}

static inline __attribute__((always_inline)) void *op_new(size_t size, bool nothrow)
{
	void *p = pcpm_malloc(size);
	return likely(p) ? p : new_fail(size, 0, nothrow);
}

static inline void *op_new_aligned(size_t size, size_t align, bool nothrow)
{
	void *p = pcpm_memalign(align, size);
	return likely(p) ? p : new_fail(size, align, nothrow);
}

EXPORT void *_Znwm(size_t n) { return op_new(n, false); }
EXPORT void *_Znam(size_t n) { return op_new(n, false); }
EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return op_new(n, true); }
EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return op_new(n, true); }
EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return op_new_aligned(n, a, false); }
EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) { return op_new_aligned(n, a, false); }
EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt)
{
	(void)nt;
	return op_new_aligned(n, a, true);
}
EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt)
{
	(void)nt;
	return op_new_aligned(n, a, true);
}

EXPORT void _ZdlPv(void *p) { pcpm_free_call(p, "operator delete"); }
EXPORT void _ZdaPv(void *p) { pcpm_free_call(p, "operator delete[]"); }
EXPORT void _ZdlPvm(void *p, size_t n) { pcpm_free_sized_call(p, n, "operator delete"); }
EXPORT void _ZdaPvm(void *p, size_t n) { pcpm_free_sized_call(p, n, "operator delete[]"); }
EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; pcpm_free_call(p, "operator delete"); }
EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; pcpm_free_call(p, "operator delete[]"); }
EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; pcpm_free_call(p, "operator delete"); }
EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; pcpm_free_call(p, "operator delete[]"); }
EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a)
{
	(void)a;
	pcpm_free_sized_call(p, n, "operator delete");
}
EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a)
{
	(void)a;
	pcpm_free_sized_call(p, n, "operator delete[]");
}
EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt)
{
	(void)a;
	(void)nt;
	pcpm_free_call(p, "operator delete");
}
EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt)
{
	(void)a;
	(void)nt;
	pcpm_free_call(p, "operator delete[]");
}
