/*
 * test_cxx.cc - the C++ allocation functions under LD_PRELOAD=libpcpmalloc.so: plain, nothrow,
 * array, sized and aligned operator new/delete, failure (std::bad_alloc, nullptr, the
 * new_handler loop), and standard containers churned by several threads that free each other's
 * memory.
 *
 * pcpmalloc exports the operator new/delete family itself; the test checks that the symbols
 * the program binds to come from libpcpmalloc.so.
 */
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <malloc.h>

#include "testutil.h"

namespace {

template <typename T> T opaque(T v)
{
	volatile T x = v;
	return x;
}

void check_symbol_is_pcpmalloc(const char *mangled, const char *pretty)
{
	void *sym = dlsym(RTLD_DEFAULT, mangled);
	CHECKF(sym != nullptr, "%s (%s) not found", pretty, mangled);
	Dl_info info;
	CHECK(dladdr(sym, &info) != 0 && info.dli_fname != nullptr);
	CHECKF(std::strstr(info.dli_fname, "pcpmalloc") != nullptr,
	       "%s resolves to %s, not libpcpmalloc.so", pretty, info.dli_fname);
}

void test_symbols()
{
	if (!tu_pcp.version)
		return; /* debug mode on glibc */
	const struct {
		const char *mangled, *pretty;
	} syms[] = {
		{"_Znwm", "operator new(size_t)"},
		{"_Znam", "operator new[](size_t)"},
		{"_ZnwmRKSt9nothrow_t", "operator new(size_t, nothrow_t)"},
		{"_ZnamRKSt9nothrow_t", "operator new[](size_t, nothrow_t)"},
		{"_ZnwmSt11align_val_t", "operator new(size_t, align_val_t)"},
		{"_ZnamSt11align_val_t", "operator new[](size_t, align_val_t)"},
		{"_ZnwmSt11align_val_tRKSt9nothrow_t", "operator new(size_t, align_val_t, nothrow_t)"},
		{"_ZnamSt11align_val_tRKSt9nothrow_t",
		 "operator new[](size_t, align_val_t, nothrow_t)"},
		{"_ZdlPv", "operator delete(void*)"},
		{"_ZdaPv", "operator delete[](void*)"},
		{"_ZdlPvm", "operator delete(void*, size_t)"},
		{"_ZdaPvm", "operator delete[](void*, size_t)"},
		{"_ZdlPvSt11align_val_t", "operator delete(void*, align_val_t)"},
		{"_ZdaPvSt11align_val_t", "operator delete[](void*, align_val_t)"},
		{"_ZdlPvmSt11align_val_t", "operator delete(void*, size_t, align_val_t)"},
		{"_ZdaPvmSt11align_val_t", "operator delete[](void*, size_t, align_val_t)"},
		{"_ZdlPvRKSt9nothrow_t", "operator delete(void*, nothrow_t)"},
		{"_ZdlPvSt11align_val_tRKSt9nothrow_t",
		 "operator delete(void*, align_val_t, nothrow_t)"},
	};
	for (const auto &s : syms)
		check_symbol_is_pcpmalloc(s.mangled, s.pretty);
}

void fill_check(void *p, size_t n, uint64_t serial)
{
	CHECK(p != nullptr);
	uint64_t seed = tu_seed(p, serial);
	tu_fill(p, n, seed);
	size_t bad = tu_verify(p, n, seed);
	CHECKF(bad == SIZE_MAX, "%zu-byte block: byte %zu", n, bad);
}

struct alignas(64) Line {
	unsigned char b[64];
};

struct alignas(4096) PageObj {
	unsigned char b[100];
};

void test_plain()
{
	const size_t sizes[] = {0, 1, 7, 16, 100, 1000, 4096, 65536, 300000, 5u << 20};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		void *p = ::operator new(n);
		CHECKF(p != nullptr, "operator new(%zu)", n);
		CHECK_ALIGNED(p, __STDCPP_DEFAULT_NEW_ALIGNMENT__);
		fill_check(p, n, i);
		::operator delete(p);

		p = ::operator new(n);
		fill_check(p, n, i + 1);
		::operator delete(p, n); /* sized delete */

		p = ::operator new[](n);
		fill_check(p, n, i + 2);
		::operator delete[](p);

		p = ::operator new[](n);
		fill_check(p, n, i + 3);
		::operator delete[](p, n);

		p = ::operator new(n, std::nothrow);
		CHECK(p != nullptr);
		fill_check(p, n, i + 4);
		::operator delete(p, std::nothrow);

		p = ::operator new[](n, std::nothrow);
		CHECK(p != nullptr);
		fill_check(p, n, i + 5);
		::operator delete[](p, std::nothrow);
	}
	/* operator new(0) returns distinct pointers. */
	void *a = ::operator new(0), *b = ::operator new(0);
	CHECK(a != nullptr && b != nullptr && a != b);
	::operator delete(a);
	::operator delete(b);
	/* operator delete(nullptr) in every form. */
	::operator delete(nullptr);
	::operator delete[](nullptr);
	::operator delete(nullptr, std::align_val_t(64));

	/* new-expressions. */
	int *x = new int(42);
	CHECK_EQ(*x, 42);
	delete x;
	std::string *s = new std::string(1000, 'q');
	CHECK(s->size() == 1000 && (*s)[999] == 'q');
	delete s;
	long *arr = new long[1000]();
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(arr[i], 0);
	delete[] arr;
	/* A type with a destructor: new[] stores a cookie before the elements. */
	std::string *sa = new std::string[50];
	for (int i = 0; i < 50; i++)
		sa[i].assign(100 + (size_t)i, 'a');
	delete[] sa;
}

void test_aligned()
{
	const size_t aligns[] = {16, 32, 64, 128, 256, 4096, 65536, 1u << 20};
	const size_t sizes[] = {1, 64, 100, 4096, 5000, 200000, 3u << 20};
	uint64_t serial = 0;
	for (size_t al : aligns) {
		for (size_t n : sizes) {
			std::align_val_t a{al};
			void *p = ::operator new(n, a);
			CHECK_ALIGNED(p, al);
			fill_check(p, n, serial++);
			::operator delete(p, a);

			p = ::operator new(n, a);
			CHECK_ALIGNED(p, al);
			fill_check(p, n, serial++);
			::operator delete(p, n, a); /* sized aligned delete */

			p = ::operator new[](n, a);
			CHECK_ALIGNED(p, al);
			fill_check(p, n, serial++);
			::operator delete[](p, a);

			p = ::operator new[](n, a);
			CHECK_ALIGNED(p, al);
			fill_check(p, n, serial++);
			::operator delete[](p, n, a);

			p = ::operator new(n, a, std::nothrow);
			CHECK(p != nullptr);
			CHECK_ALIGNED(p, al);
			fill_check(p, n, serial++);
			::operator delete(p, a, std::nothrow);

			p = ::operator new[](n, a, std::nothrow);
			CHECK(p != nullptr);
			CHECK_ALIGNED(p, al);
			fill_check(p, n, serial++);
			::operator delete[](p, a, std::nothrow);
		}
	}
	/* new-expressions of over-aligned types go through the align_val_t forms. */
	Line *l = new Line;
	CHECK_ALIGNED(l, 64);
	std::memset(l->b, 1, sizeof(l->b));
	delete l;
	Line *la = new Line[33];
	CHECK_ALIGNED(la, 64);
	std::memset(la, 2, sizeof(Line) * 33);
	delete[] la;
	PageObj *po = new PageObj;
	CHECK_ALIGNED(po, 4096);
	delete po;
	std::vector<PageObj> vp(17);
	CHECK_ALIGNED(vp.data(), 4096);
	auto up = std::make_unique<Line[]>(5);
	CHECK_ALIGNED(up.get(), 64);
}

int handler_calls;

void handler_then_give_up()
{
	handler_calls++;
	/* The next failure throws bad_alloc. */
	std::set_new_handler(nullptr);
}

void test_failure()
{
	const size_t impossible[] = {SIZE_MAX / 2, SIZE_MAX - 4095, (size_t)PTRDIFF_MAX + 1};
	for (size_t n : impossible) {
		bool thrown = false;
		try {
			char *c = new char[opaque(n)];
			c[0] = 1;
			delete[] c;
		} catch (const std::bad_alloc &) {
			thrown = true;
		}
		CHECKF(thrown, "new char[%#zx] did not throw bad_alloc", n);

		thrown = false;
		try {
			void *p = ::operator new(opaque(n));
			::operator delete(p);
		} catch (const std::bad_alloc &) {
			thrown = true;
		}
		CHECKF(thrown, "operator new(%#zx) did not throw", n);

		thrown = false;
		try {
			void *p = ::operator new(opaque(n), std::align_val_t(64));
			::operator delete(p, std::align_val_t(64));
		} catch (const std::bad_alloc &) {
			thrown = true;
		}
		CHECKF(thrown, "operator new(%#zx, align 64) did not throw", n);

		thrown = false;
		try {
			void *p = ::operator new[](opaque(n), std::align_val_t(4096));
			::operator delete[](p, std::align_val_t(4096));
		} catch (const std::bad_alloc &) {
			thrown = true;
		}
		CHECKF(thrown, "operator new[](%#zx, align 4096) did not throw", n);

		char *c = new (std::nothrow) char[opaque(n)];
		CHECKF(c == nullptr, "new (nothrow) char[%#zx] = %p", n, (void *)c);
		void *p = ::operator new(opaque(n), std::nothrow);
		CHECKF(p == nullptr, "operator new(%#zx, nothrow) = %p", n, p);
		p = ::operator new[](opaque(n), std::nothrow);
		CHECKF(p == nullptr, "operator new[](%#zx, nothrow) = %p", n, p);
		p = ::operator new(opaque(n), std::align_val_t(64), std::nothrow);
		CHECKF(p == nullptr, "operator new(%#zx, align 64, nothrow) = %p", n, p);
		/* n + alignment wraps around: an implementation that rounds the size up to the
		 * alignment without an overflow check returns a tiny block here. */
		p = ::operator new[](opaque(n), std::align_val_t(1u << 20), std::nothrow);
		CHECKF(p == nullptr, "operator new[](%#zx, align 1 MiB, nothrow) = %p", n, p);
	}

	/* The new_handler is called when allocation fails, then the allocation is retried. */
	handler_calls = 0;
	std::set_new_handler(handler_then_give_up);
	bool thrown = false;
	try {
		void *p = ::operator new(opaque(SIZE_MAX / 2));
		::operator delete(p);
	} catch (const std::bad_alloc &) {
		thrown = true;
	}
	CHECK(thrown);
	CHECKF(handler_calls == 1, "new_handler called %d times, want 1", handler_calls);

	handler_calls = 0;
	std::set_new_handler(handler_then_give_up);
	thrown = false;
	try {
		void *p = ::operator new(opaque(SIZE_MAX / 2), std::align_val_t(256));
		::operator delete(p, std::align_val_t(256));
	} catch (const std::bad_alloc &) {
		thrown = true;
	}
	CHECK(thrown);
	CHECKF(handler_calls == 1, "aligned: new_handler called %d times, want 1", handler_calls);

	/* nothrow new calls the handler too, and returns nullptr once it gives up. */
	handler_calls = 0;
	std::set_new_handler(handler_then_give_up);
	void *p = ::operator new(opaque(SIZE_MAX / 2), std::nothrow);
	CHECK(p == nullptr);
	CHECKF(handler_calls == 1, "nothrow: new_handler called %d times, want 1", handler_calls);
	std::set_new_handler(nullptr);

	/* The heap is fine after the failures. */
	std::vector<int> v(100000, 3);
	CHECK(v[99999] == 3);
}

/* --- Containers churned by threads ------------------------------------------------------- */

struct Mailbox {
	std::mutex m;
	std::deque<std::string> q;
};

std::atomic<bool> churn_failed{false};

std::string make_value(uint64_t key, size_t len)
{
	std::string s(len, '\0');
	for (size_t i = 0; i < len; i++)
		s[i] = (char)('a' + (key * 31 + i) % 26);
	return s;
}

bool value_ok(uint64_t key, const std::string &s)
{
	for (size_t i = 0; i < s.size(); i++)
		if (s[i] != (char)('a' + (key * 31 + i) % 26))
			return false;
	return true;
}

void churn(int id, int nthreads, int rounds, Mailbox *boxes)
{
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1) | 1;
	std::map<uint64_t, std::string> m;
	std::unordered_map<uint64_t, std::vector<uint64_t>> um;
	std::vector<std::string> v;
	for (int r = 0; r < rounds; r++) {
		uint64_t key = tu_rand(&rng) % 4096;
		size_t len = (size_t)(tu_rand(&rng) % 100 < 90 ? tu_rand(&rng) % 200
							       : tu_rand(&rng) % 20000);
		switch (tu_rand(&rng) % 6) {
		case 0:
		case 1:
			m[key] = make_value(key, len);
			break;
		case 2:
			m.erase(key);
			break;
		case 3: {
			auto &vec = um[key];
			vec.resize(len / 8 + 1, key);
			for (uint64_t x : vec)
				if (x != key)
					churn_failed = true;
			if (len % 3 == 0)
				um.erase(key);
			break;
		}
		case 4:
			v.push_back(make_value(key, len));
			if (v.size() > 500)
				v.erase(v.begin(), v.begin() + 250);
			break;
		case 5: {
			/* Hand a string to another thread; it is destroyed (freed) there. */
			Mailbox &b = boxes[(id + 1 + (int)(key % (uint64_t)(nthreads - 1))) % nthreads];
			std::string s = make_value(key, len + 30);
			s.insert(0, std::to_string(key) + ":");
			std::lock_guard<std::mutex> g(b.m);
			if (b.q.size() < 2000)
				b.q.push_back(std::move(s));
			break;
		}
		}
		if ((r & 63) == 0) {
			std::deque<std::string> mine;
			{
				std::lock_guard<std::mutex> g(boxes[id].m);
				mine.swap(boxes[id].q);
			}
			for (const std::string &s : mine) {
				size_t colon = s.find(':');
				uint64_t k = std::stoull(s.substr(0, colon));
				if (!value_ok(k, s.substr(colon + 1)))
					churn_failed = true;
			}
		}
	}
	for (const auto &kv : m)
		if (!value_ok(kv.first, kv.second))
			churn_failed = true;
}

void test_threads(int rounds)
{
	const int nthreads = 6;
	std::vector<Mailbox> boxes(nthreads);
	std::vector<std::thread> ts;
	for (int i = 0; i < nthreads; i++)
		ts.emplace_back(churn, i, nthreads, rounds, boxes.data());
	for (auto &t : ts)
		t.join();
	CHECK(!churn_failed.load());
	for (auto &b : boxes)
		for (const std::string &s : b.q) {
			size_t colon = s.find(':');
			CHECK(colon != std::string::npos);
			CHECK(value_ok(std::stoull(s.substr(0, colon)), s.substr(colon + 1)));
		}
}

} // namespace

int main(int argc, char **argv)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	tu_require_pcpmalloc("test_cxx");
	bool long_mode = tu_long_mode(argc, argv);
	double t0 = tu_now();
	test_symbols();
	printf("ok 1 - symbols come from libpcpmalloc.so\n");
	test_plain();
	printf("ok 2 - plain, array, nothrow and sized new/delete\n");
	test_aligned();
	printf("ok 3 - aligned new/delete\n");
	test_failure();
	printf("ok 4 - impossible sizes: bad_alloc, nullptr, new_handler\n");
	test_threads(long_mode ? 2000000 : 150000);
	printf("ok 5 - container churn in threads\n");
	printf("test_cxx: %.2f s\n", tu_now() - t0);
	return 0;
}
