/* A 20-deep call chain ending in a CPU-bound leaf. Usage: deep SECONDS */
#include <stdlib.h>
#include <time.h>
#include "clock.h"

static volatile unsigned long sink;
static double until;

__attribute__((noinline)) void leaf_burn(void)
{
	while (now() < until)
		for (unsigned long i = 0; i < 100000; i++)
			sink = sink * 31 + i;
}

#define LEVEL(n, next) \
	__attribute__((noinline)) void level_##n(void) { next(); sink++; }
LEVEL(20, leaf_burn)
LEVEL(19, level_20) LEVEL(18, level_19) LEVEL(17, level_18) LEVEL(16, level_17)
LEVEL(15, level_16) LEVEL(14, level_15) LEVEL(13, level_14) LEVEL(12, level_13)
LEVEL(11, level_12) LEVEL(10, level_11) LEVEL(9, level_10) LEVEL(8, level_9)
LEVEL(7, level_8) LEVEL(6, level_7) LEVEL(5, level_6) LEVEL(4, level_5)
LEVEL(3, level_4) LEVEL(2, level_3) LEVEL(1, level_2)

int main(int argc, char **argv)
{
	until = now() + (argc > 1 ? atof(argv[1]) : 5);
	level_1();
	return 0;
}
