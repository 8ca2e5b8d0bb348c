/* Off-CPU tracer on sched_switch alone (no kprobe or fentry needed). Each
 * traced thread has one entry in `starts` for its life, rewritten in place
 * at its switches: at switch-out it notes the time, its state and its user
 * stack; at switch-in it adds the elapsed time to the thread's
 * (stacks, state) bucket. The kernel stack is read at switch-in, from the
 * stack the thread saved when it blocked, and only for intervals the
 * filters keep. With measure_runs (wall-clock captures) every switch-out
 * also adds the time the thread ran since its switch-in, so that each
 * thread's time adds up to the window exactly. Nothing per switch crosses
 * to user space. switch_btf or switch_raw on kernels with bpf_loop; their
 * _compat variants and walkers walk_switch_* otherwise (tailwalk.bpf.h). */
#ifndef FGBPF_OFFCPU_BPF_H
#define FGBPF_OFFCPU_BPF_H

#include "fgbpf.h"
#include "counts.bpf.h"
#include "stacks.bpf.h"
#include "unwind.bpf.h"
#include "tailwalk.bpf.h"
#include "targets.bpf.h"
#include "staged.bpf.h"

#define TASK_INTERRUPTIBLE 0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_DEAD 0x80
#define TASK_NOLOAD 0x400
#define PF_KTHREAD 0x00200000

const volatile __u64 min_block_ns = 0;
const volatile __u64 max_block_ns = ~0ULL;
/* Bit (1 << enum fg_state) set for each off-CPU state to record. */
const volatile __u32 state_mask = 0xe;
/* Record one switch in `sample_every`; weights are scaled by it. */
const volatile __u32 sample_every = 1;
/* System-wide by default: kernel threads (kworker, ksoftirqd, ...) idle
 * in their loops and would bury the waits of the system's programs. */
const volatile bool skip_kthreads = false;
/* Set by the loader when sched_switch has no prev_state argument (before
 * Linux 5.18, or FGBPF_FORCE_FALLBACK=task-state): the state is read from
 * the task instead (src/probe/features.rs). */
const volatile bool state_from_task = false;
/* Set by the loader with raw tracepoints, whose task arguments are plain
 * numbers that bpf_get_task_stack refuses, and before 5.9, which has no
 * bpf_get_task_stack: the kernel stack is then taken at switch-out, while
 * the thread is current, as offcputime does (blocks seeded from /proc
 * before the capture then have none). */
const volatile bool kstack_at_switch_out = false;
/* Wall-clock captures: measure the time traced threads run (FG_RAN). */
const volatile bool measure_runs = false;
/* fgbpf flight --wait-above: waits at least this long are announced
 * (FG_PROC_LONG_WAIT) as they end; 0: none. */
const volatile __u64 announce_wait_ns = 0;

/* A field of a task: read directly through its BTF pointer where the hook
 * passes one (tp_btf: a load), else with a helper (raw tracepoints). */
#define TASK_FIELD(btf, task, field) ((btf) ? (task)->field : BPF_CORE_READ(task, field))

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct fg_start);
} starts SEC(".maps");

/* task_struct's state before Linux 5.14 renamed it `__state` (and made it
 * an unsigned int): CO-RE picks whichever field the running kernel has. */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline unsigned int task_state(struct task_struct *task)
{
	if (bpf_core_field_exists(task->__state))
		return BPF_CORE_READ(task, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)task, state);
}

/* prev's state at switch-out: the tracepoint's fourth argument where the
 * kernel has one (5.18+), else the task's own field, read as the
 * tracepoint itself read it before 5.18. With state_from_task the
 * verifier prunes the ctx[3] read: a tp_btf program touching an argument
 * the tracepoint lacks is refused, and a raw_tp one fails to attach. */
static __always_inline unsigned int prev_state_of(unsigned long long *ctx, struct task_struct *prev)
{
	if (state_from_task)
		return task_state(prev);
	return ctx[3];
}

static __always_inline __u32 classify(bool preempt, unsigned int prev_state)
{
	if (preempt || prev_state == 0)
		return FG_RUNQUEUE;
	if ((prev_state & TASK_UNINTERRUPTIBLE) && !(prev_state & TASK_NOLOAD))
		return FG_UNINTERRUPTIBLE;
	return FG_SLEEPING;
}

/* tailwalk.bpf.h: the switch tracer's table walker, tail-called by the
 * compat switch programs and by itself. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} switch_walks SEC(".maps");

/* The name of `task` into comm. */
static __always_inline void task_comm(struct task_struct *task, char *comm, const bool btf)
{
	if (btf) {
		*(__u64 *)&comm[0] = *(__u64 *)&task->comm[0];
		*(__u64 *)&comm[8] = *(__u64 *)&task->comm[8];
	} else {
		BPF_CORE_READ_STR_INTO((char (*)[TASK_COMM_LEN])comm, task, comm);
	}
}

/* The time a traced thread ran, from `from` to `to`: counted under
 * (thread, FG_RAN), its comm the current task's (the thread switching
 * out). */
static __always_inline void add_ran(struct fg_stats *st, struct task_struct *task, __u32 pid, __u32 tid,
				    __u64 from, __u64 to, const bool btf)
{
	struct fg_key key = {};
	bool fresh = false;

	key.pid = pid;
	key.tid = tid;
	key.start = proc_start(task);
	key.state = FG_RAN;
	key.slice_first = slice_of(from);
	key.slice_last = slice_of(to);
	task_comm(task, key.comm, btf);
	if (add_count(&key, to - from, &fresh)) {
		st->lost_runs++;
		st->lost_run_ns += to - from;
	}
}

/* Writes a switch-out's entry: in place when the thread has one (cur, or
 * looked up again after a tail call), the phase last, so that a waker on
 * another CPU sees the wait only once it is whole. */
static __always_inline void keep_start(struct fg_stats *st, __u32 tid, struct fg_start *start,
				       struct fg_start *cur)
{
	if (!cur)
		cur = bpf_map_lookup_elem(&starts, &tid);
	if (cur) {
		__u32 phase = start->phase;

		start->phase = FG_SKIPPED;
		*cur = *start;
		asm volatile("" ::: "memory");
		cur->phase = phase;
		return;
	}
	if (bpf_map_update_elem(&starts, &tid, start, BPF_ANY))
		st->lost_start_full++;
}

/* A switch-out, once its user stack is in start. cur: the thread's entry,
 * NULL when it has none or after a tail call. */
static __always_inline void switch_out_rest(void *ctx, struct fg_stats *st, struct task_struct *prev,
					    __u32 tid, struct fg_start *start, struct fg_start *cur,
					    bool user_lost, bool known)
{
	if (user_lost)
		st->lost_user_stack++;
	/* Announced when its stack is taken, not when the wait ends: a
	 * process may exit right after its only wait. known: user space has
	 * read it already. */
	if (start->user_stack && !known)
		note_process(ctx, start->pid, prev);
	if (kern_stacks && kstack_at_switch_out) {
		bool lost = false;

		start->kern_stack = store_stack(ctx, 1, 0, &lost);
		if (lost)
			st->lost_kern_stack++;
	}
	start->phase = FG_WAITING;
	keep_start(st, tid, start, cur);
}

#include "waits.bpf.h"
#include "untraced.bpf.h"

/* An entry left by an earlier thread that had the id `tid` (every switch
 * of a thread is after its birth): dropped, and counted. NULL then. */
static __always_inline struct fg_start *own_start(struct fg_stats *st, struct fg_start *start,
						  struct task_struct *task, __u32 tid, const bool btf)
{
	if (!start || start->ts >= TASK_FIELD(btf, task, start_time))
		return start;
	st->stale_starts++;
	bpf_map_delete_elem(&starts, &tid);
	return NULL;
}

/* A switch-out's state across the parts it is split into (on_switch). */
struct switch_out {
	struct fg_start start;
	__u32 tid;
	__u32 prev_state;
	__u32 walk; /* see store_user_stack */
	bool preempt;
	bool lost;  /* its user stack could not be stored */
	bool known; /* user space has read its process */
};

/* A switch-out up to its user stack: ends what the thread was doing and
 * fills o->start; true when its wait is recorded (the stack is wanted).
 * *cur: the thread's entry, or NULL. */
static __always_inline bool switch_out_begin(void *ctx, struct fg_stats *st, struct task_struct *prev,
					     struct switch_out *o, struct fg_start **curp, const bool btf)
{
	__u32 pid = TASK_FIELD(btf, prev, tgid), tid = TASK_FIELD(btf, prev, pid);
	bool dying = TASK_FIELD(btf, prev, exit_state) || (o->prev_state & TASK_DEAD);
	struct fg_start *cur = NULL;
	__u64 now;

	*curp = NULL;
	if (tid == 0 || pid == self_pid)
		return false;
	if (!is_target(pid, tid) || !in_scope(prev)) {
		/* A followed process leaves the targets at its exit (on_exit),
		 * before its threads' last switch-outs: a thread traced until
		 * now ends as a target does, or its entry would be found by
		 * the next thread given its id. */
		if (!dying)
			return false;
		cur = bpf_map_lookup_elem(&starts, &tid);
		if (!cur)
			return false;
	}
	if (skip_kthreads && (TASK_FIELD(btf, prev, flags) & PF_KTHREAD)) {
		st->kthread_switches++;
		return false;
	}
	/* One time for the run's end and the wait's start: they meet. */
	now = bpf_ktime_get_ns();
	if (!cur)
		cur = bpf_map_lookup_elem(&starts, &tid);
	cur = own_start(st, cur, prev, tid, btf);
	if (cur && cur->phase == FG_WAITING)
		end_untraced_wait(ctx, st, prev, tid, cur, now, btf);
	else if (cur && cur->phase == FG_RUNNING)
		hidden_switches(ctx, st, prev, tid, cur, now, btf);
	if (measure_runs) {
		/* No entry: it has run since before the capture (or since it
		 * was first traced). */
		__u64 born = TASK_FIELD(btf, prev, start_time);
		__u64 since = cur ? (cur->phase == FG_RUNNING ? cur->ts : 0) : born > slice_origin ? born : slice_origin;

		if (since && since < now)
			add_ran(st, prev, pid, tid, since, now, btf);
	}
	/* A thread's last switch-out, at its exit: no switch-in follows. */
	if (dying) {
		if (cur)
			bpf_map_delete_elem(&starts, &tid);
		return false;
	}
	o->tid = tid;
	o->start.pid = pid;
	o->start.ts = now;
	/* While waiting, fg_start's run_delay is the one at the switch-out. */
	if (bpf_core_field_exists(prev->sched_info.run_delay))
		o->start.run_delay = TASK_FIELD(btf, prev, sched_info.run_delay);
	o->start.state = classify(o->preempt, o->prev_state);
	if (state_mask & (1 << o->start.state)) {
		st->switches++;
		if (staged)
			st->lean_switches++;
	}
	if (!(state_mask & (1 << o->start.state)) ||
	    (sample_every > 1 && bpf_get_prandom_u32() % sample_every)) {
		/* A wait the filters leave out: its switch-in records nothing
		 * but the start of a run. */
		if (cur) {
			cur->phase = FG_SKIPPED;
		} else if (measure_runs) {
			o->start.phase = FG_SKIPPED;
			keep_start(st, tid, &o->start, NULL);
		}
		return false;
	}
	*curp = cur;
	return true;
}

/* The switching-out thread's user stack into o->start, with how it was
 * walked. */
static __always_inline void take_user_stack(void *ctx, struct fg_stats *st, struct switch_out *o, const bool compat)
{
	o->start.user_stack = store_user_stack(ctx, o->start.pid, st, &o->lost, &o->walk, &o->known, compat);
	o->start.flags |= o->walk << FG_WALK_SHIFT;
}

/* The compat variant for kernels without bpf_loop (tailwalk.bpf.h), in
 * one function: it may tail-call the walker and not return, so the caller
 * has done everything else. btf: prev is a BTF pointer (tp_btf). */
static __always_inline void switch_out_compat(void *ctx, struct fg_stats *st, struct task_struct *prev,
					      bool preempt, unsigned int prev_state, const bool btf)
{
	struct switch_out o = { .preempt = preempt, .prev_state = prev_state, .walk = FG_WALK_NONE };
	struct fg_start *cur;

	if (!switch_out_begin(ctx, st, prev, &o, &cur, btf))
		return;
	/* prev is still current here: its user stack is readable now, and
	 * only now. */
	if (user_stacks) {
		struct walk_cont *c = tail_walk_begin(o.start.pid);

		if (c) {
			c->start = o.start;
			c->tid = o.tid;
			bpf_tail_call(ctx, &switch_walks, 0);
		}
		take_user_stack(ctx, st, &o, true);
	}
	switch_out_rest(ctx, st, prev, o.tid, &o.start, cur, o.lost, false);
}

/* The other programs split the switch into subprograms: the walkers the
 * user stack's walk calls (and their bpf_loop callbacks) then sit on a
 * frame that holds only `struct switch_out`, not on one that also holds
 * every wait key the switch builds: 6.1's verifier holds a chain of calls
 * (dead code and callbacks counted) to 512 bytes of stack in all. The
 * switch-out's entry is looked up again after the walk. */
#define SWITCH_PARTS(kind, btf)                                                                        \
	static __noinline int switch_in_##kind(void *ctx, struct fg_stats *st, struct task_struct *next) \
	{                                                                                              \
		switch_in(ctx, st, next, btf);                                                         \
		return 0;                                                                              \
	}                                                                                              \
	static __noinline int switch_out_begin_##kind(void *ctx, struct fg_stats *st,                  \
						      struct task_struct *prev, struct switch_out *o)  \
	{                                                                                              \
		struct fg_start *cur;                                                                  \
                                                                                                       \
		return switch_out_begin(ctx, st, prev, o, &cur, btf);                                  \
	}                                                                                              \
	static __noinline int switch_out_end_##kind(void *ctx, struct fg_stats *st,                    \
						    struct task_struct *prev, struct switch_out *o)    \
	{                                                                                              \
		switch_out_rest(ctx, st, prev, o->tid, &o->start, NULL, o->lost, o->known);            \
		return 0;                                                                              \
	}

/* A traced switch-in: the thread runs from now, and the scheduler's
 * account of it is noted for the next switch to measure against
 * (fg_start's run_delay and pcount while FG_RUNNING). */
static __always_inline void begin_run(struct fg_start *start, struct task_struct *task, __u64 now, const bool btf)
{
	start->ts = now;
	start->phase = FG_RUNNING;
	start->flags = 0;
	start->sum_exec = TASK_FIELD(btf, task, se.sum_exec_runtime);
	/* As they will stand once this run's arrival is counted (the kernel
	 * counts it after the tracepoint). */
	sched_account(task, &start->run_delay, &start->pcount, btf);
	start->run_delay += queued_for(task, now, btf);
	start->pcount++;
}

/* A wall-clock capture's first switch-in of a target thread it holds no
 * entry for: a thread born during the capture, which waited for a CPU
 * from its birth (no user stack yet), or one the seeding from /proc missed,
 * off-CPU since before the capture. Either way it runs from now on. */
static __always_inline void first_switch_in(void *ctx, struct fg_stats *st, struct task_struct *next,
					    __u32 tid, __u64 now, const bool btf)
{
	__u32 pid = TASK_FIELD(btf, next, tgid);
	__u64 born = TASK_FIELD(btf, next, start_time);
	struct fg_start start = {};

	if (tid == 0 || pid == self_pid || !is_target(pid, tid) || !in_scope(next))
		return;
	if (skip_kthreads && (TASK_FIELD(btf, next, flags) & PF_KTHREAD))
		return;
	start.pid = pid;
	if (born > slice_origin) {
		start.ts = born;
		start.state = FG_RUNQUEUE;
	} else {
		start.ts = slice_origin;
		start.state = FG_SLEEPING;
		start.flags = FG_PRE_EXISTING;
	}
	if (start.ts < now && (state_mask & (1 << start.state)))
		record_wait(ctx, st, next, tid, &start, now, btf, false);
	start.state = 0;
	begin_run(&start, next, now, btf);
	if (bpf_map_update_elem(&starts, &tid, &start, BPF_NOEXIST))
		st->lost_start_full++;
}

static __always_inline void switch_in(void *ctx, struct fg_stats *st, struct task_struct *next, const bool btf)
{
	__u32 tid = TASK_FIELD(btf, next, pid);
	struct fg_start *start = own_start(st, bpf_map_lookup_elem(&starts, &tid), next, tid, btf);
	__u64 now = bpf_ktime_get_ns();

	if (!start) {
		if (measure_runs)
			first_switch_in(ctx, st, next, tid, now, btf);
		return;
	}
	if (start->phase == FG_WAITING) {
		__u64 woke = 0, queueing;

		/* A sleep ends at its wakeup, and the thread waits for a CPU
		 * from then on: since it was last queued, and before that for
		 * as long as the kernel counted (run_delay grows when a queued
		 * thread moves to another CPU's queue). A preempted thread was
		 * queued from its switch-out on. Seeded waits have no count at
		 * their start. */
		if (start->state != FG_RUNQUEUE) {
			queueing = start->flags & FG_PRE_EXISTING ? queued_for(next, now, btf)
								  : queued_since(next, start->run_delay, now, btf);
			/* All of it, when the kernel counted the whole wait. */
			if (queueing)
				woke = queueing < now - start->ts ? now - queueing : start->ts;
		}
		record_woken_wait(ctx, st, next, tid, start, woke, now, btf, false);
	} else if (start->phase == FG_RUNNING &&
		   (!(start->flags & FG_PRE_EXISTING) ||
		    (start->pcount && TASK_FIELD(btf, next, se.sum_exec_runtime) > start->sum_exec))) {
		/* Seeded as running from /proc with the scheduler's counts: it
		 * has run since (its run time grew), so a switch-out ended
		 * that run unreported. */
		untraced_switch_out(ctx, st, next, tid, start, now, btf);
	} else if (start->phase == FG_RUNNING) {
		/* Switched in while held running: seeded as running from
		 * /proc, and it has not run since (or its counts were not
		 * read): it was waiting for a CPU since the capture began. */
		struct fg_start wait = *start;

		wait.state = FG_RUNQUEUE;
		wait.flags = FG_PRE_EXISTING;
		wait.user_stack = 0;
		wait.kern_stack = 0;
		wait.waker = 0;
		if (state_mask & (1 << FG_RUNQUEUE))
			record_wait(ctx, st, next, tid, &wait, now, btf, false);
	}
	begin_run(start, next, now, btf);
}

SWITCH_PARTS(btf, true)
SWITCH_PARTS(raw, false)

/* Switch-in first: switch-out may end in a tail call (compat). */
static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev,
				     struct task_struct *next, unsigned int prev_state, const bool compat,
				     const bool btf)
{
	struct fg_stats *st = get_stats();
	struct switch_out o = { .preempt = preempt, .prev_state = prev_state, .walk = FG_WALK_NONE };

	if (!st)
		return 0;
	if (compat) {
		switch_in(ctx, st, next, btf);
		switch_out_compat(ctx, st, prev, preempt, prev_state, btf);
		return 0;
	}
	if (btf)
		switch_in_btf(ctx, st, next);
	else
		switch_in_raw(ctx, st, next);
	if (!(btf ? switch_out_begin_btf(ctx, st, prev, &o) : switch_out_begin_raw(ctx, st, prev, &o)))
		return 0;
	/* prev is still current here: its user stack is readable now, and
	 * only now. */
	if (user_stacks)
		take_user_stack(ctx, st, &o, false);
	if (btf)
		switch_out_end_btf(ctx, st, prev, &o);
	else
		switch_out_end_raw(ctx, st, prev, &o);
	return 0;
}

/* The walker's stage: prev is still current, as at the switch-out. */
static __always_inline int walk_switch(void *ctx, struct task_struct *prev)
{
	struct walk_cont *c = walk_cont();
	struct fg_stats *st = get_stats();
	struct fg_start start;
	__u32 walk = FG_WALK_NONE;
	bool lost = false;

	if (!c || !st)
		return 0;
	WALK_ON(ctx, switch_walks, c);
	start = c->start;
	start.user_stack = tail_walk_end(c, st, &lost, &walk);
	start.flags |= walk << FG_WALK_SHIFT;
	switch_out_rest(ctx, st, prev, c->tid, &start, NULL, lost, false);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, preempt, prev, next, prev_state_of(ctx, prev), false, true);
}

/* The first load's in a staged start (staged.bpf.h). */
SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf_staged, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	run_full(ctx, &full_switch);
	return on_switch(ctx, preempt, prev, next, prev_state_of(ctx, prev), false, true);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, preempt, prev, next, prev_state_of(ctx, prev), false, false);
}

/* The first load's in a staged start (staged.bpf.h). */
SEC("raw_tp/sched_switch")
int BPF_PROG(switch_raw_staged, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	run_full(ctx, &full_switch);
	return on_switch(ctx, preempt, prev, next, prev_state_of(ctx, prev), false, false);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf_compat, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, preempt, prev, next, prev_state_of(ctx, prev), true, true);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(switch_raw_compat, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, preempt, prev, next, prev_state_of(ctx, prev), true, false);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(walk_switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return walk_switch(ctx, prev);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(walk_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return walk_switch(ctx, prev);
}

#endif
