/* One thread per argument after SECONDS; thread i loops {compute P ms;
 * sleep 100-P ms} where P is its argument, and is named "mixP".
 * Usage: mixed SECONDS P1 [P2 ...] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "rawsys.h"
#include "clock.h"

static volatile unsigned long sink;
static double until;

__attribute__((noinline)) void compute_phase(int ms)
{
	double end = now() + ms / 1000.0;
	/* Clock reads are rare: the vDSO has no frame pointer, and a sample
	 * inside it would skip this frame. */
	while (now() < end)
		for (int i = 0; i < 20000; i++)
			sink++;
}

__attribute__((noinline)) void sleep_phase(int ms)
{
	struct timespec ts = { 0, ms * 1000000L };
	if (ms > 0)
		raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}

static void *mix(void *arg)
{
	int busy = (int)(long)arg;
	while (now() < until) {
		compute_phase(busy);
		sleep_phase(100 - busy);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[16];
	int n = 0;

	until = now() + (argc > 1 ? atof(argv[1]) : 5);
	for (int i = 2; i < argc && n < 16; i++, n++) {
		char name[16];
		long busy = atol(argv[i]);
		pthread_create(&t[n], NULL, mix, (void *)busy);
		snprintf(name, sizeof(name), "mix%ld", busy);
		pthread_setname_np(t[n], name);
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
