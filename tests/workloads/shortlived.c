/* Burns CPU in one named function for SECONDS, then exits: a short-lived
 * process for symbolization tests. With a second argument "addr" it first
 * prints the function's address, so a test can symbolize it without BPF.
 * Usage: shortlived SECONDS [addr] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Not static and not exported: a stripped executable has no symbol for it. */
__attribute__((noinline)) void shortlived_burn(double until)
{
	while (now() < until) {
		unsigned long h = sink;
		for (unsigned long i = 0; i < 2000000; i++)
			h = (h ^ i) * 0x9E3779B97F4A7C15UL + 7;
		sink = h;
	}
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1;
	if (argc > 2 && strcmp(argv[2], "addr") == 0) {
		printf("%p\n", (void *)shortlived_burn);
		fflush(stdout);
	}
	shortlived_burn(now() + seconds);
	return 0;
}
