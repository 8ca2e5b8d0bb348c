/* A quiet program with one CPU spike, for the flight recorder (gcc -O2).
 * It burns 2 s in early_fn, sleeps, then at a random moment 10 to 14 s
 * after its start burns 5 s in spike_fn, prints "spike FROM TO" (seconds
 * since its start) and sleeps until killed. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

static volatile unsigned long sink;

__attribute__((noinline)) void early_fn(double until)
{
	while (now() < until)
		for (int i = 0; i < 10000; i++)
			sink++;
}

__attribute__((noinline)) void spike_fn(double until)
{
	while (now() < until)
		for (int i = 0; i < 10000; i++)
			sink += 3;
}

static void sleep_until(double t)
{
	while (now() < t)
		usleep(20000);
}

int main(void)
{
	double start = now();
	srand((unsigned)(start * 1e6) ^ (unsigned)getpid());
	double at = 10.0 + 4.0 * rand() / RAND_MAX;
	early_fn(start + 2.0);
	sleep_until(start + at);
	spike_fn(start + at + 5.0);
	printf("spike %.3f %.3f\n", at, now() - start);
	fflush(stdout);
	for (;;)
		pause();
}
