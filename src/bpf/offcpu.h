/* Shared between offcpu.bpf.c and the Rust loader (through the skeleton's
 * generated types). */
#ifndef FGBPF_OFFCPU_H
#define FGBPF_OFFCPU_H

#include "common.h"

/* Why a thread left the CPU, from its state at switch-out. */
enum offcpu_state {
	OFFCPU_SLEEPING = 0,        /* interruptible: sleeps, sockets, futexes */
	OFFCPU_UNINTERRUPTIBLE = 1, /* D state: usually disk I/O */
	OFFCPU_RUNQUEUE = 2,        /* preempted while runnable: waiting for a CPU */
};

struct offcpu_key {
	__u32 pid;
	__u32 tid;
	/* Keys into `stacks` (see stacks.bpf.h); 0 when there is no stack. */
	__u64 user_stack;
	__u64 kern_stack;
	__u32 state;        /* enum offcpu_state */
	/* 1: the block began before the capture; user space seeded its start
	 * from /proc, so it has no user stack. */
	__u32 pre_existing;
	char comm[TASK_COMM_LEN];
};

/* A thread that is off-CPU now, keyed by thread id in a global map: a
 * per-CPU map would lose or inflate intervals of threads that migrate. */
struct offcpu_start {
	__u64 ts;          /* bpf_ktime_get_ns() at switch-out */
	__u64 user_stack;  /* taken at switch-out, while the thread was current */
	__u32 pid;
	__u32 state;
	__u32 pre_existing;
	__u32 pad;
};

struct offcpu_stats {
	__u64 switches;        /* switch-outs of target threads */
	__u64 recorded;        /* intervals added to counts */
	__u64 too_short;       /* dropped by --min-block */
	__u64 too_long;        /* dropped by --max-block */
	__u64 lost_start_full; /* starts map full: interval not measured */
	__u64 lost_map_full;   /* counts map full: interval not stored */
	__u64 lost_user_stack; /* stacks map full */
	__u64 lost_kern_stack; /* stacks map full */
	__u64 lost_ns;         /* time of the intervals lost above */
};

#endif
