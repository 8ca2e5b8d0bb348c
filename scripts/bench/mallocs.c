/* The program of scripts/bench/alloc_cost.py: N malloc(64)/free pairs,
 * called through pointers so that gcc -O2 keeps every call, timed from a
 * byte on stdin (once a tracer is attached) to its "done" line. Usage:
 * mallocs N. */
#include <stdio.h>
#include <stdlib.h>

void *(*volatile alloc)(size_t) = malloc;
void (*volatile release)(void *) = free;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	printf("ready\n");
	fflush(stdout);
	getchar();
	for (long i = 0; i < n; i++) {
		char *p = alloc(64);
		p[0] = (char)i;
		release(p);
	}
	printf("done\n");
	fflush(stdout);
	getchar();
	return 0;
}
