/* The churning load of scripts/soak.sh: what a busy host does to a
 * profiler over hours, compressed.
 *
 *   load SECONDS [SLOWER]
 *
 * Threads, each in a loop until SECONDS pass:
 *   - spawner: fork + exec /bin/true (short processes, execs);
 *   - threader: short threads that compute a little and exit;
 *   - loader: dlopen, call and dlclose libz and libm (code mapped and
 *     unmapped);
 *   - namespacer: every 500 ms, a child in a private mount namespace that
 *     copies this binary onto a tmpfs only it can see and execs it as
 *     `load burn`, which computes 100 ms in burn_in_namespace();
 *   - main: computes in churn_compute() a fifth of the time.
 * SLOWER (default 1) multiplies the churning threads' pauses: 10 makes a
 * tenth of the processes, threads and dlopens (scripts/flight-cost.sh).
 * At the end it prints how many of each it made. Built with gcc -O2 and no
 * frame-pointer flags, as users' programs are. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double until, slower = 1;

static void pause_for(double usecs)
{
	usleep((useconds_t)(usecs * slower));
}
static volatile unsigned long sink;
static unsigned long spawned, threads, loads, namespaced;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void spin(double secs)
{
	double end = now() + secs;
	while (now() < end)
		for (int i = 0; i < 1000; i++)
			sink += i;
}

__attribute__((noinline)) void churn_compute(void) { spin(0.002); }
__attribute__((noinline)) void burn_in_namespace(void) { spin(0.1); }
__attribute__((noinline)) void short_thread_work(void) { spin(0.0005); }

static void *spawner(void *arg)
{
	(void)arg;
	while (now() < until) {
		pid_t pid = fork();
		if (pid == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		if (pid > 0 && waitpid(pid, NULL, 0) == pid)
			spawned++;
		pause_for(2000);
	}
	return NULL;
}

static void *short_thread(void *arg)
{
	(void)arg;
	short_thread_work();
	return NULL;
}

static void *threader(void *arg)
{
	(void)arg;
	while (now() < until) {
		pthread_t t;
		if (pthread_create(&t, NULL, short_thread, NULL) == 0) {
			pthread_join(t, NULL);
			threads++;
		}
		pause_for(1000);
	}
	return NULL;
}

static void *loader(void *arg)
{
	static const char *const libs[][2] = {
		{"libz.so.1", "zlibVersion"},
		{"libm.so.6", "cbrt"},
	};
	(void)arg;
	while (now() < until) {
		for (unsigned i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
			void *h = dlopen(libs[i][0], RTLD_NOW | RTLD_LOCAL);
			if (!h)
				continue;
			if (dlsym(h, libs[i][1]))
				loads++;
			dlclose(h);
		}
		pause_for(10000);
	}
	return NULL;
}

/* In a child: a private mount namespace with a tmpfs over `dir` holding
 * a copy of this binary, executed from there: a file no other namespace
 * can open. */
static void namespaced_child(const char *self, const char *dir)
{
	char path[64];
	struct stat st;
	int in, out;

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		_exit(1);
	if (mount("none", dir, "tmpfs", 0, "size=16m"))
		_exit(1);
	snprintf(path, sizeof(path), "%s/load-ns", dir);
	in = open(self, O_RDONLY);
	out = open(path, O_WRONLY | O_CREAT | O_EXCL, 0755);
	if (in < 0 || out < 0 || fstat(in, &st) || sendfile(out, in, NULL, st.st_size) != st.st_size)
		_exit(1);
	close(out);
	execl(path, "load-ns", "burn", (char *)NULL);
	_exit(127);
}

static void *namespacer(void *arg)
{
	char self[4096], dir[] = "/tmp/fgbpf-soak-XXXXXX";
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	(void)arg;
	if (n <= 0 || !mkdtemp(dir))
		return NULL;
	self[n] = 0;
	while (now() < until) {
		pid_t pid = fork();
		int status;
		if (pid == 0)
			namespaced_child(self, dir);
		if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		    WEXITSTATUS(status) == 0)
			namespaced++;
		pause_for(500000);
	}
	rmdir(dir);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[4];

	if (argc > 1 && !strcmp(argv[1], "burn")) {
		burn_in_namespace();
		return 0;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: load SECONDS [SLOWER]\n");
		return 2;
	}
	until = now() + atof(argv[1]);
	if (argc > 2 && atof(argv[2]) >= 1)
		slower = atof(argv[2]);
	pthread_create(&t[0], NULL, spawner, NULL);
	pthread_create(&t[1], NULL, threader, NULL);
	pthread_create(&t[2], NULL, loader, NULL);
	pthread_create(&t[3], NULL, namespacer, NULL);
	while (now() < until) {
		churn_compute();
		usleep(8000);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("processes %lu threads %lu dlopens %lu namespaced %lu\n", spawned, threads, loads,
	       namespaced);
	return 0;
}
