/* Built the way users build: plain `gcc -O2`, no frame-pointer flags, every
 * wait through glibc. Usage: plain MODE SECONDS [ROUND_MS], where MODE is
 *   split  CPU time split 50/30/20 between work_fifty/thirty/twenty, each
 *          calling the same leaf `spin`, under main, in rounds of about
 *          ROUND_MS (a third argument, 20 by default; see below);
 *   slower as split, but work_twenty runs twice per round: its time doubled,
 *          the regression `diff --fail-above` is tested on;
 *   deep   a 10-deep chain level1 .. level10 spinning at the bottom;
 *   waits  three threads: `napper` sleeps through usleep() in nap_50ms,
 *          `reader` blocks in read() on a pipe in wait_for_byte, woken
 *          every 20 ms by `writer` from notify_reader;
 *   wakeups  waits' three threads, plus `waiter` blocked on a condition
 *          variable in wait_for_work, signalled every 30 ms by `releaser`
 *          from release_worker;
 *   signal `interrupted` loops under main while a profiling timer's
 *          signal every 4 ms of its CPU runs `on_tick`, which spins about
 *          1 ms in `in_handler`: a share of the time in a signal handler,
 *          on the stack whose frame the kernel's signal frame interrupted;
 *   idle   blocked until killed, as a server's idle threads are: main in
 *          pause() under idle_in_main, thread `idler` in read() on a pipe
 *          nobody writes, under wait_forever; prints "ready" first. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static double until;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void spin(unsigned long iters)
{
	unsigned long h = sink;
	for (unsigned long i = 0; i < iters; i++)
		h = (h ^ i) * 0x9E3779B97F4A7C15UL + 7;
	sink = h;
}

/* A round is the three functions in a random order, each scaled by k (1000
 * to 1099, drawn each round) times ROUND_MS / 20, about ROUND_MS on this
 * machine; 20 ms is ten periods of a 499 Hz sampler, and a test sampling
 * at 49 Hz asks for 200. Each function's count of samples in a round is then the
 * floor or the ceiling of its length in periods, the round's random order
 * and length move the sampler's grid over it, and the shares' error shrinks
 * with the rounds (0.3 points at 499 Hz over 3 s). A round shorter than the
 * period gives each sample a phase instead, and the phase lags by the
 * period's remainder modulo the round: at 1.74 ms against 2.004 ms the
 * phases spread, but a CPU 15% slower (a busy host) makes the round the
 * period and every sample lands at one point of it: fifty read 36.4% in one
 * of four runs here with the work scaled by 1.15, 43% over HTTP in a CI run,
 * and perf's sampler, at another phase of the same process, 36.3%. */
__attribute__((noinline)) void work_fifty(unsigned long k) { spin(300 * k); sink++; }
__attribute__((noinline)) void work_thirty(unsigned long k) { spin(180 * k); sink++; }
__attribute__((noinline)) void work_twenty(unsigned long k) { spin(120 * k); sink++; }

#define LEVEL(n, next)                                                 \
	__attribute__((noinline)) void level##n(void) { next(); sink++; }
__attribute__((noinline)) void bottom(void) { spin(100000); sink++; }
LEVEL(10, bottom)
LEVEL(9, level10)
LEVEL(8, level9)
LEVEL(7, level8)
LEVEL(6, level7)
LEVEL(5, level6)
LEVEL(4, level5)
LEVEL(3, level4)
LEVEL(2, level3)
LEVEL(1, level2)

__attribute__((noinline)) void in_handler(void) { spin(300000); sink++; }

static void on_tick(int sig)
{
	(void)sig;
	in_handler();
}

/* Long enough that the loop's clock reads are a negligible share of its
 * time on any machine: with 1,000 iterations, in an emulated guest (Debian
 * 5.10 under TCG) one in ten of the handler's samples interrupted the
 * loop's clock_gettime instead (perf --call-graph dwarf: 807 of 897 under
 * `interrupted`). */
__attribute__((noinline)) void interrupted(void) { spin(100000); sink++; }

static int pipefd[2];

__attribute__((noinline)) void nap_50ms(void) { usleep(50000); sink++; }

__attribute__((noinline)) char wait_for_byte(int fd)
{
	char c = 0;
	if (read(fd, &c, 1) != 1)
		return 0;
	return c;
}

__attribute__((noinline)) void notify_reader(void)
{
	if (write(pipefd[1], "x", 1) != 1)
		abort();
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static int work_items, done;

__attribute__((noinline)) int wait_for_work(void)
{
	int quit;
	pthread_mutex_lock(&lock);
	while (!work_items && !done)
		pthread_cond_wait(&work_ready, &lock);
	quit = !work_items && done;
	if (work_items)
		work_items--;
	pthread_mutex_unlock(&lock);
	return !quit;
}

__attribute__((noinline)) void release_worker(int last)
{
	pthread_mutex_lock(&lock);
	if (last)
		done = 1;
	else
		work_items++;
	pthread_cond_signal(&work_ready);
	pthread_mutex_unlock(&lock);
}

static void *waiter(void *arg)
{
	(void)arg;
	while (wait_for_work())
		sink++;
	return NULL;
}

static void *releaser(void *arg)
{
	(void)arg;
	while (now() < until) {
		usleep(30000);
		release_worker(0);
	}
	release_worker(1);
	return NULL;
}

static void *napper(void *arg)
{
	(void)arg;
	while (now() < until)
		nap_50ms();
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	while (wait_for_byte(pipefd[0]) == 'x')
		sink++;
	return NULL;
}

static void *writer(void *arg)
{
	(void)arg;
	while (now() < until) {
		usleep(20000);
		notify_reader();
	}
	if (write(pipefd[1], "q", 1) != 1)
		abort();
	return NULL;
}

__attribute__((noinline)) void wait_forever(int fd)
{
	char byte;
	if (read(fd, &byte, 1) < 0)
		abort();
	sink++;
}

static void *idler(void *arg)
{
	int *fds = arg;
	wait_forever(fds[0]);
	return NULL;
}

__attribute__((noinline)) void idle_in_main(void)
{
	pause();
	sink++;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "split";
	until = now() + (argc > 2 ? atof(argv[2]) : 5);
	if (!strcmp(mode, "split") || !strcmp(mode, "slower")) {
		int twice = !strcmp(mode, "slower");
		unsigned long round_ms = argc > 3 && atoi(argv[3]) > 0 ? (unsigned long)atoi(argv[3]) : 20;
		srand(getpid());
		while (now() < until) {
			unsigned long k = (1000 + rand() % 100) * round_ms;
			int first = rand() % 3, second = (first + 1 + rand() % 2) % 3;
			for (int i = 0; i < 3; i++) {
				int which = i == 0 ? first : i == 1 ? second : 3 - first - second;
				if (which == 0)
					work_fifty(k);
				else if (which == 1)
					work_thirty(k);
				else
					work_twenty(k);
			}
			if (twice)
				work_twenty(k);
		}
	} else if (!strcmp(mode, "signal")) {
		struct itimerval every = { { 0, 4000 }, { 0, 4000 } };
		signal(SIGPROF, on_tick);
		setitimer(ITIMER_PROF, &every, NULL);
		while (now() < until)
			interrupted();
	} else if (!strcmp(mode, "idle")) {
		static int fds[2];
		pthread_t t;
		if (pipe(fds))
			return 1;
		pthread_create(&t, NULL, idler, fds);
		pthread_setname_np(t, "idler");
		puts("ready");
		fflush(stdout);
		idle_in_main();
	} else if (!strcmp(mode, "deep")) {
		while (now() < until)
			level1();
	} else if (!strcmp(mode, "waits") || !strcmp(mode, "wakeups")) {
		int n = strcmp(mode, "waits") ? 5 : 3;
		pthread_t t[5];
		if (pipe(pipefd))
			return 1;
		pthread_create(&t[0], NULL, napper, NULL);
		pthread_setname_np(t[0], "napper");
		pthread_create(&t[1], NULL, reader, NULL);
		pthread_setname_np(t[1], "reader");
		pthread_create(&t[2], NULL, writer, NULL);
		pthread_setname_np(t[2], "writer");
		if (n == 5) {
			pthread_create(&t[3], NULL, waiter, NULL);
			pthread_setname_np(t[3], "waiter");
			pthread_create(&t[4], NULL, releaser, NULL);
			pthread_setname_np(t[4], "releaser");
		}
		for (int i = 0; i < n; i++)
			pthread_join(t[i], NULL);
	}
	return 0;
}
