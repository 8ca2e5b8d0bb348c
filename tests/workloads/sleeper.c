/* Spins ~2 ms, then sleeps 50 ms in nanosleep, in a loop: about 96% of its
 * wall time off-CPU, sleeping. Usage: sleeper SECONDS */
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

int main(int argc, char **argv)
{
	double until = now() + (argc > 1 ? atof(argv[1]) : 5);
	while (now() < until) {
		spin_phase(0.002);
		sleep_phase(50);
	}
	return 0;
}
