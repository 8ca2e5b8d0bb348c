/* Stacks the .eh_frame walker must stop on, one cause each, built the way
 * users build (gcc -O2): the summary must give each its real cause.
 * Usage: cuts MODE SECONDS, where MODE is
 *   depth    cut_deep recurses 200 frames deep and spins at the bottom:
 *            longer than the walker's 127-frame limit;
 *   realign  cut_realigned spins in its body: a 64-byte-aligned local and
 *            an alloca make gcc realign the stack through r10 (DRAP), and
 *            the body's CFA is a DWARF expression (DW_OP_breg6 -N;
 *            DW_OP_deref) the walker does not follow;
 *   fault    cut_paged spins after dropping (MADV_DONTNEED) the stack page
 *            that holds its caller's return address, as a page swapped out
 *            would be: the walker's read of it fails. It never returns
 *            (the page reads back as zeros): it exits from there;
 *   bare     cut_bare, assembly without CFI that keeps no frame pointer
 *            (rbp holds 1), spins: no unwind row and no frame pointer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"

static volatile unsigned long sink;

static void spin_until(double until)
{
	while (now() < until)
		for (int i = 0; i < 10000; i++)
			sink++;
}

__attribute__((noinline)) unsigned long cut_deep(int n, double until)
{
	volatile char here = (char)n;
	unsigned long r;

	if (n == 0) {
		spin_until(until);
		return 0;
	}
	/* `here` is read after the call: no tail call, one frame per level. */
	r = cut_deep(n - 1, until);
	return r + here;
}

__attribute__((noinline)) void cut_realigned(double until, int n)
{
	char aligned[64] __attribute__((aligned(64)));
	char *scratch = __builtin_alloca(n);

	memset(aligned, n, sizeof(aligned));
	memset(scratch, 1, n);
	sink += (uintptr_t)aligned + (uintptr_t)scratch;
	while (now() < until)
		for (int i = 0; i < 10000; i++)
			sink += aligned[i & 63] + scratch[i % n];
}

__attribute__((noinline, noreturn)) void cut_paged(double until, uintptr_t callers_return)
{
	/* Its own frame lies pages below (the caller's is 16 KB). */
	madvise((void *)(callers_return & ~(uintptr_t)4095), 4096, MADV_DONTNEED);
	spin_until(until);
	_exit(0);
}

__attribute__((noinline)) void paged_caller(double until)
{
	volatile char big[16384];

	big[0] = 1;
	big[sizeof(big) - 1] = 1;
	/* Where its return address lies: above its saved rbp. */
	cut_paged(until, (uintptr_t)__builtin_frame_address(0) + 8);
}

/* Spins RDI times, rbp holding 1: no CFI, so no unwind row, and no frame
 * pointer to follow. */
void cut_bare(unsigned long n);
__asm__(".text\n"
	".globl cut_bare\n"
	".type cut_bare, @function\n"
	"cut_bare:\n"
	"	push %rbp\n"
	"	mov $1, %rbp\n"
	"1:	sub $1, %rdi\n"
	"	jnz 1b\n"
	"	pop %rbp\n"
	"	ret\n"
	".size cut_bare, .-cut_bare\n");

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	double until = now() + (argc > 2 ? atof(argv[2]) : 1.0);

	if (!strcmp(mode, "depth")) {
		sink += cut_deep(200, until);
	} else if (!strcmp(mode, "realign")) {
		cut_realigned(until, argc + 100);
	} else if (!strcmp(mode, "fault")) {
		paged_caller(until);
	} else if (!strcmp(mode, "bare")) {
		while (now() < until)
			cut_bare(10000000);
	} else {
		fprintf(stderr, "usage: cuts depth|realign|fault|bare SECONDS\n");
		return 1;
	}
	return 0;
}
