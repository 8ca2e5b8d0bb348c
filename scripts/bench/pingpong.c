/* Two threads pass a byte back and forth through two pipes, both pinned to
 * CPU 0, so every hand-over is a context switch. Prints the number of
 * context switches taken. Usage: pingpong ROUND_TRIPS */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

static int ping[2], pong[2];
static long trips;

static void *echo(void *arg)
{
	char c;
	(void)arg;
	for (long i = 0; i < trips; i++) {
		if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1)
			exit(1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	cpu_set_t one;
	pthread_t t;
	struct rusage ru;
	char c = 'x';

	trips = argc > 1 ? atol(argv[1]) : 200000;
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	sched_setaffinity(0, sizeof(one), &one);
	if (pipe(ping) || pipe(pong))
		return 1;
	pthread_create(&t, NULL, echo, NULL);
	for (long i = 0; i < trips; i++) {
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
			return 1;
	}
	pthread_join(t, NULL);
	getrusage(RUSAGE_SELF, &ru);
	printf("%ld\n", ru.ru_nvcsw + ru.ru_nivcsw);
	return 0;
}
