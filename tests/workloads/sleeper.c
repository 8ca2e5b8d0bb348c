/* Spins ~2 ms, then sleeps 50 ms in nanosleep, in a loop: about 96% of its
 * wall time off-CPU, sleeping. Usage: sleeper SECONDS [mixed]; with mixed
 * each round also sleeps 10 ms in short_nap and 100 ms in long_nap, waits
 * on either side of the --min-block and --max-block bounds tested. */
#include <stdlib.h>
#include <time.h>
#include "rawsys.h"
#include "clock.h"

static volatile unsigned long sink;

__attribute__((noinline)) void spin_phase(double seconds)
{
	double until = now() + seconds;
	while (now() < until)
		for (int i = 0; i < 20000; i++)
			sink++;
}

__attribute__((noinline)) void sleep_phase(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
}

__attribute__((noinline)) void short_nap(void) { sleep_phase(10); sink++; }
__attribute__((noinline)) void long_nap(void) { sleep_phase(100); sink++; }

int main(int argc, char **argv)
{
	double until = now() + (argc > 1 ? atof(argv[1]) : 5);
	int mixed = argc > 2;
	while (now() < until) {
		spin_phase(0.002);
		sleep_phase(50);
		if (mixed) {
			short_nap();
			long_nap();
		}
	}
	return 0;
}
