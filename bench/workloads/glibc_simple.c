/* wl-glibc-simple - the pattern of glibc's benchtests/bench-malloc-simple, one thread: for
 * each size (16 B to 1 KiB) and each count (25, 100, 400, 1600 blocks), allocate that many
 * blocks of that size, then free them in allocation order, again and again; every (size,
 * count) cell allocates the same number of blocks.  Pure malloc/free speed at small and
 * larger working sets, nothing else. */
#include "wl.h"

static long perCell = 500000;

static const unsigned cell_sizes[] = {16, 32, 64, 128, 256, 512, 1024};
static const unsigned cell_counts[] = {25, 100, 400, 1600};

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'n', "blocks allocated per (size, count) cell", &perCell}};
	wl_parse(argc, argv, "glibc bench-malloc-simple pattern: allocate N blocks, free them in "
		 "order", o, 1);
	void **a = calloc(1600, sizeof *a);
	unsigned long long check = 0, ops = 0;
	double t0 = wl_now();
	for (unsigned si = 0; si < sizeof cell_sizes / sizeof cell_sizes[0]; si++) {
		for (unsigned ci = 0; ci < sizeof cell_counts / sizeof cell_counts[0]; ci++) {
			unsigned size = cell_sizes[si], count = cell_counts[ci];
			long rounds = perCell / count ? perCell / count : 1;
			for (long r = 0; r < rounds; r++) {
				for (unsigned j = 0; j < count; j++) {
					unsigned char *b = wl_xmalloc(size);
					b[0] = (unsigned char)j;
					a[j] = b;
				}
				for (unsigned j = 0; j < count; j++) {
					check += ((unsigned char *)a[j])[0];
					free(a[j]);
				}
			}
			ops += (unsigned long long)rounds * count;
		}
	}
	double dt = wl_now() - t0;
	free(a);
	wl_report("glibc-simple", ops, check, dt);
	return 0;
}
