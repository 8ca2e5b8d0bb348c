/* `fgbpf events`: one count and one pair of stacks per hit of a classic
 * tracepoint, a uprobe or uretprobe, or a USDT probe. Each attachment
 * carries its event's index as its BPF cookie (bpf_get_attach_cookie,
 * Linux 5.15; USDT: libbpf's bpf_usdt_cookie); the index goes into the
 * key's cgroup field (events never group by cgroup), which user space
 * turns into the event's root frame. Every hit that passes the target
 * filter is counted in event_stats whether or not its stacks and count
 * could be stored, so that nothing is lost silently. These programs load
 * only for `events` (autoload off otherwise), on kernels with bpf_loop:
 * the walk is the on-CPU sampler's (unwind.bpf.h). */
#ifndef FGBPF_EVENTS_BPF_H
#define FGBPF_EVENTS_BPF_H

#include "fgbpf.h"
#include "counts.bpf.h"
#include "stacks.bpf.h"
#include "unwind.bpf.h"
#include "targets.bpf.h"
#include <bpf/usdt.bpf.h>

/* Events one capture may ask for (src/probe/points.rs: MAX_EVENTS). */
#define FG_MAX_EVENTS 64

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FG_MAX_EVENTS);
	__type(key, __u32);
	__type(value, struct fg_event_stats);
} event_stats SEC(".maps");

/* --weight argN: each hit of a uprobe or USDT probe weighs its argument
 * N (1-based; a uretprobe's is its return value whatever N), read as a
 * 64-bit integer (negative ones weigh 0); 0: each hit weighs 1. */
const volatile __u32 weight_arg = 0;

/* kernel: take the kernel stack too (a tracepoint's; a uprobe's would be
 * the breakpoint trap's own frames). */
static __always_inline int count_event(void *ctx, __u64 cookie, const bool kernel, __u64 weight)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid, idx = (__u32)cookie;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fg_event_stats *es;
	struct fg_stats *st = get_stats();
	struct fg_key key = {};
	bool lost = false, fresh = false;

	if (!st || idx >= FG_MAX_EVENTS)
		return 0;
	if (pid == self_pid || !is_target(pid, tid) || !in_scope(task))
		return 0;
	es = bpf_map_lookup_elem(&event_stats, &idx);
	if (!es)
		return 0;
	es->seen++;
	key.pid = pid;
	key.tid = tid;
	key.start = proc_start(task);
	key.state = FG_ONCPU;
	key.slice_first = key.slice_last = slice_of(bpf_ktime_get_ns());
	key.cgroup = idx;
	bpf_get_current_comm(&key.comm, sizeof(key.comm));
	if (user_stacks && tid) {
		__u32 walk = FG_WALK_NONE;

		key.user_stack = store_user_stack(ctx, pid, st, &lost, &walk, NULL, false);
		key.flags |= walk << FG_WALK_SHIFT;
		if (lost)
			es->lost_user_stack++;
	}
	if (kernel && kern_stacks) {
		bool klost = false;

		key.kern_stack = store_stack(ctx, 1, 0, &klost);
		if (klost)
			es->lost_kern_stack++;
	}
	if (add_count(&key, weight, &fresh)) {
		es->lost_counts++;
		return 0;
	}
	es->recorded++;
	if (fresh && key.pid)
		note_process(ctx, key.pid, task);
	return 0;
}

/* A weight as the hit's count: a negative argument weighs nothing. */
static __always_inline __u64 weight_of(long v)
{
	return v < 0 ? 0 : (__u64)v;
}

SEC("tracepoint")
int event_tp(void *ctx)
{
	return count_event(ctx, bpf_get_attach_cookie(ctx), true, 1);
}

SEC("uprobe")
int event_uprobe(struct pt_regs *ctx)
{
	__u64 weight = 1;

	switch (weight_arg) {
	case 0: break;
	case 1: weight = weight_of(PT_REGS_PARM1(ctx)); break;
	case 2: weight = weight_of(PT_REGS_PARM2(ctx)); break;
	case 3: weight = weight_of(PT_REGS_PARM3(ctx)); break;
	case 4: weight = weight_of(PT_REGS_PARM4(ctx)); break;
	case 5: weight = weight_of(PT_REGS_PARM5(ctx)); break;
	default: weight = weight_of(PT_REGS_PARM6(ctx)); break;
	}
	return count_event(ctx, bpf_get_attach_cookie(ctx), false, weight);
}

SEC("uretprobe")
int event_uretprobe(struct pt_regs *ctx)
{
	return count_event(ctx, bpf_get_attach_cookie(ctx), false, weight_arg ? weight_of(PT_REGS_RC(ctx)) : 1);
}

SEC("usdt")
int event_usdt(struct pt_regs *ctx)
{
	long v = 1;

	if (weight_arg && bpf_usdt_arg(ctx, weight_arg - 1, &v))
		v = 0;
	return count_event(ctx, bpf_usdt_cookie(ctx), false, weight_of(v));
}

#endif
