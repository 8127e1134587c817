/*
 * fuzz_replay.c - runs the fuzz target without libFuzzer, built with the project's compiler
 * (gcc) against the test copy of the core (pcpcore_test: ASan+UBSan by default, TSan with
 * -Dsanitize=thread, see meson_options.txt).
 *
 *   fuzz_replay FILE|DIR...        replays every input (the checked-in corpus: seeds and
 *                                  the regression inputs fuzzing found), one after another
 *   fuzz_replay --stress T SECONDS [SEED]
 *                                  T threads run random operation programs concurrently for
 *                                  SECONDS; hand-offs go through a shared mailbox, so blocks
 *                                  are freed and received by threads other than the one that
 *                                  allocated them, while those threads allocate; at the end
 *                                  every thread has exited and the zone must have every page
 *                                  back (no leak)
 */
#define _GNU_SOURCE
#include "fuzz_ops.h"
#include "api.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay(const char *path);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	static uint8_t buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees reads past the input */
	memcpy(copy, buf, n);
	LLVMFuzzerTestOneInput(copy, n);
	free(copy);
	return 1;
}

static int replay(const char *path)
{
	struct stat st;
	if (stat(path, &st)) {
		perror(path);
		exit(1);
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path);
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;
	char p[4096];
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		n += replay(p); /* (subdirectories too, as libFuzzer reads a corpus) */
	}
	closedir(d);
	return n;
}

/* ---- concurrent stress ------------------------------------------------------------------ */

#define MAILBOX 256
static pthread_mutex_t mb_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fz_block mailbox[MAILBOX];
static int mb_n;
static double deadline;
static _Atomic unsigned long programs, handed;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int mb_give(struct fz_ctx *c, const struct fz_block *b)
{
	(void)c;
	pthread_mutex_lock(&mb_lock);
	int ok = mb_n < MAILBOX;
	if (ok)
		mailbox[mb_n++] = *b;
	pthread_mutex_unlock(&mb_lock);
	if (ok)
		atomic_fetch_add(&handed, 1);
	return ok;
}

static int mb_take(struct fz_ctx *c, struct fz_block *b, size_t size)
{
	(void)c;
	(void)size;
	pthread_mutex_lock(&mb_lock);
	int ok = mb_n > 0;
	if (ok)
		*b = mailbox[--mb_n];
	pthread_mutex_unlock(&mb_lock);
	return ok;
}

static const struct fz_handoff mb_handoff = {mb_give, mb_take, NULL};

static void *stress_thread(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
	static _Thread_local struct fz_ctx ctx;
	ctx.ho = &mb_handoff;
	ctx.allow_trim = 0;
	ctx.live_limit = 48UL << 20;
	ctx.serial = (uint32_t)(uintptr_t)arg << 24;
	uint8_t prog[2048];
	while (now_s() < deadline) {
		for (size_t i = 0; i < sizeof(prog); i += 8) {
			s ^= s >> 12;
			s ^= s << 25;
			s ^= s >> 27;
			uint64_t r = s * 2685821657736338717ULL;
			memcpy(prog + i, &r, 8);
		}
		/* keep most sizes in the slab and page-run ranges: edge/huge sizes one in 16 */
		for (size_t i = 0; i < sizeof(prog); i++)
			if ((prog[i] >> 6) == 3 && (prog[i] & 15))
				prog[i] &= 0x7f;
		fz_run(&ctx, prog, sizeof(prog));
		atomic_fetch_add(&programs, 1);
	}
	return NULL;
}

static void stress(int nthreads, double seconds, unsigned seed)
{
	deadline = now_s() + seconds;
	pthread_t *t = calloc((size_t)nthreads, sizeof(*t));
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, stress_thread, (void *)(uintptr_t)(seed + i + 1))) {
			fprintf(stderr, "pthread_create failed\n");
			exit(1);
		}
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	free(t);
	/* blocks still in the mailbox: verified and freed here, by yet another thread */
	for (int i = 0; i < mb_n; i++) {
		fz_verify(&mailbox[i], mailbox[i].usable, "mailbox at end");
		pcpm_free(mailbox[i].p);
	}
	mb_n = 0;
	fz_check_empty("after the stress threads exited");
	printf("stress: %d threads, %.0f s: %lu programs, %lu blocks handed between threads, "
	       "no leak\n",
	       nthreads, seconds, atomic_load(&programs), atomic_load(&handed));
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "--stress")) {
		stress(atoi(argv[2]), atof(argv[3]), argc > 4 ? (unsigned)atoi(argv[4]) : 1);
		return 0;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: fuzz_replay FILE|DIR... | --stress THREADS SECONDS [SEED]\n");
		return 2;
	}
	int n = 0;
	for (int i = 1; i < argc; i++)
		n += replay(argv[i]);
	printf("replayed %d inputs\n", n);
	return n ? 0 : 1;
}
