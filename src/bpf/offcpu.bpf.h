/* Off-CPU tracer on sched_switch alone (no kprobe or fentry needed): at
 * switch-out of a target thread it notes the time, its state and its user
 * stack; at switch-in it adds the elapsed time to the thread's
 * (stacks, state) bucket. The kernel stack is read at switch-in, from the
 * stack the thread saved when it blocked, and only for intervals the
 * filters keep. Nothing per switch crosses to user space. switch_btf or
 * switch_raw on kernels with bpf_loop; their _compat variants and walkers
 * walk_switch_* otherwise (tailwalk.bpf.h). */
#ifndef FGBPF_OFFCPU_BPF_H
#define FGBPF_OFFCPU_BPF_H

#include "fgbpf.h"
#include "counts.bpf.h"
#include "stacks.bpf.h"
#include "unwind.bpf.h"
#include "tailwalk.bpf.h"
#include "targets.bpf.h"

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

/* A switch-out, once its user stack is in start. */
static __always_inline void switch_out_rest(void *ctx, struct fg_stats *st, struct task_struct *prev,
					    __u32 tid, struct fg_start *start, bool user_lost)
{
	if (user_lost)
		st->lost_user_stack++;
	/* Announced when its stack is taken, not when the wait ends: a
	 * process may exit right after its only wait. */
	if (start->user_stack)
		note_process(ctx, start->pid, prev);
	if (kern_stacks && kstack_at_switch_out) {
		bool lost = false;

		start->kern_stack = store_stack(ctx, 1, 0, &lost);
		if (lost)
			st->lost_kern_stack++;
	}
	start->ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&starts, &tid, start, BPF_ANY))
		st->lost_start_full++;
}

/* compat: the variant for kernels without bpf_loop (tailwalk.bpf.h),
 * which may tail-call the walker and not return: the caller has done
 * everything else. */
static __always_inline void switch_out(void *ctx, struct fg_stats *st, struct task_struct *prev,
				       bool preempt, unsigned int prev_state, const bool compat)
{
	__u32 pid = BPF_CORE_READ(prev, tgid), tid = BPF_CORE_READ(prev, pid);
	struct fg_start start = {};
	bool lost = false;

	if (tid == 0 || pid == self_pid || !is_target(pid, tid) || !in_scope(prev))
		return;
	if (skip_kthreads && (BPF_CORE_READ(prev, flags) & PF_KTHREAD)) {
		st->kthread_switches++;
		return;
	}
	/* A thread's last switch-out, at its exit, has no switch-in: its
	 * entry would stay in `starts` for ever, and short threads would fill
	 * it. */
	if (BPF_CORE_READ(prev, exit_state) || (prev_state & TASK_DEAD))
		return;
	start.pid = pid;
	start.state = classify(preempt, prev_state);
	if (!(state_mask & (1 << start.state)))
		return;
	st->switches++;
	if (sample_every > 1 && bpf_get_prandom_u32() % sample_every)
		return;
	/* prev is still current here: its user stack is readable now, and
	 * only now. */
	if (user_stacks) {
		__u32 walk = FG_WALK_NONE;

		if (compat) {
			struct walk_cont *c = tail_walk_begin(pid);

			if (c) {
				c->start = start;
				c->tid = tid;
				bpf_tail_call(ctx, &switch_walks, 0);
			}
		}
		start.user_stack = store_user_stack(ctx, pid, st, &lost, &walk, compat);
		start.flags |= walk << FG_WALK_SHIFT;
	}
	switch_out_rest(ctx, st, prev, tid, &start, lost);
}

static __always_inline void switch_in(void *ctx, struct fg_stats *st, struct task_struct *next)
{
	__u32 tid = BPF_CORE_READ(next, pid);
	struct fg_start *start = bpf_map_lookup_elem(&starts, &tid);
	struct fg_key key = {};
	bool fresh = false;
	__u64 now, delta;

	if (!start)
		return;
	now = bpf_ktime_get_ns();
	delta = now - start->ts;
	key.slice_first = slice_of(start->ts);
	key.slice_last = slice_of(now);
	key.user_stack = start->user_stack;
	key.state = start->state;
	key.flags = start->flags;
	key.waker = start->waker;
	key.kern_stack = start->kern_stack;
	bpf_map_delete_elem(&starts, &tid);
	/* Seeded blocks started before the capture: their length so far is
	 * not their length, so the filters do not apply to them. */
	if (!(key.flags & FG_PRE_EXISTING)) {
		if (delta < min_block_ns) {
			st->too_short++;
			return;
		}
		if (delta > max_block_ns) {
			st->too_long++;
			return;
		}
	}
	/* Sampled intervals stand for sample_every of their kind; a seeded
	 * block was not sampled, it is the one thread's own wait. */
	if (!(key.flags & FG_PRE_EXISTING))
		delta *= sample_every;
	key.pid = BPF_CORE_READ(next, tgid);
	key.tid = tid;
	key.cgroup = group_of(next);
	BPF_CORE_READ_STR_INTO(&key.comm, next, comm);
	if (kern_stacks) {
		bool lost = false;

		/* Else taken at switch-out, in key.kern_stack already. */
		if (!kstack_at_switch_out)
			key.kern_stack = store_task_kernel_stack(next, 1, &lost);
		if (lost)
			st->lost_kern_stack++;
	}
	if (add_count(&key, delta, &fresh)) {
		st->lost_intervals++;
		st->lost_ns += delta;
		return;
	}
	if (fresh)
		note_process(ctx, key.pid, next);
	st->recorded++;
}

/* Switch-in first: switch-out may end in a tail call (compat). */
static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev,
				     struct task_struct *next, unsigned int prev_state, const bool compat)
{
	struct fg_stats *st = get_stats();

	if (!st)
		return 0;
	switch_in(ctx, st, next);
	switch_out(ctx, st, prev, preempt, prev_state, compat);
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
	switch_out_rest(ctx, st, prev, c->tid, &start, lost);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, preempt, prev, next, prev_state_of(ctx, prev), false);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, preempt, prev, next, prev_state_of(ctx, prev), false);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf_compat, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, preempt, prev, next, prev_state_of(ctx, prev), true);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(switch_raw_compat, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, preempt, prev, next, prev_state_of(ctx, prev), true);
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
