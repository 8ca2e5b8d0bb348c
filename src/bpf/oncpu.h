/* Shared between oncpu.bpf.c and the Rust loader (through the skeleton's
 * generated types): change a field here and both sides follow. */
#ifndef FGBPF_ONCPU_H
#define FGBPF_ONCPU_H

#include "common.h"

/* One aggregation bucket: a thread and the pair of stacks it was caught in. */
struct oncpu_key {
	__u32 pid;
	__u32 tid;
	/* Keys into the `stacks` map; 0 when there was no such stack (a kernel
	 * thread has no user stack) or it was not asked for. A key missing
	 * from `stacks` is a stack that could not be stored (counted). */
	__u64 user_stack;
	__u64 kern_stack;
	char comm[TASK_COMM_LEN];
};

/* Per-CPU counters; user space sums them over CPUs. Every sample that was
 * taken but could not be stored in full lands in one of the lost_* fields. */
struct oncpu_stats {
	__u64 samples;          /* samples that passed the filters */
	__u64 idle;             /* samples of the idle task, skipped by default */
	__u64 lost_map_full;    /* counts map had no room for a new key */
	__u64 lost_user_stack;  /* user stack not stored: stacks map full */
	__u64 lost_kern_stack;  /* kernel stack not stored: stacks map full */
};

#endif
