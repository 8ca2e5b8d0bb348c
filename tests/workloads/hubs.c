/* A server whose sessions wait in one helper of their own for two different
 * things, as a database's do (tests/wall.rs): wait_event() polls a file,
 * for a client's next request (read_client, a timer standing for the
 * client's think time) or for the row lock (lock_row -> wait_for_lock), a
 * token passed through a pipe whose reads do not block (a session that
 * lost the token to another polls again). SESSIONS (4) threads named
 * "session" loop for SECONDS (argv[1], default 6): wait THINK ms for a
 * request (argv[2], default 4), take the row lock, work 1 ms holding it.
 * A "vacuum" thread holds the lock 30 ms at a time, 10 ms apart, as a long
 * transaction does: most of the sessions' time waits for the lock, about a
 * quarter for requests. At the end it prints its own account of the
 * sessions' time, as a server's wait-event view would:
 *   account lock_wait_s client_wait_s session_s */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "clock.h"

#define SESSIONS 4

static int lock_pipe[2];
static volatile unsigned long sink;
static double end_at, think = 0.004;
static double lock_wait[SESSIONS], client_wait[SESSIONS], lived[SESSIONS];

__attribute__((noinline)) void wait_event(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (poll(&p, 1, 100) == 0 && now() < end_at + 1.0)
		;
}

__attribute__((noinline)) int wait_for_lock(void)
{
	char c;
	for (;;) {
		wait_event(lock_pipe[0]);
		if (read(lock_pipe[0], &c, 1) == 1)
			return 1;
		if (now() > end_at + 1.0)
			return 0;
	}
}

__attribute__((noinline)) int lock_row(void)
{
	return wait_for_lock();
}

__attribute__((noinline)) void unlock_row(void)
{
	char c = 'L';
	if (write(lock_pipe[1], &c, 1) != 1)
		abort();
}

__attribute__((noinline)) void update_row(double secs)
{
	double until = now() + secs;
	while (now() < until)
		for (int i = 0; i < 2000; i++)
			sink++;
}

/* The client's next request: THINK seconds after the last answer. */
__attribute__((noinline)) void read_client(int timer)
{
	struct itimerspec in = { .it_value = { .tv_sec = 0, .tv_nsec = (long)(think * 1e9) } };
	uint64_t fired;
	if (timerfd_settime(timer, 0, &in, NULL))
		abort();
	wait_event(timer);
	if (read(timer, &fired, sizeof fired) != sizeof fired)
		abort();
}

static void *session(void *arg)
{
	int s = (int)(long)arg;
	pthread_setname_np(pthread_self(), "session");
	int timer = timerfd_create(CLOCK_MONOTONIC, 0);
	if (timer < 0)
		abort();
	double start = now();
	while (now() < end_at) {
		double t = now();
		read_client(timer);
		client_wait[s] += now() - t;
		t = now();
		if (!lock_row())
			break;
		lock_wait[s] += now() - t;
		update_row(0.001);
		unlock_row();
	}
	lived[s] = now() - start;
	return NULL;
}

__attribute__((noinline)) void long_transaction(void)
{
	if (!lock_row())
		return;
	usleep(30000);
	unlock_row();
}

static void *vacuum(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "vacuum");
	while (now() < end_at) {
		long_transaction();
		usleep(10000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 6.0;
	if (argc > 2)
		think = atof(argv[2]) / 1e3;
	end_at = now() + secs;
	if (pipe2(lock_pipe, O_NONBLOCK))
		abort();
	unlock_row();
	pthread_t v, t[SESSIONS];
	pthread_create(&v, NULL, vacuum, NULL);
	for (long s = 0; s < SESSIONS; s++)
		pthread_create(&t[s], NULL, session, (void *)s);
	double lw = 0, cw = 0, l = 0;
	for (int s = 0; s < SESSIONS; s++) {
		pthread_join(t[s], NULL);
		lw += lock_wait[s];
		cw += client_wait[s];
		l += lived[s];
	}
	printf("account %.4f %.4f %.4f\n", lw, cw, l);
	fflush(stdout);
	pthread_join(v, NULL);
	return 0;
}
