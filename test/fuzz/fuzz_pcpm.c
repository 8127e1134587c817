/*
 * fuzz_pcpm.c - libFuzzer target: each input is a program of allocation calls (fuzz_ops.h)
 * run on pcpmalloc's core linked as a library (not the process malloc).  A helper thread
 * serves the hand-off operations synchronously, so a run stays deterministic: it frees
 * blocks the main thread allocated, allocates blocks the main thread frees, and on
 * OP_THREAD_EXIT exits (its thread cache is flushed) to be restarted on the next hand-off.
 *
 * After an input whose first byte is odd, the helper flushes its thread cache and the
 * zone must have every page back (fz_check_empty): nothing leaked.
 *
 * Built by build_fuzzer.sh with clang -fsanitize=fuzzer,address,undefined; run by
 * run_fuzzer.sh (the meson test 'fuzz_pcpm').
 */
#define _GNU_SOURCE
#include "fuzz_ops.h"
#include "api.h"

#include <pthread.h>
#include <stdbool.h>

enum req_kind { REQ_NONE, REQ_FREE, REQ_ALLOC, REQ_FLUSH, REQ_EXIT };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static enum req_kind req;
static struct fz_block req_block;
static size_t req_size;
static uint32_t req_seed = 0x10000001;
static int req_ok;
static bool helper_running;
static pthread_t helper;

static void *helper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		while (req == REQ_NONE)
			pthread_cond_wait(&cv, &lock);
		enum req_kind k = req;
		switch (k) {
		case REQ_FREE:
			fz_verify(&req_block, req_block.usable, "free on the helper thread");
			pcpm_free(req_block.p);
			req_ok = 1;
			break;
		case REQ_ALLOC:
			req_seed += 2;
			req_ok = fz_alloc_filled(&req_block, req_size, req_seed);
			break;
		case REQ_FLUSH:
			tcache_flush_all(tcache_self());
			break;
		default:
			break;
		}
		req = REQ_NONE;
		pthread_cond_broadcast(&cv);
		if (k == REQ_EXIT)
			break;
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void call_helper(enum req_kind k)
{
	if (!helper_running) {
		if (k == REQ_EXIT)
			return;
		if (pthread_create(&helper, NULL, helper_main, NULL))
			fz_fail("pthread_create failed");
		helper_running = true;
	}
	pthread_mutex_lock(&lock);
	req = k;
	pthread_cond_broadcast(&cv);
	while (req != REQ_NONE)
		pthread_cond_wait(&cv, &lock);
	pthread_mutex_unlock(&lock);
	if (k == REQ_EXIT) {
		pthread_join(helper, NULL);
		helper_running = false;
	}
}

static int give(struct fz_ctx *c, const struct fz_block *b)
{
	(void)c;
	req_block = *b;
	call_helper(REQ_FREE);
	return 1;
}

static int take(struct fz_ctx *c, struct fz_block *b, size_t size)
{
	(void)c;
	req_size = size;
	call_helper(REQ_ALLOC);
	if (!req_ok)
		fz_fail("malloc(%zu) failed on the helper thread", size);
	*b = req_block;
	return 1;
}

static void thread_exit(struct fz_ctx *c)
{
	(void)c;
	call_helper(REQ_EXIT);
}

static const struct fz_handoff handoff = {give, take, thread_exit};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz_ctx ctx;
	ctx.ho = &handoff;
	ctx.allow_trim = 1;
	fz_run(&ctx, data, size);
	if (size && (data[0] & 1)) {
		if (helper_running)
			call_helper(REQ_FLUSH);
		tcache_flush_all(tcache_self());
		fz_check_empty("end of input");
	}
	return 0;
}
