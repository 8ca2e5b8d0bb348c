/* The monotonic clock in seconds, shared by the test workloads. */
#ifndef CLOCK_H
#define CLOCK_H

#include <time.h>

static inline __attribute__((always_inline)) double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif
