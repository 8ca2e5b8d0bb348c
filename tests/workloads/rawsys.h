/* System calls issued from inside the calling function. glibc's wrappers
 * are built without frame pointers, so a frame-pointer walk from inside
 * one skips the wrapper's caller; the workloads need every frame to show,
 * since the tests check which function a thread waited in. */
#ifndef RAWSYS_H
#define RAWSYS_H

#include <sys/syscall.h>

static inline __attribute__((always_inline)) long raw_syscall3(long n, long a, long b, long c)
{
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

#endif
