/* CPU time split 50/30/20 between three functions, by equal-cost loop
 * iterations. Usage: split SECONDS */
#include <stdlib.h>
#include <time.h>
#include "clock.h"

static volatile unsigned long sink;

#define BURN(iters)                                                  \
	do {                                                         \
		unsigned long h = sink;                              \
		for (unsigned long i = 0; i < (iters); i++)          \
			h = (h ^ i) * 0x9E3779B97F4A7C15UL + 7;      \
		sink = h;                                            \
	} while (0)

__attribute__((noinline)) void work_fifty(void) { BURN(500000); }
__attribute__((noinline)) void work_thirty(void) { BURN(300000); }
__attribute__((noinline)) void work_twenty(void) { BURN(200000); }

int main(int argc, char **argv)
{
	double until = now() + (argc > 1 ? atof(argv[1]) : 5);
	while (now() < until) {
		work_fifty();
		work_thirty();
		work_twenty();
	}
	return 0;
}
