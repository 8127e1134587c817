/* wl-ruby - a Ruby interpreter's allocation stress, one thread: many small short-lived
 * objects (string buffers 24-128 B that grow by realloc as they are appended to, arrays of
 * 8-byte slots grown by doubling, small instance-variable and hash tables) of which a few
 * survive into a long-lived old generation; when the old generation is full a "major GC"
 * frees a random half of it and trades some 64 KiB-aligned heap pages (posix_memalign, as
 * Ruby's object heap).  Young objects die after a short FIFO lifetime. */
#include "wl.h"

static long ops = 3000000, young = 2048, old = 32768, promote = 30, pages = 64;

struct obj {
	unsigned char *buf;
	size_t len, cap;
};

static void grow(struct obj *o, size_t want, int kind)
{
	if (want <= o->cap)
		return;
	size_t cap = o->cap ? o->cap : 8;
	while (cap < want)
		cap = kind ? cap * 2 : cap + cap / 2 + 8; /* arrays double, strings grow 1.5x */
	unsigned char *b = realloc(o->buf, cap);
	if (!b) {
		fprintf(stderr, "ruby: out of memory\n");
		exit(1);
	}
	o->buf = b;
	o->cap = cap;
}

/* a new object: its kind, initial size and how much it is appended to decide its life */
static unsigned long long make(struct obj *o, uint64_t *s)
{
	uint64_t r = wl_rand(s);
	int kind = r % 100 < 50 ? 0 : r % 100 < 75 ? 1 : 2;
	o->buf = NULL;
	o->len = o->cap = 0;
	if (kind == 2) { /* ivar table / small hash: fixed 16-96 B */
		size_t n = 16 + 16 * ((r >> 8) % 6);
		o->buf = wl_xmalloc(n);
		o->cap = o->len = n;
		o->buf[0] = (unsigned char)n;
		return n;
	}
	size_t first = kind ? 8 * (1 + (r >> 8) % 4) : 24 + (r >> 8) % 105;
	grow(o, first, kind);
	o->len = first;
	memset(o->buf, 'a', first);
	/* one object in 8 is appended to: a string concatenation or an array push loop */
	if ((r >> 20) % 8 == 0) {
		long appends = 1 + (long)((r >> 24) % 24);
		for (long i = 0; i < appends; i++) {
			size_t add = kind ? 8 : 1 + (r >> 32) % 40;
			grow(o, o->len + add, kind);
			memset(o->buf + o->len, 'b', add);
			o->len += add;
		}
	}
	return o->len;
}

static void drop(struct obj *o)
{
	free(o->buf);
	o->buf = NULL;
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'n', "objects created", &ops}, {'y', "young objects alive", &young},
			     {'o', "old generation size", &old},
			     {'p', "objects promoted per 1000", &promote},
			     {'P', "heap pages (64 KiB, aligned) kept", &pages}};
	wl_parse(argc, argv, "Ruby-like allocation stress: short-lived small objects, realloc "
		 "growth, an old generation and heap pages", o, 5);
	if (young < 1 || old < 2 || promote > 1000)
		return fprintf(stderr, "bad options\n"), 2;
	struct obj *y = calloc(young, sizeof *y), *g = calloc(old, sizeof *g);
	void **pg = calloc(pages ? pages : 1, sizeof *pg);
	long nold = 0, gcs = 0;
	uint64_t s = wl_seed(600);
	unsigned long long check = 0;
	for (long i = 0; i < pages; i++)
		if (posix_memalign(&pg[i], 65536, 65536))
			return fprintf(stderr, "ruby: out of memory\n"), 1;
	double t0 = wl_now();
	for (long i = 0; i < ops; i++) {
		struct obj *slot = &y[i % young];
		if (slot->buf) {
			if (wl_rand(&s) % 1000 < (uint64_t)promote) {
				if (nold == old) { /* major GC: half the old generation dies */
					long keep = 0;
					for (long j = 0; j < old; j++) {
						if (wl_rand(&s) % 2) {
							check += g[j].len;
							drop(&g[j]);
						} else {
							g[keep++] = g[j];
						}
					}
					nold = keep;
					gcs++;
					for (long j = 0; j < pages / 4; j++) {
						long k = (long)(wl_rand(&s) % (uint64_t)pages);
						free(pg[k]);
						if (posix_memalign(&pg[k], 65536, 65536))
							return fprintf(stderr, "ruby: oom\n"), 1;
						((char *)pg[k])[0] = 1;
					}
				}
				g[nold++] = *slot;
				slot->buf = NULL;
			} else {
				drop(slot);
			}
		}
		check += make(slot, &s);
	}
	double dt = wl_now() - t0;
	for (long i = 0; i < young; i++)
		drop(&y[i]);
	for (long i = 0; i < nold; i++)
		drop(&g[i]);
	for (long i = 0; i < pages; i++)
		free(pg[i]);
	free(y);
	free(g);
	free(pg);
	wl_report("ruby", (unsigned long long)ops, check * 31 + (unsigned long long)gcs, dt);
	return 0;
}
