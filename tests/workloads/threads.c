/* Three named threads, each burning CPU in its own function.
 * Usage: threads SECONDS [NAME1 NAME2 NAME3] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "clock.h"

static volatile unsigned long sink;
static double until;

#define BURNER(name)                                                  \
	__attribute__((noinline)) void *name(void *arg)               \
	{                                                             \
		(void)arg;                                            \
		while (now() < until)                                 \
			for (unsigned long i = 0; i < 100000; i++)    \
				sink = sink * 33 + i;                 \
		return NULL;                                          \
	}
BURNER(burn_in_alpha)
BURNER(burn_in_beta)
BURNER(burn_in_gamma)

int main(int argc, char **argv)
{
	void *(*fns[3])(void *) = { burn_in_alpha, burn_in_beta, burn_in_gamma };
	const char *names[3] = { "alpha", "beta", "gamma" };
	pthread_t t[3];

	until = now() + (argc > 1 ? atof(argv[1]) : 5);
	for (int i = 0; i < 3; i++) {
		if (argc > 2 + i)
			names[i] = argv[2 + i];
		pthread_create(&t[i], NULL, fns[i], NULL);
		/* The kernel keeps 15 bytes of a thread name. */
		char buf[16];
		strncpy(buf, names[i], 15);
		buf[15] = 0;
		pthread_setname_np(t[i], buf);
	}
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return 0;
}
