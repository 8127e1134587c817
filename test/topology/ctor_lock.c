/* ctor_lock.c - a library whose constructor takes a lock of the program that loads it
 * (topo_work_lock, found with dlsym): while the constructor waits, the loading thread holds
 * the dynamic loader's lock.  topo_work "dlopen-lock" uses it to check that a malloc which
 * starts lazy discovery while its caller holds topo_work_lock cannot deadlock. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* Without the program's lock the constructor would not wait, and the deadlock check would
 * pass without testing anything: that is a failure (exit 3, told apart from a hang's 124). */
__attribute__((constructor)) static void ctor_lock(void)
{
	pthread_mutex_t *m = dlsym(RTLD_DEFAULT, "topo_work_lock");
	if (!m) {
		static const char msg[] = "ctor_lock: topo_work_lock not found (program not linked with export_dynamic)\n";
		ssize_t w = write(2, msg, sizeof(msg) - 1);
		(void)w;
		_exit(3);
	}
	if (pthread_mutex_lock(m) != 0 || pthread_mutex_unlock(m) != 0)
		_exit(3);
}
