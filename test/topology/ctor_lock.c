/* ctor_lock.c - a library whose constructor takes a lock of the program that loads it
 * (topo_work_lock, found with dlsym): while the constructor waits, the loading thread holds
 * the dynamic loader's lock.  topo_work "dlopen-lock" uses it to check that a malloc which
 * starts hwloc discovery while its caller holds topo_work_lock cannot deadlock. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>

__attribute__((constructor)) static void ctor_lock(void)
{
	pthread_mutex_t *m = dlsym(RTLD_DEFAULT, "topo_work_lock");
	if (m) {
		pthread_mutex_lock(m);
		pthread_mutex_unlock(m);
	}
}
