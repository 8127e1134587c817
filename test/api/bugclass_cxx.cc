/*
 * bugclass_cxx.cc - the C++ cases of test_bugclass.c: operator delete given the wrong type,
 * the wrong form (scalar / array) or a wrong size.  Each function does one bug on a block of
 * about n bytes and returns; test_bugclass.c runs it in a forked child and classifies how the
 * child ended.  Built with -fsized-deallocation, so `delete p` passes sizeof(*p) to
 * operator delete (the size the allocator can check).
 */
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

extern "C" {
void cxx_delete_wrong_type(size_t n);
void cxx_delete_scalar_of_array(size_t n);
void cxx_delete_scalar_of_array_dtor(size_t n);
void cxx_delete_array_of_scalar(size_t n);
void cxx_sized_delete_mismatch(size_t n);
}

namespace {

template <typename T> T opaque(T v)
{
	volatile T x = v;
	return x;
}

/* A base without a virtual destructor: deleting a derived object through it passes
 * sizeof(Base) to operator delete (undefined behaviour that compilers accept silently). */
struct Base {
	long tag;
};

template <size_t Extra> struct Derived : Base {
	char payload[Extra];
};

template <size_t Extra> void wrong_type()
{
	Base *b = opaque<Base *>(new Derived<Extra>());
	b->tag = 1;
	delete b; /* the bug: operator delete(b, sizeof(Base)) for a larger block */
}

/* A type with a destructor: new[] stores the element count in front of the array. */
struct Counted {
	long v;
	~Counted() { v = 0; }
};

} // namespace

void cxx_delete_wrong_type(size_t n)
{
	if (n <= 8)
		wrong_type<8>();
	else if (n <= 4096)
		wrong_type<4096>();
	else
		wrong_type<262144>();
}

/* new char[n], then the scalar delete: operator delete(p, 1) for an n-byte block. */
void cxx_delete_scalar_of_array(size_t n)
{
	char *p = opaque<char *>(new char[n]);
	memset(p, 'a', n);
	delete opaque(p); /* the bug */
}

/* new Counted[k], then the scalar delete: the pointer is 8 bytes into the block (after the
 * count new[] stored), so operator delete gets an interior pointer. */
void cxx_delete_scalar_of_array_dtor(size_t n)
{
	Counted *p = opaque<Counted *>(new Counted[n / sizeof(Counted)]);
	delete opaque(p); /* the bug */
}

/* new long, then the array delete: no destructor, so no count; operator delete[](p) of a
 * block from operator new (the form is all that is wrong). */
void cxx_delete_array_of_scalar(size_t n)
{
	(void)n;
	long *p = opaque<long *>(new long);
	*p = 1;
	delete[] opaque(p); /* the bug */
}

/* A sized operator delete given a size the block never had (n + 64 for an n-byte block). */
void cxx_sized_delete_mismatch(size_t n)
{
	void *p = opaque<void *>(::operator new(n));
	::operator delete(p, opaque<size_t>(n + 64)); /* the bug */
}
