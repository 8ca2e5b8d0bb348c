/* On-CPU sampler: runs on a cpu-clock perf event on every CPU and counts
 * (thread, user stack, kernel stack) in kernel maps. Nothing per sample
 * crosses to user space. do_sample on kernels with bpf_loop;
 * do_sample_compat and its walker walk_sample otherwise (tailwalk.bpf.h). */
#ifndef FGBPF_ONCPU_BPF_H
#define FGBPF_ONCPU_BPF_H

#include "fgbpf.h"
#include "counts.bpf.h"
#include "stacks.bpf.h"
#include "unwind.bpf.h"
#include "tailwalk.bpf.h"
#include "targets.bpf.h"
#include "staged.bpf.h"

const volatile bool include_idle = false;

/* tailwalk.bpf.h: the sampler's table walker, tail-called by the compat
 * sampler and by itself. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sample_walks SEC(".maps");

/* Whether the sample interrupted user code: the privilege level in the
 * low bits of cs. The context's registers are the UAPI struct pt_regs
 * (bpf_user_pt_regs_t), read in 8-byte words: cs is word 17. */
static __always_inline bool in_user_mode(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	return (((__u64 *)&ctx->regs)[17] & 3) == 3;
#else
	return false;
#endif
}

/* A sample's kernel stack and count, once its user stack is in key. */
static __always_inline int sample_rest(struct bpf_perf_event_data *ctx, struct fg_stats *st, struct fg_key *key,
				       bool user_lost)
{
	bool fresh = false;

	if (user_lost)
		st->lost_user_stack++;
	/* A sample in user mode has no kernel stack: the timer interrupted
	 * user code (the helper would find none, at some cost). */
	if (kern_stacks && !in_user_mode(ctx)) {
		bool lost = false;

		key->kern_stack = store_stack(ctx, 1, 0, &lost);
		if (lost)
			st->lost_kern_stack++;
	}
	if (add_count(key, 1, &fresh))
		st->lost_samples++;
	else if (fresh && key->pid)
		note_process(ctx, key->pid, (struct task_struct *)bpf_get_current_task());
	return 0;
}

/* compat: the variant for kernels without bpf_loop (tailwalk.bpf.h). */
static __always_inline int sample(struct bpf_perf_event_data *ctx, const bool compat)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct fg_key key = {};
	struct fg_stats *st = get_stats();
	bool lost = false;

	if (!st)
		return 0;
	if (tid == 0 && !include_idle) {
		st->idle++;
		return 0;
	}
	if (pid == self_pid || !is_target(pid, tid) ||
	    !in_scope((struct task_struct *)bpf_get_current_task()))
		return 0;
	st->samples++;
	if (staged)
		st->lean_samples++;
	key.pid = pid;
	key.tid = tid;
	key.start = proc_start((struct task_struct *)bpf_get_current_task());
	key.state = FG_ONCPU;
	key.slice_first = key.slice_last = slice_of(bpf_ktime_get_ns());
	key.cgroup = group_of((struct task_struct *)bpf_get_current_task());
	bpf_get_current_comm(&key.comm, sizeof(key.comm));
	if (user_stacks) {
		__u32 walk = FG_WALK_NONE;

		if (compat) {
			struct walk_cont *c = tail_walk_begin(pid);

			if (c) {
				c->key = key;
				bpf_tail_call(ctx, &sample_walks, 0);
				/* Not reached unless the walker is missing:
				 * frame pointers then. */
			}
		}
		key.user_stack = store_user_stack(ctx, pid, st, &lost, &walk, NULL, compat);
		key.flags |= walk << FG_WALK_SHIFT;
	}
	return sample_rest(ctx, st, &key, lost);
}

SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, false);
}

/* The first load's sampler in a staged start (staged.bpf.h). */
SEC("perf_event")
int do_sample_staged(struct bpf_perf_event_data *ctx)
{
	run_full(ctx, &full_sample);
	return sample(ctx, false);
}

SEC("perf_event")
int do_sample_compat(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, true);
}

SEC("perf_event")
int walk_sample(struct bpf_perf_event_data *ctx)
{
	struct walk_cont *c = walk_cont();
	struct fg_stats *st = get_stats();
	struct fg_key key;
	__u32 walk = FG_WALK_NONE;
	bool lost = false;

	if (!c || !st)
		return 0;
	WALK_ON(ctx, sample_walks, c);
	key = c->key;
	key.user_stack = tail_walk_end(c, st, &lost, &walk);
	key.flags |= walk << FG_WALK_SHIFT;
	return sample_rest(ctx, st, &key, lost);
}

#endif
