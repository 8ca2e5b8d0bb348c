/* Target selection and process tracking shared by fgbpf's BPF programs:
 * one target filter and one process-event ring buffer for the object (the
 * loader fills them, see src/probe/targets.rs). */
#ifndef FGBPF_TARGETS_BPF_H
#define FGBPF_TARGETS_BPF_H

#include "fgbpf.h"

#define MAX_TARGETS 8192
#define MAX_KNOWN_PROCS 16384

const volatile bool filter_pids = false;
const volatile bool filter_tids = false;
const volatile bool follow_children = false;
/* fgbpf itself: left out of every program, so that a system-wide profile
 * shows the system and naming fgbpf's own frames does not load its debug
 * information. Its cost is reported as "own use". */
const volatile __u32 self_pid = 0;
/* --cgroup, --unit, --container: the scope's cgroup (its kernfs node ID,
 * 0: no scope), in cgroup v2 (scope_subsys < 0) or in the v1 hierarchy of
 * controller scope_subsys (its index in enum cgroup_subsys_id). */
const volatile __u64 scope_cgroup = 0;
const volatile __s32 scope_subsys = -1;

#define FG_MAX_CGROUP_DEPTH 32

/* Nanoseconds in a clock tick of /proc (USER_HZ): set by the loader. */
const volatile __u64 tick_ns = 10000000;

/* Before 5.5 start_boottime was real_start_time. */
struct task_struct___pre55 {
	struct task_struct___pre55 *group_leader;
	__u64 real_start_time;
};

/* A process's start: its thread group leader's boot-time start, which
 * execve keeps (de_thread hands it to the thread that takes over), in
 * clock ticks as /proc/PID/stat's starttime counts it, its low 32 bits
 * (497 days at 100 Hz). With its pid, what tells two processes given one
 * pid apart; user space compares it with starttime. */
static __always_inline __u32 proc_start(struct task_struct *task)
{
	__u64 ns;

	if (bpf_core_field_exists(task->start_boottime))
		ns = BPF_CORE_READ(task, group_leader, start_boottime);
	else
		ns = BPF_CORE_READ((struct task_struct___pre55 *)task, group_leader, real_start_time);
	return tick_ns ? ns / tick_ns : 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} target_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} target_tids SEC(".maps");

/* Processes user space has been told about. LRU so that a long system-wide
 * capture with many short processes never fills it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_KNOWN_PROCS);
	__type(key, __u32);
	__type(value, __u8);
} known_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} proc_events SEC(".maps");

/* Where an event is made before its perf buffer takes it (kernels before
 * 5.8, without ring buffers): not on the stack, which the switch handler's
 * chain of calls, that announces processes, has none of to spare. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fg_proc_event);
} proc_event_scratch SEC(".maps");

/* Set by the loader on kernels without ring buffers (before Linux 5.8, or
 * FGBPF_FORCE_FALLBACK=perf-buffer): proc_events is then a perf event
 * array, written with bpf_perf_event_output (src/probe/features.rs). */
const volatile bool events_perf = false;

/* Counted when proc_events is full; user space reports it. */
__u64 proc_events_lost = 0;
/* Children of followed processes that could not be added to target_pids
 * (full): they are not profiled; user space reports it. */
__u64 follow_lost = 0;

/* --group-by cgroup: stacks are keyed by the thread's cgroup too. */
const volatile bool group_cgroup = false;

/* The cgroup of `task` in the hierarchy the scope names (cgroup v2 when
 * there is no scope, or it is a v2 one), read through CO-RE. */
static __always_inline struct cgroup *task_cgroup(struct task_struct *task)
{
	struct css_set *cset = BPF_CORE_READ(task, cgroups);
	struct cgroup_subsys_state *css = NULL;

	if (scope_subsys < 0)
		return BPF_CORE_READ(cset, dfl_cgrp);
	if (scope_subsys >= CGROUP_SUBSYS_COUNT)
		return NULL;
	bpf_core_read(&css, sizeof(css), &cset->subsys[scope_subsys & 15]);
	return BPF_CORE_READ(css, cgroup);
}

/* The kernfs node ID of `task`'s cgroup for --group-by cgroup; 0 without. */
static __always_inline __u64 group_of(struct task_struct *task)
{
	struct cgroup *cg;

	if (!group_cgroup)
		return 0;
	cg = task_cgroup(task);
	return cg ? BPF_CORE_READ(cg, kn, id) : 0;
}

/* Whether `task` is in the scope's cgroup or one of its descendants, in
 * the hierarchy the scope names: read through CO-RE, so processes that
 * join or are forked into the cgroup during the capture are in. */
static __always_inline bool in_scope(struct task_struct *task)
{
	struct cgroup *cg;

	if (!scope_cgroup)
		return true;
	cg = task_cgroup(task);
	for (int i = 0; i < FG_MAX_CGROUP_DEPTH && cg; i++) {
		if (BPF_CORE_READ(cg, kn, id) == scope_cgroup)
			return true;
		/* A cgroup's own state (`self`) is its first member: the
		 * parent's state is the parent cgroup. */
		cg = (struct cgroup *)BPF_CORE_READ(cg, self.parent);
	}
	return false;
}

static __always_inline bool is_target(__u32 pid, __u32 tid)
{
	__u8 *v;

	if (!filter_pids && !filter_tids)
		return true;
	v = filter_pids ? bpf_map_lookup_elem(&target_pids, &pid) : NULL;
	if (v && *v == FG_TARGET)
		return true;
	if (filter_tids && bpf_map_lookup_elem(&target_tids, &tid))
		return true;
	return false;
}

/* How an event that user space must read at once is submitted: it wakes
 * user space even when events that do not wake it (send_proc_event) wait
 * unread before it, which would otherwise keep it from waking it. */
#define FG_WAKE BPF_RB_FORCE_WAKEUP

/* A ring buffer event for pid, of kind; NULL (counted lost) when the
 * buffer is full. The caller fills the rest and submits it (FG_WAKE). */
static __always_inline struct fg_proc_event *reserve_proc_event(__u32 pid, __u32 kind)
{
	struct fg_proc_event *e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&proc_events_lost, 1);
		return NULL;
	}
	e->pid = pid;
	e->kind = kind;
	return e;
}

/* A runtime's object a frame word names, seen for the first time
 * (FG_PROC_PY_CODE, FG_PROC_JAVA_*): announced so that user space reads it
 * while it lives. The runtime walkers need bpf_loop (5.17), which every
 * kernel with perf buffers only predates: never sent there, counted lost. */
static __always_inline void announce_object(__u32 pid, __u32 kind, __u64 addr, __u64 addr2)
{
	struct fg_proc_event *e;

	if (events_perf) {
		__sync_fetch_and_add(&proc_events_lost, 1);
		return;
	}
	e = reserve_proc_event(pid, kind);
	if (!e)
		return;
	e->comm[0] = 0;
	e->addr = addr;
	e->addr2 = addr2;
	e->start = 0;
	bpf_ringbuf_submit(e, FG_WAKE);
}

/* `ctx` is the program's own context, which bpf_perf_event_output needs;
 * `addr` and `addr2` the event's (FG_PROC_NEW: forked_from's). False when
 * the event could not be sent (counted lost). */
static __always_inline bool send_proc_event(void *ctx, __u32 pid, __u32 kind, struct task_struct *task,
					    __u64 addr, __u64 addr2)
{
	struct fg_proc_event *e;

	if (events_perf) {
		__u32 zero = 0;
		struct fg_proc_event *ev = bpf_map_lookup_elem(&proc_event_scratch, &zero);

		if (!ev) {
			__sync_fetch_and_add(&proc_events_lost, 1);
			return false;
		}
		ev->pid = pid;
		ev->kind = kind;
		ev->addr = addr;
		ev->addr2 = addr2;
		ev->start = proc_start(task);
		BPF_CORE_READ_STR_INTO(&ev->comm, task, group_leader, comm);
		/* Fails (and the event is counted lost) when this CPU's
		 * buffer is full. */
		if (bpf_perf_event_output(ctx, &proc_events, BPF_F_CURRENT_CPU, ev, sizeof(*ev))) {
			__sync_fetch_and_add(&proc_events_lost, 1);
			return false;
		}
		return true;
	}
	e = reserve_proc_event(pid, kind);
	if (!e)
		return false;
	e->addr = addr;
	e->addr2 = addr2;
	e->start = proc_start(task);
	BPF_CORE_READ_STR_INTO(&e->comm, task, group_leader, comm);
	/* An exit, a child that is a copy of its parent, or an execve needs
	 * nothing read at once: user space takes it at its next turn (within
	 * 50 ms) instead of being woken for it (a fork-and-exec load woke it
	 * 400 times a second). An exec'd process that stores a stack before
	 * then is announced again, waking user space (on_exec). */
	bpf_ringbuf_submit(e, kind == FG_PROC_EXIT || kind == FG_PROC_EXEC || (kind == FG_PROC_NEW && addr)
				      ? BPF_RB_NO_WAKEUP
				      : FG_WAKE);
	return true;
}

/* A new process's announcement: the process `task` was forked from, when
 * neither has exec'd since, and its size now in pages (what
 * /proc/PID/stat's vsize says). Its memory is a copy of that one's: user
 * space takes what it read of the parent, if of that size, instead of
 * reading the child's maps (a fork-and-exec child's first stack is often
 * before its exec). The parent is the one it was forked from, not a reaper
 * it was given to, when both share the layout exec randomized (mmap base
 * and stack). Both 0 otherwise. */
static __always_inline bool send_new(void *ctx, __u32 pid, struct task_struct *task)
{
	struct task_struct *parent = BPF_CORE_READ(task, real_parent);
	__u64 exec_id = BPF_CORE_READ(task, parent_exec_id);
	__u32 from = 0;
	__u64 pages = 0;

	if (parent && BPF_CORE_READ(task, self_exec_id) == exec_id &&
	    BPF_CORE_READ(parent, self_exec_id) == exec_id &&
	    BPF_CORE_READ(task, mm, mmap_base) == BPF_CORE_READ(parent, mm, mmap_base) &&
	    BPF_CORE_READ(task, mm, start_stack) == BPF_CORE_READ(parent, mm, start_stack)) {
		from = BPF_CORE_READ(parent, tgid);
		pages = BPF_CORE_READ(task, mm, total_vm);
	}
	return send_proc_event(ctx, pid, FG_PROC_NEW, task, from, pages);
}

/* Tells user space about a process the first time one of its stacks is
 * stored, so it can read the process's mappings while the process lives. */
static __always_inline void note_process(void *ctx, __u32 pid, struct task_struct *task)
{
	__u8 one = FG_KNOWN;
	/* A lookup takes no lock; most calls are for processes known already. */
	__u8 *v = bpf_map_lookup_elem(&known_procs, &pid);

	if (v && *v == FG_KNOWN)
		return;
	if (v) {
		*v = FG_KNOWN;
		send_proc_event(ctx, pid, FG_PROC_NEW, task, 0, 0);
		return;
	}
	if (bpf_map_update_elem(&known_procs, &pid, &one, BPF_NOEXIST) == 0)
		send_new(ctx, pid, task);
}

/* True when the child is a new process (not a thread). */
static __always_inline bool on_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ppid = BPF_CORE_READ(parent, tgid);
	__u32 cpid = BPF_CORE_READ(child, tgid);
	__u8 one = FG_TARGET;

	/* New threads share the parent's tgid and are already covered. */
	if (ppid == cpid)
		return false;
	if (follow_children && bpf_map_lookup_elem(&target_pids, &ppid) &&
	    bpf_map_update_elem(&target_pids, &cpid, &one, BPF_ANY))
		__sync_fetch_and_add(&follow_lost, 1);
	return true;
}

/* When a process's last thread exits: a followed process leaves the
 * targets, so that a command forking many short children never fills
 * target_pids; and it is forgotten as announced, so that a new process
 * given its PID is announced (and its map read) afresh. An announced one
 * is announced gone, for user space to let go of what it read about it.
 * True when the process ended (not only one of its threads). */
static __always_inline bool on_exit(void *ctx, struct task_struct *task)
{
	__u32 pid;

	/* signal->live counts the group's threads still running; it is
	 * already decremented for this one. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return false;
	pid = BPF_CORE_READ(task, tgid);
	if (bpf_map_delete_elem(&known_procs, &pid) == 0)
		send_proc_event(ctx, pid, FG_PROC_EXIT, task, 0, 0);
	if (follow_children)
		bpf_map_delete_elem(&target_pids, &pid);
	return true;
}

/* After execve the old mappings are gone: an announced process is
 * announced again (FG_PROC_EXEC), the new mappings in place. The held
 * `-- COMMAND` child becomes a target here. */
static __always_inline void on_exec(void *ctx, struct task_struct *task)
{
	__u32 pid = BPF_CORE_READ(task, tgid);
	__u8 *v = bpf_map_lookup_elem(&target_pids, &pid);

	/* The held command is the command from here on, announced now: its
	 * mappings and unwind tables are read while it starts, not after its
	 * first stored stack (a command that blocks once for its whole life
	 * stores its only stack as it exits). */
	__u8 *known;

	if (v && (*v == FG_TARGET_HELD || *v == FG_TARGET_AT_ENTRY)) {
		__u8 one = FG_KNOWN;

		if (*v == FG_TARGET_HELD)
			*v = FG_TARGET;
		bpf_map_update_elem(&known_procs, &pid, &one, BPF_ANY);
		send_proc_event(ctx, pid, FG_PROC_NEW, task, 0, 0);
		return;
	}
	/* The new image is mapped by now; user space reads it at its next
	 * turn, not woken for it: most exec'd programs of a busy host (a
	 * shell's, a build's) are gone by then and stored no stack, and
	 * reading each while it lived was most of what a whole-host recorder
	 * cost there. One that stores a stack before it is read is announced
	 * again then (note_process: known only from before its exec), waking
	 * user space to read it while it lives, as when this announcement is
	 * lost. */
	known = bpf_map_lookup_elem(&known_procs, &pid);
	if (known && *known == FG_KNOWN) {
		*known = FG_KNOWN_BEFORE_EXEC;
		send_proc_event(ctx, pid, FG_PROC_EXEC, task, 0, 0);
	}
}

#endif
