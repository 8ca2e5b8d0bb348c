/* A storm of millisecond processes: `blink spawn N` runs this program N
 * times, one after another, each as `blink burn`, which burns about a
 * millisecond of CPU in blink_burn and exits: each process lives about as
 * long as its exec and its loader take, gone before a profiler that reads
 * /proc could read it. The spawner prints how many it ran and their CPU
 * time (the kernel's account: its children's utime and stime). With
 * PAUSE_MS, the spawner waits that long before the first child, as a
 * server starts before it forks its workers.
 * Usage: blink spawn N [PAUSE_MS] | blink burn */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void blink_burn(double until)
{
	do {
		unsigned long h = sink;
		for (unsigned long i = 0; i < 2000; i++)
			h = (h ^ i) * 0x9E3779B97F4A7C15UL + 7;
		sink = h;
	} while (now() < until);
}

static int spawn(const char *self, unsigned long n)
{
	char *args[] = {(char *)"blink", (char *)"burn", NULL};
	unsigned long ran = 0;

	for (unsigned long i = 0; i < n; i++) {
		pid_t pid;
		int status;

		if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0)
			continue;
		if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
			ran++;
	}
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	printf("spawner %d\nran %lu\nchildren cpu %.6f\n", (int)getpid(), ran,
	       ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
	return ran == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "burn") == 0) {
		blink_burn(now() + 0.001);
		return 0;
	}
	if (argc > 2 && strcmp(argv[1], "spawn") == 0) {
		char self[4096];
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (len <= 0)
			return 2;
		self[len] = 0;
		if (argc > 3) {
			unsigned long ms = strtoul(argv[3], NULL, 10);
			struct timespec pause = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

			nanosleep(&pause, NULL);
		}
		return spawn(self, strtoul(argv[2], NULL, 10));
	}
	fprintf(stderr, "usage: blink spawn N [PAUSE_MS] | blink burn\n");
	return 2;
}
