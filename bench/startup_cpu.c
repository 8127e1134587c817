/*
 * startup_cpu.c - start-up cost per allocator as CPU time, robust on a busy machine.
 *
 *   build/bench/startup-cpu N [--true] SPEC...
 *
 * SPEC is a preload library ("" for glibc), optionally followed by "|NAME=VALUE" for one more
 * environment variable.  Runs `sh -c :` (or /bin/true with --true) N times per SPEC, the SPECs
 * taking turns run by run, and prints per SPEC the median CPU time (user + sys of the child,
 * from wait4, which the kernel accounts from the task's exact runtime) and the median wall
 * time, and both as ratios to the first SPEC.  Complements bench/startup.sh (hyperfine, wall
 * medians): CPU time does not count the time a run waits for a CPU that other jobs hold.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0, first = 2;
	char *sh[] = { "sh", "-c", ":", NULL }, *tr[] = { "/bin/true", NULL }, **cmd = sh;
	if (argc > 2 && strcmp(argv[2], "--true") == 0) {
		cmd = tr;
		first = 3;
	}
	int k = argc - first;
	if (n <= 0 || k <= 0) {
		fprintf(stderr, "usage: startup-cpu N [--true] LIB[|NAME=VALUE]...\n");
		return 2;
	}
	double *cpu = calloc((size_t)n * k, sizeof(double)), *wall = calloc((size_t)n * k, sizeof(double));
	if (!cpu || !wall)
		return 1;
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < k; j++) {
			struct timespec a, b;
			clock_gettime(CLOCK_MONOTONIC, &a);
			pid_t p = fork();
			if (p == 0) {
				char *spec = strdup(argv[first + j]), *bar = strchr(spec, '|');
				if (bar) {
					*bar = 0;
					putenv(bar + 1);
				}
				if (*spec)
					setenv("LD_PRELOAD", spec, 1);
				else
					unsetenv("LD_PRELOAD");
				execvp(cmd[0], cmd);
				_exit(127);
			}
			int st;
			struct rusage ru;
			if (p < 0 || wait4(p, &st, 0, &ru) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
				fprintf(stderr, "startup-cpu: run of %s failed\n", argv[first + j]);
				return 1;
			}
			clock_gettime(CLOCK_MONOTONIC, &b);
			cpu[j * n + i] = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
					 ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
			wall[j * n + i] = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
		}
	}
	double c0 = 0, w0 = 0;
	printf("%s x %d, interleaved: median CPU us (ratio), median wall us (ratio)\n",
	       cmd == sh ? "sh -c :" : "/bin/true", n);
	for (int j = 0; j < k; j++) {
		qsort(cpu + j * n, (size_t)n, sizeof(double), cmp);
		qsort(wall + j * n, (size_t)n, sizeof(double), cmp);
		double c = cpu[j * n + n / 2], w = wall[j * n + n / 2];
		if (j == 0) {
			c0 = c;
			w0 = w;
		}
		printf("%-60s %8.1f (%.3f) %8.1f (%.3f)\n", *argv[first + j] ? argv[first + j] : "glibc",
		       c, c / c0, w, w / w0);
	}
	return 0;
}
