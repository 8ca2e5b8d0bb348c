/* Threads that wait 5 ms at a time, and one that waits 2 s once, all in
 * the same pipe read, for the flight recorder's wait trigger (gcc -O2).
 * The main thread writes a byte to each reader's pipe every 5 ms; at a
 * random moment 6 to 10 s after its start it leaves the thread named
 * "stalled" without one for 2 s, then prints "stall FROM TO" (seconds
 * since its start) and goes on until killed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define READERS 5 /* the last one is "stalled" */

static int pipes[READERS][2];

__attribute__((noinline)) void reader_loop(int fd)
{
	char c;

	while (read(fd, &c, 1) >= 0)
		;
}

static void *reader(void *arg)
{
	long i = (long)arg;
	char name[16];

	if (i == READERS - 1)
		snprintf(name, sizeof(name), "stalled");
	else
		snprintf(name, sizeof(name), "reader-%ld", i);
	pthread_setname_np(pthread_self(), name);
	reader_loop(pipes[i][0]);
	return NULL;
}

static void feed(int n)
{
	for (int i = 0; i < n; i++)
		if (write(pipes[i][1], "x", 1) != 1)
			exit(1);
}

int main(void)
{
	struct timespec tick = {0, 5000000};
	double start = now();
	pthread_t t;

	srand((unsigned)(start * 1e6) ^ (unsigned)getpid());
	double at = 6.0 + 4.0 * rand() / RAND_MAX;
	for (long i = 0; i < READERS; i++) {
		if (pipe(pipes[i]) || pthread_create(&t, NULL, reader, (void *)i))
			return 1;
	}
	while (now() < start + at) {
		feed(READERS);
		nanosleep(&tick, NULL);
	}
	while (now() < start + at + 2.0) {
		feed(READERS - 1);
		nanosleep(&tick, NULL);
	}
	feed(READERS);
	printf("stall %.3f %.3f\n", at, now() - start);
	fflush(stdout);
	for (;;) {
		feed(READERS);
		nanosleep(&tick, NULL);
	}
}
