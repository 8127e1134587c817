/* ab-run - the launcher of pcpmalloc-ab: runs one command and writes its resource usage.
 *
 *   ab-run OUTFILE PRELOAD command [args...]
 *
 * Forks, sets LD_PRELOAD=PRELOAD in the child (unless PRELOAD is empty), execs the command,
 * waits for it with wait4() and writes "status user_s sys_s maxrss_kib" to OUTFILE; exits
 * with the command's status (128 + signal when killed).  Why not fork from the harness
 * itself: Linux carries a process's peak RSS across exec, so a child forked from the Python
 * harness would report at least the harness's own RSS.  This small program's footprint is
 * the floor instead, and it does not run under the allocator being measured. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: ab-run OUTFILE PRELOAD command [args...]\n");
		return 2;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("ab-run: fork");
		return 127;
	}
	if (pid == 0) {
		if (argv[2][0])
			setenv("LD_PRELOAD", argv[2], 1);
		execvp(argv[3], argv + 3);
		fprintf(stderr, "ab-run: cannot run %s: %s\n", argv[3], strerror(errno));
		_exit(127);
	}
	int status;
	struct rusage ru;
	while (wait4(pid, &status, 0, &ru) < 0)
		;
	FILE *f = fopen(argv[1], "w");
	if (!f) {
		perror("ab-run: OUTFILE");
		return 127;
	}
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	fprintf(f, "%d %.6f %.6f %ld\n", WIFEXITED(status) ? code : -WTERMSIG(status),
		ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
		ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6, ru.ru_maxrss);
	fclose(f);
	return code;
}
