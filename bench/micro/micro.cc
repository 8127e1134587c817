// micro.cc - google-benchmark micro-benchmarks of the allocation API, measured against the
// allocator loaded in the process: the same binary measures glibc (no preload), jemalloc,
// mimalloc, tcmalloc or pcpmalloc through LD_PRELOAD, e.g.
//   LD_PRELOAD=build/preload/libpcpmalloc.so build/bench/pcpmalloc-micro --benchmark_filter=Pair
// Built with -fno-builtin so that the compiler keeps every call.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <thread>
#include <vector>

namespace {

// malloc + free of one size, back to back: the fast path.
void Pair(benchmark::State &st)
{
	const size_t n = st.range(0);
	for (auto _ : st) {
		void *p = malloc(n);
		benchmark::DoNotOptimize(p);
		free(p);
	}
	st.SetItemsProcessed(st.iterations());
}
BENCHMARK(Pair)->RangeMultiplier(4)->Range(16, 1 << 20);

// Allocate a batch, then free it (in allocation order): refill and flush paths.
void Batch(benchmark::State &st)
{
	const size_t n = st.range(0), count = st.range(1);
	std::vector<void *> v(count);
	for (auto _ : st) {
		for (size_t i = 0; i < count; i++) {
			v[i] = malloc(n);
			benchmark::DoNotOptimize(v[i]);
		}
		for (size_t i = 0; i < count; i++)
			free(v[i]);
	}
	st.SetItemsProcessed(st.iterations() * count);
}
BENCHMARK(Batch)->ArgsProduct({{16, 64, 256, 4096, 32768}, {100, 10000}});

// Blocks allocated here and freed by another thread (through a ring): remote frees.
void CrossThreadFree(benchmark::State &st)
{
	const size_t n = st.range(0);
	constexpr size_t ring = 1024;
	std::vector<std::atomic<void *>> slot(ring);
	for (auto &s : slot)
		s.store(nullptr);
	std::atomic<bool> stop{false};
	std::thread freer([&] {
		size_t i = 0;
		for (;;) {
			void *p = slot[i % ring].exchange(nullptr, std::memory_order_acquire);
			if (p) {
				free(p);
				i++;
			} else if (stop.load(std::memory_order_acquire)) {
				if (!slot[i % ring].load())
					break;
			} else {
				std::this_thread::yield();
			}
		}
	});
	size_t i = 0;
	for (auto _ : st) {
		void *p = malloc(n);
		memset(p, 1, n < 64 ? n : 64);
		while (slot[i % ring].load(std::memory_order_relaxed))
			std::this_thread::yield();
		slot[i % ring].store(p, std::memory_order_release);
		i++;
	}
	stop.store(true, std::memory_order_release);
	freer.join();
	st.SetItemsProcessed(st.iterations());
}
BENCHMARK(CrossThreadFree)->Arg(32)->Arg(256)->Arg(8192)->Arg(32768)->UseRealTime();

// realloc growth from 16 B by doubling to the argument, then free.
void Realloc(benchmark::State &st)
{
	const size_t max = st.range(0);
	for (auto _ : st) {
		char *p = static_cast<char *>(malloc(16));
		for (size_t n = 32; n <= max; n *= 2) {
			p = static_cast<char *>(realloc(p, n));
			p[n - 1] = 1;
		}
		benchmark::DoNotOptimize(p);
		free(p);
	}
	st.SetItemsProcessed(st.iterations());
}
BENCHMARK(Realloc)->Arg(1024)->Arg(65536)->Arg(1 << 20);

// calloc + free: the zeroing (and whether fresh memory is known to be zero).
void Calloc(benchmark::State &st)
{
	const size_t n = st.range(0);
	for (auto _ : st) {
		void *p = calloc(1, n);
		benchmark::DoNotOptimize(p);
		free(p);
	}
	st.SetBytesProcessed(st.iterations() * n);
}
BENCHMARK(Calloc)->RangeMultiplier(8)->Range(16, 1 << 20);

// posix_memalign of 64 bytes at an alignment, + free.
void Aligned(benchmark::State &st)
{
	const size_t al = st.range(0);
	for (auto _ : st) {
		void *p;
		if (posix_memalign(&p, al, 64))
			st.SkipWithError("posix_memalign failed");
		benchmark::DoNotOptimize(p);
		free(p);
	}
	st.SetItemsProcessed(st.iterations());
}
BENCHMARK(Aligned)->RangeMultiplier(8)->Range(16, 65536);

} // namespace

int main(int argc, char **argv)
{
	const char *pre = getenv("LD_PRELOAD");
	benchmark::AddCustomContext("allocator", pre && *pre ? pre : "glibc (no preload)");
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	return 0;
}
