/* A reader thread blocked in read() on a pipe that a writer thread feeds
 * every 100 ms. Prints the reader's TID, then runs. Usage: piper SECONDS */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "rawsys.h"
#include "clock.h"

static int fds[2];
static double until;

__attribute__((noinline)) long read_side(char *buf)
{
	return raw_syscall3(SYS_read, fds[0], (long)buf, 1);
}

static void *reader(void *arg)
{
	char c;
	(void)arg;
	printf("%ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	while (read_side(&c) == 1)
		;
	return NULL;
}

__attribute__((noinline)) void write_side(void)
{
	struct timespec ts = { 0, 100 * 1000000L };
	raw_syscall3(SYS_nanosleep, (long)&ts, 0, 0);
	if (write(fds[1], "x", 1) != 1)
		exit(1);
}

int main(int argc, char **argv)
{
	pthread_t t;
	until = now() + (argc > 1 ? atof(argv[1]) : 5);
	if (pipe(fds))
		return 1;
	pthread_create(&t, NULL, reader, NULL);
	pthread_setname_np(t, "reader");
	while (now() < until)
		write_side();
	close(fds[1]);
	pthread_join(t, NULL);
	return 0;
}
