/* A program in phases, for time-sliced captures (gcc -O2, no frame
 * pointers). Usage:
 *   phases burn    2.5 s on the CPU in phase_a, then 2.5 s in phase_b;
 *   phases sleep   0.3 s on the CPU in warm_up, then one 2.5 s sleep in
 *                  nap_a and one in nap_b (libc's nanosleep): each wait is
 *                  one off-CPU interval over 25 slices. (A wait within
 *                  milliseconds of execve is walked by frame pointers,
 *                  before fgbpf has read the new image's unwind tables: a
 *                  limitation the summary counts; tests/unwind.rs measures
 *                  unwinding, this workload measures time.) */
#include <string.h>
#include <time.h>

#include "clock.h"

static volatile unsigned long sink;

__attribute__((noinline)) void phase_a(double until)
{
	while (now() < until)
		for (int i = 0; i < 10000; i++)
			sink++;
}

__attribute__((noinline)) void phase_b(double until)
{
	while (now() < until)
		for (int i = 0; i < 10000; i++)
			sink += 2;
}

static void nap(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
	nanosleep(&ts, 0);
}

__attribute__((noinline)) void nap_a(void) { nap(2.5); sink++; }
__attribute__((noinline)) void nap_b(void) { nap(2.5); sink++; }

int main(int argc, char **argv)
{
	double start = now();
	if (argc > 1 && !strcmp(argv[1], "sleep")) {
		phase_a(start + 0.3);
		nap_a();
		nap_b();
		return 0;
	}
	phase_a(start + 2.5);
	phase_b(start + 5.0);
	return 0;
}
