/* wl-xmalloc - the xmalloc-test pattern (Lever and Boreham, "malloc() Performance in a
 * Multithreaded Linux Environment", USENIX 2000): allocating threads only allocate small
 * objects (64 B by default, as one size class; -s 0: 8-256 B from a list of sizes), write
 * their first 128 bytes, fill batches of 4096 of them and put the batches on a shared queue;
 * freeing threads only take batches and free every object in them.  Every free is remote
 * and the allocating threads never see their memory again through their own frees.  The
 * queue holds at most Q batches (the allocators then wait), bounding the live memory. */
#include "wl.h"
#include <sched.h>

static long threads = 2, nbatches = 1500, batch = 4096, qmax = 100, fixed = 64, touch = 128;

static const unsigned short sizes[] = {8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256};

struct qent {
	struct qent *next;
	long n;
	void *obj[];
};

static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static struct qent *qhead, *qtail;
static long qlen, produced_left, consumed_left;

struct arg {
	long id;
	unsigned long long check;
};

static long allocators(void)
{
	return threads / 2 > 0 ? threads / 2 : 1;
}

static void *alloc_thread(void *p)
{
	struct arg *a = p;
	unsigned long long check = 0;
	for (;;) {
		pthread_mutex_lock(&qlock);
		if (produced_left == 0) {
			pthread_mutex_unlock(&qlock);
			break;
		}
		/* a batch's sizes follow from its number: the same whichever thread makes it */
		uint64_t s = wl_seed((uint64_t)(nbatches - produced_left) + 400);
		produced_left--;
		pthread_mutex_unlock(&qlock);
		struct qent *e = wl_xmalloc(sizeof *e + batch * sizeof(void *));
		e->n = batch;
		e->next = NULL;
		for (long i = 0; i < batch; i++) {
			size_t n = fixed ? (size_t)fixed
					 : sizes[wl_rand(&s) % (sizeof sizes / sizeof sizes[0])];
			unsigned char *o = wl_xmalloc(n);
			if (touch)
				memset(o, (int)i, n < (size_t)touch ? n : (size_t)touch);
			o[0] = (unsigned char)n;
			o[n - 1] = (unsigned char)i;
			check += n;
			e->obj[i] = o;
		}
		pthread_mutex_lock(&qlock);
		while (qlen >= qmax)
			pthread_cond_wait(&qcond, &qlock);
		if (qtail)
			qtail->next = e;
		else
			qhead = e;
		qtail = e;
		qlen++;
		pthread_cond_broadcast(&qcond);
		pthread_mutex_unlock(&qlock);
	}
	a->check = check;
	return NULL;
}

static void *free_thread(void *p)
{
	struct arg *a = p;
	unsigned long long check = 0;
	for (;;) {
		pthread_mutex_lock(&qlock);
		while (!qhead && consumed_left > 0)
			pthread_cond_wait(&qcond, &qlock);
		if (consumed_left == 0) {
			pthread_mutex_unlock(&qlock);
			break;
		}
		struct qent *e = qhead;
		qhead = e->next;
		if (!qhead)
			qtail = NULL;
		qlen--;
		consumed_left--;
		pthread_cond_broadcast(&qcond);
		pthread_mutex_unlock(&qlock);
		for (long i = 0; i < e->n; i++) {
			unsigned char *o = e->obj[i];
			check += o[0];
			free(o);
		}
		free(e);
	}
	a->check = check;
	return NULL;
}

static void *role(void *p)
{
	struct arg *a = p;
	return a->id < allocators() ? alloc_thread(p) : free_thread(p);
}

int main(int argc, char **argv)
{
	struct wl_opt o[] = {{'t', "threads (half allocate, half free; at least 2)", &threads},
			     {'n', "batches in all", &nbatches}, {'b', "objects per batch", &batch},
			     {'q', "batches queued at most", &qmax},
			     {'s', "object size (0: 8-256 B from a list)", &fixed},
			     {'m', "bytes written into each object (at most its size)", &touch}};
	wl_parse(argc, argv, "xmalloc-test: allocating threads hand batches of small objects to "
		 "freeing threads", o, 6);
	if (threads < 2 || batch < 1 || qmax < 1 || (fixed && fixed < 2))
		return fprintf(stderr, "bad options\n"), 2;
	produced_left = consumed_left = nbatches;
	struct arg a[threads];
	double dt = wl_run_threads(threads, role, a, sizeof a[0]);
	/* the bytes allocated (allocators) and the sizes freed (low byte, freers): the totals do
	 * not depend on which freeing thread took which batch */
	unsigned long long made = 0, freed = 0;
	for (long i = 0; i < threads; i++)
		*(i < allocators() ? &made : &freed) += a[i].check;
	wl_report("xmalloc", (unsigned long long)nbatches * batch, made * 31 + freed, dt);
	return 0;
}
