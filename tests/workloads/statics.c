/* A gcc -O2 program whose time is in static functions: the names a
 * distribution's strip removes with .symtab (tests/debuginfo.rs). For
 * SECONDS (argv[1], default 3) it repeats rounds of 60 ms: 30 ms in
 * parse_row, 20 in hash_key, 10 in flush_page, each called by work(). */
#include <stdlib.h>

#include "clock.h"

static volatile unsigned long sink;

static __attribute__((noinline, noclone)) void parse_row(double until)
{
	while (now() < until)
		for (int i = 0; i < 5000; i++)
			sink++;
}

static __attribute__((noinline, noclone)) void hash_key(double until)
{
	while (now() < until)
		for (int i = 0; i < 5000; i++)
			sink ^= sink << 1;
}

static __attribute__((noinline, noclone)) void flush_page(double until)
{
	while (now() < until)
		for (int i = 0; i < 5000; i++)
			sink += 7;
}

static __attribute__((noinline, noclone)) void work(double end)
{
	for (double t = now(); t < end; t = now()) {
		parse_row(t + 0.030);
		hash_key(t + 0.050);
		flush_page(t + 0.060);
	}
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3.0;
	work(now() + secs);
	return 0;
}
