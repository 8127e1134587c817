/*
 * sysread.h - small kernel files (sysfs, /proc/cpuinfo) read on the allocating thread: raw
 * system calls through syscall(2) - openat, read, close - which, unlike open/read/close, are
 * no cancellation points (a thread cancelled in malloc must not be unwound inside the
 * allocator: issue 26) and not the functions a program wraps; and paths built by hand, not
 * with snprintf (vfprintf's frame alone is over 1 KiB, and discovery may run on a
 * PTHREAD_STACK_MIN thread).  Header-only over libc's syscall(): the library and the tool
 * share it.  Thread-safe: everything lives in the caller's buffers.
 */
#ifndef PCPM_SYSREAD_H
#define PCPM_SYSREAD_H

#include <fcntl.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

/* openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC): the descriptor, or -1 (errno set). */
static inline int pcpm_sysread_open(const char *path)
{
	long r = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	return r < 0 ? -1 : (int)r;
}

/* read(2) without the cancellation point: bytes read, 0 at the end, -1 on error. */
static inline long pcpm_sysread_read(int fd, char *buf, size_t len)
{
	return syscall(SYS_read, fd, buf, len);
}

static inline void pcpm_sysread_close(int fd)
{
	syscall(SYS_close, fd);
}

/* A path built piece by piece in a caller's buffer; one that does not fit becomes "" (which
 * no open finds) rather than a cut path that might name another file. */
struct pcpm_path {
	char *buf;
	size_t len, n;
};

static inline void pcpm_path_start(struct pcpm_path *p, char *buf, size_t len)
{
	p->buf = buf;
	p->len = len;
	p->n = 0;
	buf[0] = '\0';
}

static inline void pcpm_path_str(struct pcpm_path *p, const char *s)
{
	while (*s && p->n + 1 < p->len)
		p->buf[p->n++] = *s++;
	if (*s) { /* overflow: poison the path */
		p->n = p->len;
		p->buf[0] = '\0';
		return;
	}
	if (p->n < p->len)
		p->buf[p->n] = '\0';
}

/* A decimal number (v >= 0). */
static inline void pcpm_path_num(struct pcpm_path *p, long v)
{
	char d[24];
	int k = (int)sizeof(d) - 1;
	d[k] = '\0';
	do {
		d[--k] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0 && k > 0);
	pcpm_path_str(p, d + k);
}

#endif
