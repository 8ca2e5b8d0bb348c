/* Fixed CPU work, one thread per online CPU: the run time under a profiler
 * against the run time alone is the profiler's on-CPU overhead.
 * Usage: cpuburn ITERATIONS_PER_THREAD (in millions) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned long per_thread;
static volatile unsigned long sink;

__attribute__((noinline)) unsigned long mix(unsigned long h, unsigned long i)
{
	return (h ^ i) * 0x9E3779B97F4A7C15UL + 7;
}

__attribute__((noinline)) void *burn(void *arg)
{
	unsigned long h = (unsigned long)arg;
	for (unsigned long i = 0; i < per_thread; i++)
		h = mix(h, i);
	sink += h;
	return NULL;
}

int main(int argc, char **argv)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t t[256];

	per_thread = (argc > 1 ? strtoul(argv[1], NULL, 10) : 500) * 1000000UL;
	for (long i = 0; i < n && i < 256; i++)
		pthread_create(&t[i], NULL, burn, (void *)i);
	for (long i = 0; i < n && i < 256; i++)
		pthread_join(t[i], NULL);
	return 0;
}
