/* `fgbpf events -e u:BINARY:target` (tests/events.rs): target() is
 * called exactly N times from caller_a() and M times from caller_b(),
 * N and M from the command line, after a start line on stdout and a
 * byte on stdin (so that the capture is attached before the first call).
 * Built with gcc -O2: noinline and a compiler barrier keep each call. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) void target(unsigned long v)
{
	sink += v;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void caller_a(long n)
{
	for (long i = 0; i < n; i++)
		target(i);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void caller_b(long n)
{
	for (long i = 0; i < n; i++)
		target(i * 3);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	long a = argc > 1 ? atol(argv[1]) : 1000;
	long b = argc > 2 ? atol(argv[2]) : 1000;
	char c;

	printf("ready %d\n", getpid());
	fflush(stdout);
	if (read(0, &c, 1) < 0)
		return 1;
	caller_a(a);
	caller_b(b);
	printf("done\n");
	fflush(stdout);
	/* Stays until stdin closes: the capture reads its maps at the end. */
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
