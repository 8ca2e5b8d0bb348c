/* Two programs run one after the other under one PID, as the kernel does
 * once pid_max wraps: the first is started and waited for, then the second
 * is started on the PID the first had (clone3's set_tid, Linux 5.5, which
 * needs CAP_SYS_ADMIN: run as root). Prints each child's PID as
 * "first PID" and "second PID"; exits 2 when the PID could not be given
 * again (taken by another process in between: the caller may retry).
 * Usage: reuse PROGRAM [ARGS...] -- PROGRAM [ARGS...] */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/sched.h>

static pid_t start(char **argv, pid_t on)
{
	struct clone_args args;
	pid_t want = on;
	long pid;

	memset(&args, 0, sizeof(args));
	args.exit_signal = SIGCHLD;
	if (on) {
		args.set_tid = (uint64_t)(uintptr_t)&want;
		args.set_tid_size = 1;
	}
	pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	return (pid_t)pid;
}

static int finish(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(int argc, char **argv)
{
	char **second = NULL;
	pid_t first, again;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			argv[i] = NULL;
			second = &argv[i + 1];
		}
	}
	if (argc < 2 || !second || !*second) {
		fprintf(stderr, "usage: reuse PROGRAM [ARGS...] -- PROGRAM [ARGS...]\n");
		return 1;
	}
	first = start(&argv[1], 0);
	if (first < 0) {
		fprintf(stderr, "reuse: clone3: %s\n", strerror(-first));
		return 1;
	}
	printf("first %d\n", first);
	fflush(stdout);
	if (finish(first) != 0)
		return 1;
	again = start(second, first);
	if (again == -EEXIST) {
		fprintf(stderr, "reuse: PID %d was taken again before the second program\n", first);
		return 2;
	}
	if (again < 0) {
		fprintf(stderr, "reuse: clone3 with set_tid %d: %s\n", first, strerror(-again));
		return 1;
	}
	printf("second %d\n", again);
	fflush(stdout);
	return finish(again) == 0 ? 0 : 1;
}
