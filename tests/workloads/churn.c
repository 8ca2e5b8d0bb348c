/* Churn that fills kernel maps if fgbpf never forgets what exited.
 * Usage:
 *   churn threads N SECONDS   N short threads one after another, then
 *                             `nap` sleeps 10 ms at a time for SECONDS;
 *   churn forks N SECONDS     N short child processes one after another,
 *                             then one child spinning in burn_in_child;
 *   churn naps N SECONDS      N short child processes one after another,
 *                             each sleeping SECONDS in nap_in_child;
 *   churn storm N M           N short child processes, then M short
 *                             threads, one after another; then at once a
 *                             late child burning 1 s in late_work and a
 *                             late thread napping 50 x 20 ms in late_nap:
 *                             the work that follows a storm. The late
 *                             child prints `late_work cpu SECONDS`, the
 *                             CPU time the kernel counted for it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *short_thread(void *arg)
{
	(void)arg;
	sink++;
	return NULL;
}

__attribute__((noinline)) void nap(double seconds)
{
	double until = now() + seconds;
	while (now() < until)
		usleep(10000);
}

__attribute__((noinline)) void burn_in_child(double seconds)
{
	double until = now() + seconds;
	while (now() < until)
		for (int i = 0; i < 10000; i++)
			sink++;
}

__attribute__((noinline)) void late_work(double seconds)
{
	double until = now() + seconds;
	while (now() < until)
		for (int i = 0; i < 10000; i++)
			sink++;
}

__attribute__((noinline)) void late_nap(void)
{
	for (int i = 0; i < 50; i++)
		usleep(20000);
}

static void *late_thread(void *arg)
{
	(void)arg;
	late_nap();
	return NULL;
}

__attribute__((noinline)) void nap_in_child(double seconds)
{
	usleep((useconds_t)(seconds * 1e6));
	sink++;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	long n = atol(argv[2]);
	double seconds = atof(argv[3]);
	if (!strcmp(argv[1], "threads")) {
		for (long i = 0; i < n; i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, short_thread, NULL))
				return 1;
			pthread_join(t, NULL);
		}
		nap(seconds);
	} else if (!strcmp(argv[1], "forks")) {
		for (long i = 0; i < n; i++) {
			pid_t p = fork();
			if (p == 0)
				_exit(0);
			waitpid(p, NULL, 0);
		}
		pid_t p = fork();
		if (p == 0) {
			burn_in_child(seconds);
			_exit(0);
		}
		waitpid(p, NULL, 0);
	} else if (!strcmp(argv[1], "storm")) {
		long m = atol(argv[3]);
		for (long i = 0; i < n; i++) {
			pid_t p = fork();
			if (p == 0)
				_exit(0);
			waitpid(p, NULL, 0);
		}
		for (long i = 0; i < m; i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, short_thread, NULL))
				return 1;
			pthread_join(t, NULL);
		}
		pthread_t t;
		pid_t p = fork();
		if (p == 0) {
			struct timespec cpu;

			late_work(1.0);
			/* The kernel's account of the CPU it burned, for the
			 * samples expected of it. */
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
			printf("late_work cpu %.6f\n", cpu.tv_sec + cpu.tv_nsec / 1e9);
			fflush(stdout);
			_exit(0);
		}
		if (pthread_create(&t, NULL, late_thread, NULL))
			return 1;
		pthread_join(t, NULL);
		waitpid(p, NULL, 0);
	} else if (!strcmp(argv[1], "naps")) {
		for (long i = 0; i < n; i++) {
			pid_t p = fork();
			if (p == 0) {
				nap_in_child(seconds);
				_exit(0);
			}
			waitpid(p, NULL, 0);
		}
	}
	return 0;
}
