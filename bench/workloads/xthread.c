/* wl-xthread - cross-thread producer/consumer: P pairs of threads; each producer allocates
 * blocks of random size in [s, S], writes a header, and passes them through a ring (a
 * single-producer single-consumer queue) to its consumer, which checks the header, touches
 * every page of the block and frees it.  Every free is remote.  With -s 8192 -S 32768 this is
 * the cross-CPU high-order case (order 1..3 pages); with small sizes, cross-thread small free.
 * With -i MS the process then stays idle MS milliseconds (the threads gone) and reports its
 * resident memory: what the allocator gives back once nothing runs (rss_idle_kib). */
#include "wl.h"
#include <sched.h>

static long pairs = 1, ops = 2000000, lo = 16, hi = 256, ringsz = 256, idle_ms = 0;

struct ring {
	void **slot;
	unsigned long head __attribute__((aligned(64))); /* written by the producer */
	unsigned long tail __attribute__((aligned(64))); /* written by the consumer */
	long id;
	unsigned long long check;
};

static void *producer(void *p)
{
	struct ring *r = p;
	uint64_t s = wl_seed(r->id + 200);
	for (long i = 0; i < ops; i++) {
		size_t n = wl_size(&s, lo, hi);
		if (n < 2 * sizeof(size_t))
			n = 2 * sizeof(size_t);
		size_t *b = wl_xmalloc(n);
		b[0] = n;
		b[1] = (size_t)i;
		while (r->head - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) >= (unsigned long)ringsz)
			sched_yield();
		r->slot[r->head % ringsz] = b;
		__atomic_store_n(&r->head, r->head + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *consumer(void *p)
{
	struct ring *r = p;
	unsigned long long check = 0;
	for (long i = 0; i < ops; i++) {
		while (__atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == r->tail)
			sched_yield();
		size_t *b = r->slot[r->tail % ringsz];
		__atomic_store_n(&r->tail, r->tail + 1, __ATOMIC_RELEASE);
		if (b[1] != (size_t)i) {
			fprintf(stderr, "xthread: block %ld arrived out of order\n", i);
			exit(1);
		}
		wl_touch(b, b[0], (unsigned char)i);
		check += b[0];
		free(b);
	}
	r->check = check;
	return NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'p', "producer/consumer pairs", &pairs},
			     {'n', "blocks per producer", &ops}, {'s', "smallest block (bytes)", &lo},
			     {'S', "largest block (bytes)", &hi}, {'r', "ring slots", &ringsz},
			     {'i', "idle ms after the threads end, then RSS", &idle_ms}};
	wl_parse(argc, argv, "cross-thread producer/consumer of blocks", o, 6);
	if (pairs < 1 || ringsz < 1 || hi < lo || lo < 1)
		return fprintf(stderr, "bad options\n"), 2;
	struct ring *r = calloc(pairs, sizeof *r);
	pthread_t t[2 * pairs];
	for (long i = 0; i < pairs; i++) {
		r[i].slot = calloc(ringsz, sizeof(void *));
		r[i].id = i;
	}
	double t0 = wl_now();
	for (long i = 0; i < pairs; i++)
		if (pthread_create(&t[2 * i], NULL, consumer, &r[i]) ||
		    pthread_create(&t[2 * i + 1], NULL, producer, &r[i]))
			return fprintf(stderr, "pthread_create failed\n"), 1;
	wl_join_threads(t, 2 * pairs);
	double dt = wl_now() - t0;
	unsigned long long check = 0;
	for (long i = 0; i < pairs; i++) {
		check = check * 31 + r[i].check;
		free(r[i].slot);
	}
	free(r);
	wl_report(hi > 4096 ? "xthread-large" : "xthread-small", (unsigned long long)pairs * ops,
		  check, dt);
	if (idle_ms > 0) {
		long peak = wl_rss_kib();
		struct timespec ts = { idle_ms / 1000, (idle_ms % 1000) * 1000000L };
		while (nanosleep(&ts, &ts))
			;
		printf("# xthread: rss_end_kib=%ld rss_idle_kib=%ld\n", peak, wl_rss_kib());
	}
	return 0;
}
