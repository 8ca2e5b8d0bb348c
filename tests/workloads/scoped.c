/* Processes for cgroup-scoped captures (gcc -O2, no frame pointers).
 * Usage:
 *   scoped inside SECONDS    burn in burn_inside; after 1 s fork a child
 *                            that burns in burn_in_late_child (it is born
 *                            in the parent's cgroup, during the capture);
 *   scoped outside SECONDS   burn in burn_outside. */
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
	burn_inside(now() + 1.0);
	pid_t p = fork();
	if (p == 0) {
		burn_in_late_child(end);
		_exit(0);
	}
	burn_inside(end);
	waitpid(p, NULL, 0);
	return 0;
}
