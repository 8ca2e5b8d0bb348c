/* CPU time split 50/30/20 between three functions, by equal-cost loop
 * iterations, ~12 ms a round in a random order (a 1.2 ms round in a fixed
 * order lets a 499 Hz sampler's period keep landing on the same points of
 * it). Usage: split SECONDS [after-usr1]
 * With after-usr1 the SECONDS count from SIGUSR1, which a test sends once
 * the capture is attached, however long attaching takes: until then it
 * burns the same way (for at most ten minutes). It prints "ready" once it
 * handles the signal. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "clock.h"

static volatile unsigned long sink;
static volatile sig_atomic_t signalled;

static void on_usr1(int sig)
{
	(void)sig;
	signalled = 1;
}

#define BURN(iters)                                                  \
	do {                                                         \
		unsigned long h = sink;                              \
		for (unsigned long i = 0; i < (iters); i++)          \
			h = (h ^ i) * 0x9E3779B97F4A7C15UL + 7;      \
		sink = h;                                            \
	} while (0)

__attribute__((noinline)) void work_fifty(void) { BURN(5000000); }
__attribute__((noinline)) void work_thirty(void) { BURN(3000000); }
__attribute__((noinline)) void work_twenty(void) { BURN(2000000); }

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	double until = now() + seconds;
	int after_usr1 = argc > 2 && !strcmp(argv[2], "after-usr1");
	if (after_usr1) {
		signal(SIGUSR1, on_usr1);
		until = now() + 600;
		puts("ready");
		fflush(stdout);
	}
	while (now() < until) {
		if (after_usr1 && signalled) {
			after_usr1 = 0;
			until = now() + seconds;
		}
		static void (*const work[3])(void) = { work_fifty, work_thirty, work_twenty };
		int first = rand() % 3, second = (first + 1 + rand() % 2) % 3;
		work[first]();
		work[second]();
		work[3 - first - second]();
	}
	return 0;
}
