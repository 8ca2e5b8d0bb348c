/* Processes for cgroup-scoped captures (gcc -O2, no frame pointers).
 * Usage:
 *   scoped inside SECONDS    burn in burn_inside; on SIGUSR1 (which the
 *                            test sends once the capture is attached, however
 *                            long that takes) fork a child that burns in
 *                            burn_in_late_child: it is born in the parent's
 *                            cgroup, during the capture;
 *   scoped outside SECONDS   burn in burn_outside. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile sig_atomic_t fork_now;

static void on_usr1(int sig)
{
	(void)sig;
	fork_now = 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define BURNER(name)                                         \
	__attribute__((noinline)) void name(double until)    \
	{                                                    \
		while (now() < until)                        \
			for (int i = 0; i < 10000; i++)      \
				sink++;                      \
	}

BURNER(burn_inside)
BURNER(burn_in_late_child)
BURNER(burn_outside)

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	double end = now() + atof(argv[2]);
	if (!strcmp(argv[1], "outside")) {
		burn_outside(end);
		return 0;
	}
	signal(SIGUSR1, on_usr1);
	while (!fork_now && now() < end)
		burn_inside(now() + 0.02);
	if (!fork_now)
		return 0;
	pid_t p = fork();
	if (p == 0) {
		burn_in_late_child(end);
		_exit(0);
	}
	burn_inside(end);
	waitpid(p, NULL, 0);
	return 0;
}
