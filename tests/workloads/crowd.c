/* N CPU-bound threads pinned to CPU 0: each waits in the run queue for the
 * others. Usage: crowd SECONDS N */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include "clock.h"

static volatile unsigned long sink;
static double until;

__attribute__((noinline)) void *crowd_burn(void *arg)
{
	(void)arg;
	while (now() < until)
		for (int i = 0; i < 10000; i++)
			sink++;
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 3;
	pthread_t t[64];
	cpu_set_t one;

	until = now() + (argc > 1 ? atof(argv[1]) : 5);
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	sched_setaffinity(0, sizeof(one), &one);
	for (int i = 0; i < n && i < 64; i++)
		pthread_create(&t[i], NULL, crowd_burn, NULL);
	for (int i = 0; i < n && i < 64; i++)
		pthread_join(t[i], NULL);
	return 0;
}
