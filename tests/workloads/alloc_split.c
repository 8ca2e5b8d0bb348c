/* fgbpf alloc's test workload: allocates 50/30/20 of its bytes from
 * spend_a (malloc, 16 B to 4 KiB), spend_b (calloc, 4 KiB to 1 MiB) and
 * spend_c (posix_memalign, 16 B to 1 MiB), sizes log-uniform, each block
 * freed at once, except that `leak` keeps spend_b's blocks (spend_a's and
 * spend_c's are still freed). Sizes differ by function so that a wrong
 * weighing of small against large samples shows in the shares. With
 * `mmap`, spend_c maps and unmaps anonymous memory instead; with
 * `aligned`, it calls aligned_alloc(16, ...). Usage: split TOTAL_MIB
 * [leak] [mmap] [aligned] [wait]: with `wait`, prints "ready" and waits for a line on stdin before
 * allocating, and prints "done" and waits again before exiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static unsigned long long state = 88172645463325252ULL;
static volatile char sink;
static int leak_b, use_mmap, aligned;
static void **kept;
static size_t nkept, capkept;

static unsigned long long next(void)
{
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return state;
}

/* 2^from .. 2^to bytes, log-uniform. */
static size_t size_of_next(unsigned from, unsigned to)
{
	unsigned shift = from + next() % (to - from);
	size_t lo = (size_t)1 << shift;
	return lo + next() % lo;
}

static void use(char *p, size_t s)
{
	p[0] = 1;
	p[s - 1] = 2;
	sink = p[s / 2];
}

__attribute__((noinline)) size_t spend_a(size_t s)
{
	char *p = malloc(s);
	use(p, s);
	free(p);
	return s;
}

__attribute__((noinline)) size_t spend_b(size_t s)
{
	char *p = calloc(1, s);
	use(p, s);
	if (leak_b) {
		if (nkept == capkept) {
			capkept = capkept ? capkept * 2 : 1024;
			kept = realloc(kept, capkept * sizeof(void *));
		}
		kept[nkept++] = p;
	} else {
		free(p);
	}
	return s;
}

__attribute__((noinline)) size_t spend_c(size_t s)
{
	void *v = 0;

	if (use_mmap) {
		v = mmap(0, s, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (v == MAP_FAILED)
			return 0;
		use(v, s);
		munmap(v, s);
		return s;
	}
	if (aligned) {
		/* glibc's memalign calls malloc for alignments it gives anyway. */
		v = aligned_alloc(16, s);
	} else if (posix_memalign(&v, 64, s)) {
		return 0;
	}
	use(v, s);
	char *p = v;
	free(p);
	return s;
}

static void wait_line(const char *say)
{
	char line[64];

	printf("%s\n", say);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return;
}

int main(int argc, char **argv)
{
	unsigned long long total = (argc > 1 ? strtoull(argv[1], 0, 10) : 1024) << 20;
	unsigned long long done[3] = {0, 0, 0};
	const unsigned share[3] = {50, 30, 20};
	int wait = 0;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "leak"))
			leak_b = 1;
		if (!strcmp(argv[i], "wait"))
			wait = 1;
		if (!strcmp(argv[i], "mmap"))
			use_mmap = 1;
		if (!strcmp(argv[i], "aligned"))
			aligned = 1;
	}
	if (wait)
		wait_line("ready");
	/* Each function keeps to its share of what is done so far. */
	for (unsigned long long all = 0; all < total;) {
		for (int f = 0; f < 3; f++) {
			if (done[f] * 100 > (all + 1) * share[f])
				continue;
			size_t s = f == 0 ? size_of_next(4, 12) : f == 1 ? size_of_next(12, 20) : size_of_next(4, 20);
			done[f] += f == 0 ? spend_a(s) : f == 1 ? spend_b(s) : spend_c(s);
			all += s;
		}
	}
	printf("bytes a=%llu b=%llu c=%llu\n", done[0], done[1], done[2]);
	if (wait)
		wait_line("done");
	return 0;
}
