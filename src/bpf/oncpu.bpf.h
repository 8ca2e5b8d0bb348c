/* On-CPU sampler: runs on a cpu-clock perf event on every CPU and counts
 * (thread, user stack, kernel stack) in kernel maps. Nothing per sample
 * crosses to user space. */
#ifndef FGBPF_ONCPU_BPF_H
#define FGBPF_ONCPU_BPF_H

#include "fgbpf.h"
#include "counts.bpf.h"
#include "stacks.bpf.h"
#include "unwind.bpf.h"
#include "targets.bpf.h"

const volatile bool include_idle = false;

SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct fg_key key = {};
	struct fg_stats *st = get_stats();
	bool fresh = false;

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

	key.pid = pid;
	key.tid = tid;
	key.state = FG_ONCPU;
	key.slice_first = key.slice_last = slice_of(bpf_ktime_get_ns());
	key.cgroup = group_of((struct task_struct *)bpf_get_current_task());
	bpf_get_current_comm(&key.comm, sizeof(key.comm));
	if (user_stacks) {
		bool lost = false;

		__u32 walk = FG_WALK_NONE;

		key.user_stack = store_user_stack(ctx, pid, st, &lost, &walk);
		key.flags |= walk << FG_WALK_SHIFT;
		if (lost)
			st->lost_user_stack++;
	}
	if (kern_stacks) {
		bool lost = false;

		key.kern_stack = store_stack(ctx, 1, 0, &lost);
		if (lost)
			st->lost_kern_stack++;
	}
	if (add_count(&key, 1, &fresh))
		st->lost_samples++;
	else if (fresh && pid)
		note_process(ctx, pid, (struct task_struct *)bpf_get_current_task());
	return 0;
}

#endif
