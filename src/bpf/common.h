/* Definitions every fgbpf BPF program and its Rust loader agree on. */
#ifndef FGBPF_COMMON_H
#define FGBPF_COMMON_H

#define TASK_COMM_LEN 16
/* The kernel's PERF_MAX_STACK_DEPTH: the stack map's value holds this many
 * instruction pointers. */
#define MAX_STACK_DEPTH 127

enum fg_proc_event_kind {
	/* First sample of a process: user space snapshots its mappings for
	 * symbolization while it still lives. */
	FG_PROC_NEW = 1,
	/* A watched process called execve: its mappings changed. */
	FG_PROC_EXEC = 2,
};

/* Sent through a ring buffer once per process (not per sample). */
struct fg_proc_event {
	__u32 pid;
	__u32 kind;
	char comm[TASK_COMM_LEN]; /* the process's (thread group leader's) name */
};

#endif
